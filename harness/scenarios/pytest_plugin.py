"""Scenario files as pytest items: `pytest scenarios/` runs them.

Only *.yaml files directly inside a directory named `scenarios` are
collected, so malformed fixtures elsewhere are not mistaken for scenarios."""
from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collect_file(parent: pytest.Collector, file_path: Path):
    if file_path.suffix == ".yaml" and file_path.parent.name == "scenarios":
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self):
        yield ScenarioItem.from_parent(self, name=self.path.stem)


class ScenarioFailed(Exception):
    pass


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from .runner import run_scenario
        from .model import load_scenario
        scn = load_scenario(self.path)
        trace = Path(self.config._tmp_path_factory.mktemp("scenario")) / f"{self.path.stem}.jsonl" \
            if hasattr(self.config, "_tmp_path_factory") else None
        run = run_scenario(scn, trace)
        if not run.passed:
            lines = [str(f) for f in run.failures] + ([run.error] if run.error else [])
            raise ScenarioFailed("\n".join(lines) + (f"\ntrace: {trace}" if trace else ""))

    def repr_failure(self, excinfo, style=None):
        from imprint_core.errors import UserInputError
        if isinstance(excinfo.value, (ScenarioFailed, UserInputError)):
            return f"scenario {self.path.name} failed:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"scenario: {self.name}"
