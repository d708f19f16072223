"""`imprint check`: the release gate, ADR 0102's three invalidation
conditions against the thresholds of a TOML config."""
from __future__ import annotations

import argparse
import json
import sys

from ..conventions import EXIT_FAILED, EXIT_OK
from .console import console, progress
from .inputs import DEFAULT_GATE_CONFIG, gate_config, gate_inputs, judged_run
from .ruleargs import add_rule_options, rule_of



def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="the release gate: the record's invalidation conditions",
        description="The release gate: ADR 0102's three invalidation conditions checked on traces and round logs "
                    "against the thresholds of a TOML config. Exit 0 when all hold, 1 when one fails, 2 on "
                    "unusable input.",
        epilog="Without TRACES: the config's [inputs] (by default traces/ without traces/runs/, the newest complete "
               "run under traces/runs/ or the one --run names, and the configured round logs); with no complete run "
               "the gate fails. Paths are relative to the current directory. "
               "Condition 1 judges the regressions (`imprint regress add`) run by run: one that fails, or whose "
               "round log is missing from the config's inputs, makes the gate fail and is named.")
    p.add_argument("paths", nargs="*", metavar="TRACES", help="traces and round logs (files or directories)")
    p.add_argument("--run", metavar="DIR", help="the run of `imprint run` to judge (default: the newest complete one "
                                               "under the config's runs_dir; with TRACES: none)")
    p.add_argument("--config", default=DEFAULT_GATE_CONFIG, help=f"thresholds (default {DEFAULT_GATE_CONFIG})")
    p.add_argument("--labels", action="append", metavar="FILE",
                   help="labels file (repeatable; default: the config's inputs.labels)")
    add_rule_options(p)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--junit-xml", metavar="FILE",
                   help="also write the verdict as JUnit XML for a CI dashboard: a test case per line of the gate's "
                        "table (failure where it fails, skipped where it is not judged) and one for the judged run; "
                        "written whole or not at all")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.gate.conditions import run_gate
    cfg = gate_config(args.config)
    if args.rule or args.param or args.params:
        # Judge another rule against the same thresholds and the baseline pinned for the shipped one.
        cfg.premature_stops["rule"], cfg.premature_stops["rule_params"] = rule_of(args)
    label_files = args.labels if args.labels is not None else cfg.inputs["labels"]
    run, run_words, run_ok = judged_run(args.run, cfg.inputs, given_paths=bool(args.paths))
    paths, notes = ([*args.paths, *([run.path] if run else [])], []) if args.paths else \
        gate_inputs(cfg.inputs, run.path if run else None)
    with progress("check", "reading, replaying and judging the inputs", enabled=not args.json):
        conditions, frames, warnings = run_gate(paths, cfg, label_files, expect_all=not args.paths)
    notes += warnings
    passed = all(c.passed for c in conditions) and run_ok
    if args.junit_xml:
        _write_junit(args.junit_xml, conditions, run_words, run_ok, cfg.path)
    if args.json:
        print(json.dumps({"passed": passed, "config": cfg.path, "labels": list(label_files),
                          "run": run.to_dict() if run else None, "run_judged": run_words,
                          "inputs": frames.files and {"files": len(frames.files),
                                                      "runs": int((frames.runs["source"] == "trace").sum()),
                                                      "round_logs": int((frames.runs["source"] == "roundlog").sum())},
                          "notes": notes, "conditions": [c.to_dict() for c in conditions]}, indent=2, default=str))
        return EXIT_OK if passed else EXIT_FAILED
    from rich.markup import escape
    from rich.table import Table
    out = console()
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    out.print(f"judged run: {run_words}", markup=False, soft_wrap=True)
    t = Table(title=escape(f"imprint check ({cfg.path}): {len(frames.files)} file(s), "
                           f"{int((frames.runs['source'] == 'trace').sum())} trace(s), "
                           f"{int((frames.runs['source'] == 'roundlog').sum())} round log(s)"))
    for col, just in [("condition", "left"), ("subject", "left"), ("figure", "right"), ("threshold", "right"),
                      ("verdict", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    # Subjects hold bracketed mode names ("remote:llamacpp [tokenizer, exact]"): text, never markup.
    for c in conditions:
        for i, row in enumerate(c.rows):
            verdict = "[green]holds[/]" if row["passed"] else "[dim]not judged[/]" if row["passed"] is None \
                else "[red]FAILS[/]"
            t.add_row(escape(f"{c.number}. {c.name}") if i == 0 else "", escape(str(row["subject"])),
                      escape(str(row["figure"])), escape(str(row["threshold"])), verdict)
        if not c.rows:
            t.add_row(escape(f"{c.number}. {c.name}"), "-", "no data", "-", "[red]FAILS[/]")
    out.print(t)
    for c in conditions:
        if c.details:
            out.print()
            out.print(f"condition {c.number} ({c.name}):", markup=False, soft_wrap=True)
            for group, lines in grouped_details(c):
                indent = "  "
                if group is not None:
                    out.print(f"  {group}:", markup=False, soft_wrap=True)
                    indent = "    "
                for line in lines:
                    out.print(f"{indent}- {line}", markup=False, soft_wrap=True)
    failed = [str(c.number) for c in conditions if not c.passed]
    if not run_ok:
        out.print(f"[red]gate: FAILS: {escape(run_words)}[/]")
    out.print("[green]gate: all three conditions hold[/]" if passed else
              f"[red]gate: condition {', '.join(failed)} fail(s)[/]" if failed else "[red]gate: no run judged[/]")
    return EXIT_OK if passed else EXIT_FAILED


def grouped_details(c) -> list[tuple[str | None, list[str]]]:
    """A condition's notes under the corpus or provider they start with (the
    prefix of its rows' subjects), the notes about the whole condition first."""
    prefixes = {str(r["subject"]).rsplit(": ", 1)[0] for r in c.rows if ": " in str(r["subject"])}
    prefixes |= {str(r["subject"]) for r in c.rows}
    general: list[str] = []
    groups: dict[str, list[str]] = {}
    for d in c.details:
        group = max((p for p in prefixes if d.startswith(p + ": ")), key=len, default=None)
        if group is None:
            general.append(d)
        else:
            groups.setdefault(group, []).append(d[len(group) + 2:])
    return ([(None, general)] if general else []) + list(groups.items())


def _write_junit(path: str, conditions, run_words: str, run_ok: bool, config: str) -> None:
    from pathlib import Path

    from imprint_core.errors import UserInputError
    from imprint_core.files import atomic_write_text
    from ..analysis.gate.conditions import junit_xml
    try:
        atomic_write_text(Path(path), junit_xml(conditions, run_words, run_ok, str(config)))
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing="write the JUnit XML", key="--junit-xml",
                                           expected="a file in a folder that exists and can be written") from None
