"""`imprint run`: scenario files on the virtual clock, a trace each, a table."""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError
from imprint_core.files import atomic_write_text, clean_stale, staging_dir

from ..conventions import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from .console import console
from .inputs import SCENARIO_LIBRARY


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run scenario files on the virtual clock and check their expectations",
                       description="Run scenarios (default: all of scenarios/), write one JSONL trace each under "
                                   "traces/runs/<run-id>/, print a table; exit 1 if any expectation fails.")
    r.add_argument("paths", nargs="*", metavar="PATH",
                   help=f"scenario files or directories (default: {SCENARIO_LIBRARY})")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    r.add_argument("--traces", default="traces/runs", help="where run folders go (default: traces/runs)")
    r.add_argument("--run-id", metavar="ID", help="the run folder's name under --traces, which must not exist yet "
                                                 "(default: the start time and 4 hex digits); `make run` names its "
                                                 "own, to judge that run and no other")
    r.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios import load_scenario, scenario_files
    from ..scenarios.runner import run_scenario
    files = scenario_files(args.paths or [SCENARIO_LIBRARY])
    if not files:
        raise UserInputError("no scenario files (*.yaml) found", file=" ".join(args.paths or [SCENARIO_LIBRARY]))
    scenarios, problems = [], []
    for f in files:
        try:
            scenarios.append(load_scenario(f))
        except UserInputError as exc:
            problems.append(exc.describe())
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return EXIT_INPUT
    run_id = args.run_id if args.run_id is not None else time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    out_dir = Path(args.traces) / run_id
    if args.run_id is not None:
        named = bool(run_id.strip()) and run_id == Path(run_id).name and not run_id.startswith(".")
        if not named or out_dir.exists():
            raise UserInputError(f"{run_id!r}: " + ("exists already" if named else "not a folder name"),
                                 key="--run-id", file=str(out_dir) if named else None,
                                 expected="a new folder name under --traces, without / and not starting with a dot")
    # Written under a staging name and renamed once summary.json is in: a run
    # folder under its final name is complete; a crash's staging folder is
    # removed by the next run.
    try:
        Path(args.traces).mkdir(parents=True, exist_ok=True)
        clean_stale(Path(args.traces))
        stage = staging_dir(Path(args.traces), run_id)
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing="create the run folder", key="--traces",
                                           expected="a folder that can be written", file=args.traces) from None
    runs = []
    err = console(stderr=True)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    try:
        with Progress(TextColumn("[bold]imprint run"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=err, transient=True,
                      disable=args.json or not err.is_terminal) as progress:
            task = progress.add_task("", total=len(scenarios))
            for i, (scn, f) in enumerate(zip(scenarios, files), start=1):
                progress.update(task, description=scn.name)
                runs.append(run_scenario(scn, stage / f"{f.stem}.jsonl", run_id=run_id))
                progress.advance(task)
                if not err.is_terminal:     # a log gets a line per scenario where a terminal gets the bar
                    _print_finished(runs[-1], i, len(scenarios))
    except BaseException:
        # A refused input (a rule that cannot be resolved, a user's rule that raised) or an interrupt:
        # the run is void and its traces with it; only a killed process leaves a staging folder.
        shutil.rmtree(stage, ignore_errors=True)
        raise
    rows = [r.row() for r in runs]
    for row in rows:    # each trace as it is named once the folder is complete
        if row["trace"]:
            row["trace"] = str(out_dir / Path(row["trace"]).name)
    summary = {"run_id": run_id, "traces": str(out_dir), "passed": sum(r.passed for r in runs),
               "failed": sum(not r.passed for r in runs), "scenarios": rows}
    atomic_write_text(stage / "summary.json", json.dumps(summary, indent=2) + "\n")
    os.rename(stage, out_dir)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_run_table(rows, summary)
    return EXIT_OK if summary["failed"] == 0 else EXIT_FAILED


def _print_finished(run, i: int, total: int) -> None:
    row = run.row()
    verdict = "pass" if row["passed"] else "FAIL: " + "; ".join(row["failures"])
    print(f"imprint run [{i}/{total}] {row['scenario']}: {verdict} ({row['stop_reason'] or '-'}, "
          f"{_n(row['rounds'])} round(s), {run.wall_seconds:.1f} s)", file=sys.stderr, flush=True)


def _print_run_table(rows: list[dict], summary: dict) -> None:
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=f"imprint run {summary['run_id']}", show_lines=False)
    for col, just in [("scenario", "left"), ("stop reason", "left"), ("final mode", "left"), ("rounds", "right"),
                      ("requests", "right"), ("reserved", "right"), ("charged", "right"), ("refunded", "right"),
                      ("result", "left")]:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        verdict = "[green]pass[/]" if r["passed"] else "[red]FAIL[/] " + escape("; ".join(r["failures"]))
        table.add_row(r["scenario"], r["stop_reason"] or "-", r["final_mode"] or "-", _n(r["rounds"]),
                      _n(r["requests"]), _n(r["reserved"]), _n(r["charged"]), _n(r["refunded"]), verdict)
    out = console()
    out.print(table)
    out.print(f"{summary['passed']} passed, {summary['failed']} failed; traces in {summary['traces']}")


def _n(v: Any) -> str:
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)
