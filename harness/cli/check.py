"""`imprint check`: the release gate, ADR 0102's three invalidation
conditions against the thresholds of a TOML config."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from imprint_core.errors import UserInputError

from ..conventions import EXIT_FAILED, EXIT_OK
from .console import console
from .inputs import default_inputs, incomplete_runs

DEFAULT_CONFIG = "reports/gate.toml"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="the release gate: the record's invalidation conditions",
        description="The release gate: ADR 0102's three invalidation conditions checked on traces and round logs "
                    "against the thresholds of a TOML config. Exit 0 when all hold, 1 when one fails, 2 on "
                    "unusable input.",
        epilog="Without TRACES: the config's [inputs] (by default traces/ without traces/runs/, the newest folder "
               "under traces/runs/, and the configured round logs). Paths are relative to the current directory. "
               "Condition 1 judges the regressions (`imprint regress add`) run by run: one that fails, or whose "
               "round log is missing from the config's inputs, makes the gate fail and is named.")
    p.add_argument("paths", nargs="*", metavar="TRACES", help="traces and round logs (files or directories)")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"thresholds (default {DEFAULT_CONFIG})")
    p.add_argument("--labels", action="append", metavar="FILE",
                   help="labels file (repeatable; default: the config's inputs.labels)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(fn=run)


def _config_inputs(inputs: dict) -> tuple[list[Path], list[str]]:
    """The config's [inputs]: the default traces plus the configured round
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


def run(args: argparse.Namespace) -> int:
    from ..analysis.gate import load_config, run_gate
    cfg = load_config(args.config)
    label_files = args.labels if args.labels is not None else cfg.inputs["labels"]
    paths, notes = (args.paths, []) if args.paths else _config_inputs(cfg.inputs)
    conditions, frames, warnings = run_gate(paths, cfg, label_files, expect_all=not args.paths)
    notes += warnings
    passed = all(c.passed for c in conditions)
    if args.json:
        print(json.dumps({"passed": passed, "config": cfg.path, "labels": list(label_files),
                          "inputs": frames.files and {"files": len(frames.files),
                                                      "runs": int((frames.runs["source"] == "trace").sum()),
                                                      "round_logs": int((frames.runs["source"] == "roundlog").sum())},
                          "notes": notes, "conditions": [c.to_dict() for c in conditions]}, indent=2, default=str))
        return EXIT_OK if passed else EXIT_FAILED
    from rich.table import Table
    out = console()
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    t = Table(title=f"imprint check ({cfg.path}): {len(frames.files)} file(s), "
                    f"{int((frames.runs['source'] == 'trace').sum())} trace(s), "
                    f"{int((frames.runs['source'] == 'roundlog').sum())} round log(s)")
    for col, just in [("condition", "left"), ("subject", "left"), ("figure", "right"), ("threshold", "right"),
                      ("verdict", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in conditions:
        for i, row in enumerate(c.rows):
            verdict = "[green]holds[/]" if row["passed"] else "[dim]not judged[/]" if row["passed"] is None \
                else "[red]FAILS[/]"
            t.add_row(f"{c.number}. {c.name}" if i == 0 else "", row["subject"], row["figure"], row["threshold"],
                      verdict)
        if not c.rows:
            t.add_row(f"{c.number}. {c.name}", "-", "no data", "-", "[red]FAILS[/]")
    out.print(t)
    for c in conditions:
        for d in c.details:
            out.print(f"  {c.number}. {d}", soft_wrap=True)
    failed = [str(c.number) for c in conditions if not c.passed]
    out.print("[green]gate: all three conditions hold[/]" if passed else
              f"[red]gate: condition {', '.join(failed)} fail(s)[/]")
    return EXIT_OK if passed else EXIT_FAILED
