"""`imprint faults`: the fault matrix into reports/faults.md."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..conventions import EXIT_FAILED, EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "faults", help="the fault matrix into reports/faults.md",
        description="The fault matrix: every provider kind against every fault, on the virtual clock. Each cell "
                    "must end with a defined stop reason, one result per tool call, every executed write recorded "
                    "exactly once, a balanced ledger and a trace that parses. Exit 1 if a cell breaks one.")
    p.add_argument("--providers", default="stub,remote,local", help="comma-separated: stub, remote, local")
    p.add_argument("--out", default="reports/faults.md",
                   help="the report (default reports/faults.md, relative to the current directory)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.faults import run_matrix, write_report
    cells = run_matrix(tuple(p for p in args.providers.split(",") if p))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_report(cells, out)
    bad = [c for c in cells if not c.ok]
    print(f"{len(cells) - len(bad)} of {len(cells)} cells hold; report in {args.out}")
    for c in bad:
        print(f"  {c.provider} / {c.fault}: {'; '.join(c.problems)}")
    return EXIT_FAILED if bad else EXIT_OK
