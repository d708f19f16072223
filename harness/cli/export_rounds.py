"""`imprint export-rounds`: one of our traces as an `imprint-rounds/1` log."""
from __future__ import annotations

import argparse
import sys

from ..conventions import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("export-rounds", help="turn one of our traces into an imprint-rounds/1 log")
    ex.add_argument("trace", metavar="TRACE.jsonl")
    ex.add_argument("-o", "--output", help="write here (atomically) instead of standard output")
    ex.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..realruns.roundlogs import export_round_log, trace_to_round_log
    if args.output:
        print(f"wrote {export_round_log(args.trace, args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(trace_to_round_log(args.trace))
    return EXIT_OK
