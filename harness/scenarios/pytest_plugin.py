"""Scenario files as pytest items: `pytest scenarios/` runs them.

Collected: *.yaml files directly inside a directory named `scenarios`, and
any *.yaml file named on the command line (`pytest /tmp/mine/abab.yaml`).
Other YAML files (cassettes, malformed fixtures) are not mistaken for
scenarios; a folder named on the command line that holds some gets a note
saying why they were left out."""
from __future__ import annotations

from pathlib import Path

import pytest

NOT_COLLECTED = ("imprint scenarios: {n} *.yaml file(s) in {folder} not collected: scenario files are collected "
                 "directly inside a folder named `scenarios`, or when named on the command line "
                 "(pytest {folder}/FILE.yaml)")


def pytest_collect_file(parent: pytest.Collector, file_path: Path):
    if file_path.suffix == ".yaml" and (file_path.parent.name == "scenarios" or parent.session.isinitpath(file_path)):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items) -> list[str]:
    notes = []
    for arg in config.args:
        folder = (start_path / arg.split("::")[0]).resolve()
        if folder.is_dir() and folder.name != "scenarios":
            n = len(list(folder.glob("*.yaml")))
            if n:
                notes.append(NOT_COLLECTED.format(n=n, folder=folder))
    return notes


class ScenarioFile(pytest.File):
    def collect(self):
        yield ScenarioItem.from_parent(self, name=self.path.stem)


class ScenarioFailed(Exception):
    pass


class ScenarioItem(pytest.Item):
    def runtest(self) -> None:
        from .runner import run_scenario
        from .loading import load_scenario
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
