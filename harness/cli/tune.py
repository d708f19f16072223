"""`imprint tune`: sweep patience × a grid of NoveltyConfig fields over labelled
corpora, split by task, and recommend a setting."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK, workdir
from ..realruns.labels import LOOP_SLACK
from ..realruns.regressions import CORPUS as REGRESSIONS, LABELS_FILE as REGRESSION_LABELS, STORE as REGRESSION_STORE
from ..realruns.rounds import PATIENCE, USER_TURNS
from .console import console, progress

PATIENCE_RANGE = f"{PATIENCE.min}-{PATIENCE.max}"
DEFAULT_OUT = "reports/tune"
DEFAULT_CORPORA = (
    ("../shared/data/roundlogs/tau-bench-airline", "scenarios/labels/labels-tau-bench.yaml"),
    ("../shared/data/raw/mini-swe-agent", "scenarios/labels/labels-mini-swe-agent.yaml"),
    ("../shared/data/raw/who-and-when", "scenarios/labels/labels-who-and-when.yaml"),
    (REGRESSION_STORE, REGRESSION_LABELS),
)
"""Relative to the current folder (the root of the checkout): the three labelled corpora of issue 13, and
the regressions (`imprint regress add`) once there is one."""
DEFAULT_STRICT = ("tau-bench", REGRESSIONS)


class _Ordered(argparse.Action):
    """Keeps `--corpus` and `--labels` in the order given: each `--labels`
    closes a corpus of the `--corpus` paths before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        events = list(getattr(namespace, "corpus_events", None) or [])
        events.append((self.dest, values))
        namespace.corpus_events = events


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune", help="sweep patience × novelty settings over labelled corpora and recommend one",
        description="Sweep patience × a grid of NoveltyConfig fields over labelled corpora (traces, round logs or raw "
                    "trajectories of other agents, converted in memory), split the runs by task into a dev part "
                    "(tuned on, with k-fold cross-validation) and a held-out part (reported), score loop recall and "
                    "premature stops per corpus, and recommend a setting. Writes summary.md, front.md, front.png, "
                    "split.md, settings.csv, recommendation.json and command.txt under --out.",
        epilog="Without --corpus: the three labelled corpora (tau-bench round logs, mini-swe-agent and Who&When raw "
               f"trajectories beside the repository) and the regressions ({REGRESSION_STORE}, labelled in "
               f"{REGRESSION_LABELS}) once `imprint regress add` has stored one. Labels files: see "
               "scenarios/labels/README.md. Default paths are relative to the current directory (run it from the "
               "repository root). A corpus is named after its labels file (labels-tau-bench.yaml: "
               "tau-bench); the regressions corpus is always tuned on, never held out.")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="run files or folders of a first corpus, as if given with --corpus before all else")
    p.add_argument("--corpus", action=_Ordered, dest="corpus", metavar="PATH",
                   help="run files or folders of one corpus (repeatable; the next --labels closes the corpus)")
    p.add_argument("--labels", action=_Ordered, dest="labels", metavar="FILE",
                   help="the labels file of the --corpus paths given before it")
    p.add_argument("--grid", action="append", metavar="FIELD=V1,V2,...",
                   help="a NoveltyConfig field and its values (repeatable); given, it replaces the default grid "
                        "(min_new_shingles × fingerprint_unit) and fields it does not name stay "
                        "at their shipped values")
    p.add_argument("--patience", default=PATIENCE_RANGE,
                   help=f"patience values: a range {PATIENCE_RANGE} or a list 3,4,5 (default {PATIENCE_RANGE})")
    p.add_argument("--user-turns", choices=USER_TURNS, default="reset",
                   help="a user turn starts a new reply with fresh patience and novelty (reset, the default, as in "
                        "the loop) or is ignored")
    p.add_argument("--holdout", type=float, default=0.3, metavar="SHARE",
                   help="share of tasks held out from tuning (default 0.3)")
    p.add_argument("--folds", type=int, default=5, metavar="K", help="cross-validation folds of the dev tasks (default 5)")
    p.add_argument("--seed", default="imprint-tune", help="salt of the task hash that splits and folds (default imprint-tune)")
    p.add_argument("--slack", type=int, default=LOOP_SLACK, metavar="N",
                   help=f"a stop up to N rounds after a loop's last round still catches it (default {LOOP_SLACK})")
    p.add_argument("--max-premature-share", type=float, default=0.10, metavar="SHARE",
                   help="premature stops a recommended setting may have on a corpus, as a share of its useful runs "
                        "(default 0.10)")
    p.add_argument("--strict", action="append", metavar="CORPUS",
                   help="a corpus where a recommended setting may have no premature stop (repeatable; default "
                        f"{' and '.join(DEFAULT_STRICT)} where present; `--strict none` for none)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="local processes (default: all cores)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="run the sweep on this Dask distributed scheduler instead")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="on-disk cache of per-round novelty (default: $IMPRINT_CACHE_DIR/tune or the user cache dir)")
    p.add_argument("--no-disk-cache", action="store_true", help="keep the novelty cache in memory only")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    p.set_defaults(fn=run)


