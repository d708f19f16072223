"""`imprint replay`: runs through a stop rule (by default the record's novelty
and patience rule): round logs, our traces, and other agents' raw
trajectories (converted in memory)."""
from __future__ import annotations

import argparse
import json

from imprint_core.errors import UserInputError

from imprint_core.novelty import NORMALIZATIONS

from ..conventions import EXIT_OK
from ..realruns.roundlogs import PATIENCE
from .ruleargs import add_rule_options, choice_of


def add_parser(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("replay", help="replay runs through a stop rule (default: the record's novelty and patience)",
                        description="Print, per run, the round where the stop rule stops (or that it never "
                                    "stops) and the rounds judged as progress. Takes imprint-rounds/1 logs, our "
                                    "traces and raw trajectories of other agents (any format `imprint import` reads; "
                                    "converted in memory, nothing written), files or folders.")
    rp.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    rp.add_argument("--patience", type=int, default=None,
                    help=f"consecutive rounds without new evidence ({PATIENCE.min}–{PATIENCE.max}; default "
                         f"{PATIENCE.default}): shorthand for --param patience=N of the record's rule")
    rp.add_argument("--normalization", default=None, metavar="|".join(NORMALIZATIONS),
                    help="how results are normalized before fingerprinting: none, basic, or a profile of "
                         "volatile-token masks (default: default); shorthand for --param normalization=NAME")
    rp.add_argument("--novelty", action="append", metavar="FIELD=VALUE",
                    help="set any NoveltyConfig field (repeatable), e.g. min_new_shingles=5: shorthand for "
                         "--param FIELD=VALUE of the record's rule")
    add_rule_options(rp)
    rp.add_argument("--json", action="store_true", help="one JSON object per line")
    rp.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..realruns.roundlogs import replay
    from ..realruns.runfiles import load_runs
    if args.patience is not None and not PATIENCE.min <= args.patience <= PATIENCE.max:
        raise UserInputError(f"{args.patience} is out of bounds", key="--patience", expected=PATIENCE.bounds())
    if args.normalization is not None and args.normalization not in NORMALIZATIONS:
        raise UserInputError(f"unknown normalization {args.normalization!r}", key="--normalization",
                             expected="one of " + ", ".join(NORMALIZATIONS))
    # `--patience`, `--normalization` and `--novelty` are the record rule's
    # parameters: one choice, one replay road (reset at each reply) whichever spelling.
    choice = choice_of(args)          # a bad rule or parameter is one error, before any run
    runs, warnings = load_runs(args.paths)   # all read and validated before any output
    import sys
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not runs:
        raise UserInputError("no runs found", file=" ".join(args.paths),
                             expected="round logs, traces or raw trajectories")
    results = [(rf, replay(rf.log, choice)) for rf in runs]
    rule_words = choice.describe()
    if args.json:
        for rf, r in results:
            print(json.dumps(r.to_dict() | {"file": rf.display, "kind": rf.kind}))
        return EXIT_OK
    for rf, r in results:
        stop = f"stops at round {r.stop_round} ({r.detail or r.stop_reason})" if r.stop_round else "never stops"
        print(f"{rf.display}: {r.rounds} rounds, {stop}; progress rounds {r.progress_rounds}")
    stopped = [r.stop_round for _, r in results if r.stop_round]
    print(f"{len(results)} run(s): {len(stopped)} stopped by no_progress ({rule_words})"
          + (f" at rounds {sorted(stopped)}" if stopped else ""))
    return EXIT_OK
