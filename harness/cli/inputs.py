"""Which files a command reads when it is given none: the committed traces
and the newest run folder (`imprint report`, `imprint check`), and the gate
config (`imprint check`, `imprint regress`)."""
from __future__ import annotations

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
    from ..analysis.gateconfig import load_config
    if path == DEFAULT_GATE_CONFIG and not Path(path).exists():
        raise UserInputError(f"no gate config at {Path(path).resolve()}: run imprint from the root of a checkout "
                             f"(the folder that holds {DEFAULT_GATE_CONFIG}), or give --config FILE", file=path)
    return load_config(path)


def latest_run_dir(runs_dir: str | Path) -> Path | None:
    """The newest run folder (run ids start with a timestamp)."""
    d = Path(runs_dir)
    if not d.is_dir():
        return None
    runs = [p for p in d.iterdir() if run_complete(p)]
    return max(runs, key=lambda p: (p.name, p.stat().st_mtime)) if runs else None


def run_complete(folder: Path) -> bool:
    """Whether a folder is a finished `imprint run`: under its final name
    (not a staging folder, whose name starts with a dot), with its
    summary.json, which is written last."""
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



def gate_inputs(inputs: dict) -> tuple[list[Path], list[str]]:
    """A gate config's [inputs]: the default traces plus the configured round
    logs, with a note for each round-log path that is absent."""
    paths = default_inputs(inputs["traces"], inputs["latest_run"], inputs["runs_dir"])
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
