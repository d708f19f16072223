"""`imprint tune`: sweep patience and normalization over labelled runs."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from imprint_core.errors import UserInputError
from imprint_core.novelty import NORMALIZATIONS

from ..conventions import EXIT_OK
from ..realruns.rounds import PATIENCE, USER_TURNS
from .console import console

if TYPE_CHECKING:
    from ..analysis.tune import Setting

PATIENCE_RANGE = f"{PATIENCE.min}-{PATIENCE.max}"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="sweep patience and normalization over labelled runs",
        description=f"Sweep patience ({PATIENCE.min}–{PATIENCE.max}) and every normalization over labelled runs "
                    "(traces or imprint-rounds/1 logs, files or directories) and recommend a setting: the fewest "
                    "rounds spent inside labelled loops among the settings with no more than --max-premature "
                    "premature stops on useful runs.",
        epilog="Labels file (YAML): `runs:` maps a run's name (scenario name, or a round log's file stem) to "
               "`should_not_stop_before: N` and/or `loops: [A, B]` (or a list of pairs). "
               "See scenarios/labels/ for the shipped ones.")
    p.add_argument("paths", nargs="+", metavar="TRACES_OR_ROUND_LOGS")
    p.add_argument("--labels", action="append", required=True, metavar="FILE",
                   help="labels file (repeatable; a run may be labelled in one file only)")
    p.add_argument("--patience", default=PATIENCE_RANGE,
                   help=f"patience values: a range {PATIENCE_RANGE} or a list 3,4,5 (default {PATIENCE_RANGE})")
    p.add_argument("--normalization", action="append", choices=NORMALIZATIONS,
                   help=f"normalization to sweep (repeatable; default: all of {', '.join(NORMALIZATIONS)})")
    p.add_argument("--user-turns", choices=USER_TURNS, default="reset",
                   help="round logs: a user turn starts a new reply with fresh patience and novelty (reset, the "
                        "default, as in the loop) or is ignored (ignore, as `imprint replay` does)")
    p.add_argument("--max-premature", type=int, default=0, metavar="K",
                   help="premature stops a recommended setting may have (default 0)")
    p.add_argument("--plot", metavar="PATH", help="write the curve as a PNG here")
    p.add_argument("--json", action="store_true", help="print every setting and the recommendation as JSON")
    p.set_defaults(fn=run)


def _parse_patience(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            values = list(range(lo, hi + 1))
        else:
            values = [int(x) for x in text.split(",")]
    except ValueError:
        raise UserInputError(f"{text!r} is not a patience range", key="--patience",
                             expected=f"e.g. {PATIENCE_RANGE} or 3,4,5") from None
    if not values or any(not PATIENCE.min <= v <= PATIENCE.max for v in values):
        raise UserInputError(f"{text!r} is out of bounds", key="--patience",
                             expected=f"values within {PATIENCE.min}–{PATIENCE.max}")
    return values


def run(args: argparse.Namespace) -> int:
    from ..analysis.frames import load_frames
    from ..analysis.tune import plot_curve, recommend, runs_from_frames, sweep, tradeoff
    from ..realruns.labels import load_labels
    patiences = _parse_patience(args.patience)
    norms = args.normalization or list(NORMALIZATIONS)
    labels = load_labels(args.labels)
    frames = load_frames(args.paths, user_turns=args.user_turns)
    for w in frames.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if frames.runs.empty:
        raise UserInputError("no traces or round logs found", file=" ".join(args.paths))
    runs = runs_from_frames(frames, labels)
    labelled = [r for r in runs if r.label is not None]
    matched = {r.label.name for r in labelled}
    unmatched = [n for n in labels.runs if n not in matched]
    if unmatched:
        print(f"warning: {len(unmatched)} label(s) match no given run: {', '.join(unmatched[:8])}"
              f"{'…' if len(unmatched) > 8 else ''}", file=sys.stderr)
    if not labelled:
        raise UserInputError("no given run is labelled", file=", ".join(args.labels), key="runs",
                             expected="labels whose names match the runs' scenario names or file stems")
    started = time.perf_counter()
    results = sweep(runs, patiences, norms)
    elapsed = time.perf_counter() - started
    best = recommend(results, args.max_premature)
    rounds = sum(r.rounds for r in runs)
    timing = (f"swept {len(runs)} run(s), {rounds} round(s) × {len(patiences)} patience value(s) × "
              f"{len(norms)} normalization(s) in {elapsed:.2f} s")
    if args.plot:
        plot_curve(results, best, Path(args.plot))
    if args.json:
        print(json.dumps({"recommended": best.to_dict(), "tradeoff": tradeoff(results, best),
                          "settings": [s.to_dict() for s in results], "runs": len(runs), "labelled": len(labelled),
                          "rounds": rounds, "seconds": round(elapsed, 3), "user_turns": args.user_turns}, indent=2))
        return EXIT_OK
    _print_table(results, best, norms, patiences, len(labelled))
    out = console()
    for line in tradeoff(results, best):
        out.print(line)
    out.print(timing + (f"; curve in {args.plot}" if args.plot else ""))
    return EXIT_OK


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "-"


def _print_table(results: Sequence[Setting], best: Setting, norms: Sequence[str], patiences: Sequence[int],
                 labelled: int) -> None:
    from rich.table import Table
    by = {(s.normalization, s.patience): s for s in results}
    any_s = results[0]
    t = Table(title=f"imprint tune: {labelled} labelled run(s) ({any_s.useful} useful, {any_s.loops} loop(s), "
                    f"{any_s.loop_total} loop rounds)")
    t.add_column("patience", justify="right")
    for n in norms:
        t.add_column(f"{n}\npremature · loop rounds · stops", justify="right")
    for p in patiences:
        row = [str(p)]
        for n in norms:
            s = by[(n, p)]
            cell = f"{s.premature} · {s.loop_rounds} ({_pct(s.loop_rounds, s.loop_total)}) · {s.stops}"
            row.append(f"[bold green]{cell} ★[/]" if s is best else cell)
        t.add_row(*row)
    console().print(t)