def parse_patience(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            values = list(range(lo, hi + 1))
        else:
            values = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise UserInputError(f"{text!r} is not a patience range", key="--patience",
                             expected=f"e.g. {PATIENCE_RANGE} or 3,4,5") from None
    if not values or any(not PATIENCE.min <= v <= PATIENCE.max for v in values):
        raise UserInputError(f"{text!r} is out of bounds", key="--patience",
                             expected=f"values within {PATIENCE.min}–{PATIENCE.max}")
    return values


def corpora_from(args: argparse.Namespace) -> tuple[list, list[str]]:
    """The `--corpus ... --labels FILE` groups, or the default corpora that exist."""
    from ..analysis.sweep import Corpus
    from ..realruns.labels import load_labels
    events = [("corpus", p) for p in getattr(args, "paths", None) or []] + list(getattr(args, "corpus_events", None) or [])
    notes: list[str] = []
    if not events:
        out = []
        root = workdir()
        for data, labels in DEFAULT_CORPORA:
            d, lab = (root / data).resolve(), root / labels
            if labels == REGRESSION_LABELS:
                if lab.exists() and len(load_labels([lab])):
                    out.append(Corpus([str(d)], str(lab)))
            elif d.exists():
                out.append(Corpus([str(d)], str(lab)))
            else:
                notes.append(f"default corpus {d} not found; skipped")
        if not out:
            raise UserInputError("none of the default corpora is there", file=str(root),
                                 expected="run it from the root of a checkout (the corpora beside it, or a "
                                          f"regression under {REGRESSION_STORE}), or give --corpus PATH --labels FILE")
        return out, notes
    out, pending = [], []
    for dest, value in events:
        if dest == "corpus":
            pending.append(value)
        elif not pending:
            raise UserInputError(f"--labels {value} has no --corpus before it", key="--labels",
                                 expected="--corpus PATH [--corpus PATH ...] --labels FILE, per corpus")
        else:
            out.append(Corpus(pending, value))
            pending = []
    if pending:
        raise UserInputError(f"--corpus {pending[-1]} has no --labels after it", key="--corpus",
                             expected="--corpus PATH [--corpus PATH ...] --labels FILE, per corpus")
    return out, notes


def grid_from(args: argparse.Namespace) -> tuple[dict, list[str]]:
    from ..realruns.noveltyfields import default_grid, fields, parse_assignment
    if not args.grid:
        return default_grid()
    grid: dict = {}
    for text in args.grid:
        name, values = parse_assignment(text)
        if name in grid:
            raise UserInputError(f"--grid names {name} twice", key="--grid", expected="each field once")
        grid[name] = values
    return grid, [f for f in fields() if f not in grid]


def run(args: argparse.Namespace) -> int:
    from ..analysis.sweep import ProgressCache, default_cache_dir, load_corpora
    from ..analysis.tune import Rule, Split, tune
    from ..analysis.tunereport import recommendation, write_outputs
    from ..realruns.noveltyfields import expand
    patiences = parse_patience(args.patience)
    if not 0 <= args.holdout < 1:
        raise UserInputError(f"{args.holdout} is not a share", key="--holdout", expected="0 to below 1")
    if args.folds < 2:
        raise UserInputError(f"{args.folds} folds", key="--folds", expected="2 or more")
    if args.slack < 0:
        raise UserInputError(f"{args.slack} is negative", key="--slack", expected="0 or more rounds")
    if not 0 <= args.max_premature_share <= 1:
        raise UserInputError(f"{args.max_premature_share} is not a share", key="--max-premature-share",
                             expected="0 to 1")
    if args.jobs is not None and args.jobs < 1:
        raise UserInputError(f"{args.jobs} jobs", key="--jobs", expected="1 or more")
    grid, held = grid_from(args)
    configs = expand(grid)
    corpora, notes = corpora_from(args)
    names = {c.name for c in corpora}
    strict = tuple(s for s in (args.strict or [d for d in DEFAULT_STRICT if d != REGRESSIONS or d in names])
                   if s != "none")
    unknown = [s for s in strict if s not in names]
    for s in unknown:
        notes.append(f"--strict {s}: no corpus of that name")
    started = time.perf_counter()
    with progress("tune", f"loading {len(corpora)} corpora", enabled=not args.json) as step:
        runs, warnings = load_corpora(corpora, args.user_turns)
        loaded = time.perf_counter() - started
        for w in notes + warnings:
            print(f"warning: {w}", file=sys.stderr)
        cache = ProgressCache(None if args.no_disk_cache else Path(args.cache_dir) if args.cache_dir
                              else default_cache_dir())
        step(f"sweeping {len(configs)} novelty config(s) × {len(patiences)} patience value(s) over {len(runs)} runs")
        t = tune(runs, configs, patiences, grid=grid, held=held, split=Split(args.holdout, args.folds, args.seed),
                 rule=Rule(args.max_premature_share, strict), slack=args.slack, jobs=args.jobs,
                 scheduler=args.scheduler, cache=cache)
        elapsed = time.perf_counter() - started
        st = t.stats
        timing = (f"{len(runs)} labelled run(s) in {len(corpora)} corpora, {len(configs)} novelty config(s) × "
                  f"{len(patiences)} patience value(s); loaded in {loaded:.1f} s, swept in {elapsed - loaded:.1f} s "
                  f"on {st.where}: {st.computed} (run, config) pair(s) computed, {st.memory} from memory, "
                  f"{st.disk} from disk")
        command = shlex.join(["imprint", *getattr(args, "argv", ["tune"])])
        step("writing the results")
        written = write_outputs(t, Path(args.out), command, timing)
    if args.json:
        print(json.dumps(recommendation(t, command), indent=2, default=str))
        return EXIT_OK
    _print(t, timing, written)
    return EXIT_OK


def _print(t, timing: str, written: list[Path]) -> None:
    from rich.table import Table
    from ..analysis.tune import PARTS
    from ..analysis.tunereport import _fig
    out = console()
    s = t.scores.settings[t.best]
    table = Table(title=f"imprint tune: recommended {s.label()}" + ("" if t.feasible else " (constraints not met)"))
    shipped = t.scores.settings[t.shipped]
    for col in ("corpus", "part", "recommended", f"shipped (patience {shipped.patience}, shipped novelty config)"):
        table.add_column(col)
    for c in [*t.corpora, None]:
        for part in PARTS:
            table.add_row(c or "overall", part, _fig(t.figures(t.best, part, c)), _fig(t.figures(t.shipped, part, c)))
    out.print(table)
    out.print(f"why: {t.reason}", soft_wrap=True)
    cv = t.cv_summary()["overall"]
    out.print(f"cross-validation ({t.split.folds} folds of dev tasks): recall "
              f"{cv['caught']}/{cv['loops']}, premature {cv['premature']}/{cv['useful']} on the folds left out")
    out.print(timing, soft_wrap=True)
    out.print(f"wrote {', '.join(p.name for p in written)} to {written[0].parent}" if written else "",
              soft_wrap=True)
