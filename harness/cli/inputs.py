"""Which files a command reads when it is given none: the committed traces
and the newest run folder (`imprint report`, `imprint check`), and the gate
config (`imprint check`, `imprint regress`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from imprint_core.errors import UserInputError

DEFAULT_GATE_CONFIG = "reports/gate.toml"
RUN_OUTPUTS = "reports/run"
"""Where a command writes by default (ignored by git): the committed reports
(reports/compare/, reports/tune/, reports/latest/) change only when named
with --out, as `make tune` and `make snapshot` do."""


def gate_config(path: str):
    """The gate config at `path`. The default one missing almost always means
    the command ran outside a checkout: say where it looked and what to do."""
    from ..analysis.gate.config import load_config
    if path == DEFAULT_GATE_CONFIG and not Path(path).exists():
        raise UserInputError(f"no gate config at {Path(path).resolve()}: run imprint from the root of a checkout "
                             f"(the folder that holds {DEFAULT_GATE_CONFIG}), or give --config FILE", file=path)
    return load_config(path)


SCENARIO_LIBRARY = "scenarios"
"""The scenario library: what `imprint run` runs when given no paths."""


@dataclass(frozen=True)
class RunFolder:
    """A complete run of `imprint run` that the gate or the report judges."""
    path: Path
    run_id: str
    scenarios: int              # the scenarios it ran (its summary.json)
    library: int | None         # the scenario files in the library now (None: no library folder here)

    def describe(self) -> str:
        of = f" of the {self.library} in {SCENARIO_LIBRARY}/" if self.library is not None else ""
        return f"{self.path} ({self.scenarios} scenario(s){of})"

    def to_dict(self) -> dict:
        return {"path": str(self.path), "run_id": self.run_id, "scenarios": self.scenarios, "library": self.library}


def run_folder(path: str | Path, key: str = "--run") -> RunFolder:
    """The run at `path`, which must be complete (`run_complete`); else a
    UserInputError naming it."""
    folder = Path(path)
    if not run_complete(folder):
        why = ("no such folder" if not folder.exists() else "not a folder" if not folder.is_dir()
               else "a staging folder (the run did not finish)" if folder.name.startswith(".")
               else "no summary.json (the run did not finish)" if not (folder / "summary.json").is_file()
               else "no traces in it")
        raise UserInputError(why, file=str(folder), key=key,
                             expected="a complete run folder of `imprint run` (traces/runs/<run-id>, with its "
                                      "summary.json)")
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}
    rows = summary.get("scenarios") if isinstance(summary, dict) else None
    count = len(rows) if isinstance(rows, list) else len(list(folder.glob("*.jsonl")))
    library = Path(SCENARIO_LIBRARY)
    from ..scenarios import scenario_files
    return RunFolder(folder, str(summary.get("run_id") or folder.name) if isinstance(summary, dict) else folder.name,
                     count, len(scenario_files([library])) if library.is_dir() else None)


def newest_run(runs_dir: str | Path) -> RunFolder | None:
    latest = latest_run_dir(runs_dir)
    return run_folder(latest) if latest is not None else None


def judged_run(given: str | None, inputs: dict, *, given_paths: bool = False) -> tuple[RunFolder | None, str, bool]:
    """The run `imprint check` and `imprint report` judge: the one --run
    names, else (without TRACES, where the config reads runs) the newest
    complete one. Also how to say it, and whether it is as it should be:
    without TRACES, a config that reads runs and none complete is not."""
    if given:
        run = run_folder(given)
        return run, run.describe(), True
    if given_paths:
        return None, "none (only the TRACES given)", True
    if not inputs["latest_run"]:
        return None, "none (the config's inputs.latest_run is false)", True
    run = newest_run(inputs["runs_dir"])
    if run is None:
        return None, (f"none: no complete run under {inputs['runs_dir']}/ (run `imprint run` first, or name one "
                      "with --run DIR)"), False
    return run, run.describe(), True


def latest_run_dir(runs_dir: str | Path) -> Path | None:
    """The newest complete run folder: the one that finished last (its
    summary.json is written when every scenario is done), not the one whose
    name sorts last."""
    d = Path(runs_dir)
    if not d.is_dir():
        return None
    runs = [p for p in d.iterdir() if run_complete(p)]
    return max(runs, key=lambda p: ((p / "summary.json").stat().st_mtime, p.name)) if runs else None


def run_complete(folder: Path) -> bool:
    """Whether a folder is a finished `imprint run`: under its final name
    (not a staging folder, whose name starts with a dot), with its
    summary.json, which is written once every scenario is done."""
    folder = Path(folder)
    return (folder.is_dir() and not folder.name.startswith(".") and (folder / "summary.json").is_file()
            and any(folder.glob("*.jsonl")))


def incomplete_runs(runs_dir: str | Path) -> list[Path]:
    """The folders under `runs_dir` that hold traces of a run that did not
    finish: a crash's staging folder, or an old run folder without its
    summary.json. `imprint check` and `imprint report` skip them and can name
    them."""
    d = Path(runs_dir)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and any(p.glob("*.jsonl")) and not run_complete(p))


def default_inputs(traces: Sequence[str], latest_run: bool = True, runs_dir: str = "traces/runs") -> list[Path]:
    """The committed traces (the `traces` folders without their `runs/`
    folder) plus the newest run folder."""
    out: list[Path] = []
    runs = Path(runs_dir).resolve()
    for t in traces:
        p = Path(t)
        if not p.exists():
            continue
        if p.is_dir() and (runs == p.resolve() or runs.is_relative_to(p.resolve())):
            for child in sorted(p.iterdir()):
                if child.resolve() != runs and (child.is_dir() or child.suffix == ".jsonl"):
                    out.append(child)
        else:
            out.append(p)
    if latest_run:
        latest = latest_run_dir(runs_dir)
        if latest is not None:
            out.append(latest)
    return out



_NEWEST = Path()   # gate_inputs' default run: the newest complete one, where the config asks for it


def gate_inputs(inputs: dict, run: Path | None = _NEWEST) -> tuple[list[Path], list[str]]:
    """A gate config's [inputs]: the default traces plus the configured round
    logs, with a note for each round-log path that is absent; `run`, where
    given, in place of the newest run (None: no run)."""
    if run is _NEWEST:
        run = latest_run_dir(inputs["runs_dir"]) if inputs["latest_run"] else None
    paths = default_inputs(inputs["traces"], False, inputs["runs_dir"]) + ([Path(run)] if run is not None else [])
    notes = [f"incomplete run {p} (interrupted before its summary.json); skipped"
             for p in (incomplete_runs(inputs["runs_dir"]) if inputs["latest_run"] else [])]
    for rl in inputs["round_logs"]:
        if Path(rl).exists():
            paths.append(Path(rl))
        else:
            notes.append(f"round logs {rl} not found; skipped")
    if not paths:
        raise UserInputError("no traces to check", file=" ".join(inputs["traces"]),
                             expected="traces or round logs (run `imprint run` first)")
    return paths, notes
