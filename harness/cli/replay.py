"""`imprint replay`: round logs through the novelty and patience rule."""
from __future__ import annotations

import argparse
import json

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from ..realruns.rounds import PATIENCE


def add_parser(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("replay", help="replay round logs through the novelty and patience rule",
                        description="Print, per round log, the round where the no-progress rule stops "
                                    "(or that it never stops) and the rounds judged as progress.")
    rp.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    rp.add_argument("--patience", type=int, default=PATIENCE.default,
                    help=f"consecutive rounds without new evidence ({PATIENCE.min}–{PATIENCE.max})")
    rp.add_argument("--normalization", default="default",
                    help="none, basic, or a mask profile: default, logs, ocr, all (default: default)")
    rp.add_argument("--json", action="store_true", help="one JSON object per line")
    rp.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from imprint_core.novelty import NORMALIZATIONS
    from ..realruns.rounds import read_round_log, replay, round_log_files
    if args.normalization not in NORMALIZATIONS:
        raise UserInputError(f"unknown normalization {args.normalization!r}", key="--normalization",
                             expected="one of " + ", ".join(NORMALIZATIONS))
    if not PATIENCE.min <= args.patience <= PATIENCE.max:
        raise UserInputError(f"{args.patience} is out of bounds", key="--patience", expected=PATIENCE.bounds())
    files = round_log_files(args.paths)
    logs = [read_round_log(f) for f in files]  # all validated before any output
    results = [replay(log, patience=args.patience, normalization=args.normalization) for log in logs]
    if args.json:
        for r in results:
            print(json.dumps(r.to_dict()))
        return EXIT_OK
    for r in results:
        stop = f"stops at round {r.stop_round} ({r.stop_reason})" if r.stop_round else "never stops"
        print(f"{r.file}: {r.rounds} rounds, {stop}; progress rounds {r.progress_rounds}")
    stopped = [r.stop_round for r in results if r.stop_round]
    print(f"{len(results)} run(s): {len(stopped)} stopped by no_progress (patience {args.patience}, "
          f"normalization {args.normalization})" + (f" at rounds {sorted(stopped)}" if stopped else ""))
    return EXIT_OK
