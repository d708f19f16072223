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

from ..conventions import EXIT_OK
from ..realruns.labels import LOOP_SLACK
from ..realruns.regressionstore import (CORPUS as REGRESSIONS, LABELS_FILE as REGRESSION_LABELS,
                                        STORE as REGRESSION_STORE)
from ..realruns.roundlogs import PATIENCE, USER_TURNS
from .console import console, progress
from .corpora import DEFAULT_CORPORA, add_corpus_options, corpora_from  # noqa: F401  (corpora_from: bench_tune)
from .inputs import RUN_OUTPUTS

PATIENCE_RANGE = f"{PATIENCE.min}-{PATIENCE.max}"
DEFAULT_OUT = f"{RUN_OUTPUTS}/tune"   # ignored by git; `--out reports/tune` refreshes the committed one
DEFAULT_STRICT = ("tau-bench", REGRESSIONS)


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
    add_corpus_options(p)
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
    p.add_argument("--rule", default=None, metavar="RULE",
                   help="tune another stop rule's parameters instead (a name from `imprint rules` or FILE.py:FACTORY): "
                        "--grid then names its parameters, e.g. --rule gemini-cli --grid threshold=2,3,4,5; "
                        "--patience does not apply")
    p.add_argument("--apply", action="store_true",
                   help="write the recommended patience and novelty fields where the shipped defaults live "
                        "(imprint_core/settings.py, imprint_core/novelty/config.py in the checkout of the current "
                        "folder, and the comment above a value that names the old one): shows the diff first, then "
                        "asks (on a terminal) or needs --yes; names the gate's loop-recall baselines to re-pin")
    p.add_argument("--yes", action="store_true", help="with --apply: write without asking (off a terminal, "
                                                      "--apply writes nothing without it)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the diff --apply would write (and the baselines it would move), write nothing")
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


def grid_from(args: argparse.Namespace) -> tuple[dict, list[str]]:
    from ..realruns.noveltyconfigs import default_grid, fields, parse_assignment
    if not args.grid:
        return default_grid()
    grid: dict = {}
    for text in args.grid:
        name, values = parse_assignment(text)
        if name in grid:
            raise UserInputError(f"--grid names {name} twice", key="--grid", expected="each field once")
        grid[name] = values
    return grid, [f for f in fields() if f not in grid]


def rule_grid_from(args: argparse.Namespace) -> dict:
    """`--grid PARAM=V1,V2` for another rule: its parameters, values converted by their defaults' types."""
    from imprint_core.params import ParamError, split_top
    from imprint_core.stoprules import convert, resolve
    info = resolve(args.rule)
    if not args.grid:
        raise UserInputError(f"--rule {args.rule} needs --grid PARAM=V1,V2,... to sweep", key="--grid",
                             expected="parameters: " + (", ".join(f"{k} (default {v!r})" for k, v in info.params.items()
                                                                  if k != "novelty") or "none"))
    grid: dict = {}
    for text in args.grid:
        name, sep, values = text.partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise UserInputError(f"{text!r} is not PARAM=V1,V2,...", key="--grid", expected="e.g. threshold=2,3,4")
        if name in grid:
            raise UserInputError(f"--grid names {name} twice", key="--grid", expected="each parameter once")
        try:   # values cut at top-level commas: a list value is bracketed, [a,b]
            texts = split_top(values)
        except ParamError as exc:
            raise UserInputError(exc.message, key="--grid", expected=exc.expected) from None
        grid[name] = [convert(info, name, v.strip(), key="--grid") for v in texts if v.strip()]
    return grid


def run(args: argparse.Namespace) -> int:
    from ..analysis.sweep.cache import ProgressCache, default_cache_dir
    from ..analysis.sweep.progress import load_corpora
    from ..analysis.tune.search import Rule, Split, tune
    from ..analysis.tune.report import recommendation, write_outputs
    from ..realruns.noveltyconfigs import expand
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
    other_rule = args.rule not in (None, "record")
    if args.yes and not args.apply:
        raise UserInputError("--yes confirms --apply, which is not given", key="--yes", expected="--apply --yes")
    if args.apply and args.dry_run:
        raise UserInputError("--dry-run writes nothing; --apply writes", key="--dry-run",
                             expected="one of --apply or --dry-run")
    if (args.apply or args.dry_run) and other_rule:
        raise UserInputError("--apply writes the record's rule's defaults; for another rule set "
                             "chat.research_stop_rule and its parameters", key="--apply" if args.apply else "--dry-run",
                             expected="imprint tune --apply without --rule")
    if args.apply and not args.yes and not sys.stdin.isatty():
        # said before the sweep, not after minutes of it
        raise UserInputError("--apply rewrites the shipped defaults and cannot ask for confirmation off a "
                             "terminal: nothing tuned, nothing written", key="--apply",
                             expected="--apply --yes to write without asking, or --dry-run to see the diff")
    if other_rule:
        grid, held, configs = rule_grid_from(args), [], []
    else:
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
        step(f"sweeping over {len(runs)} runs")
        if other_rule:
            from ..analysis.tune.search import tune_rule
            t = tune_rule(runs, args.rule, grid, split=Split(args.holdout, args.folds, args.seed),
                          rule=Rule(args.max_premature_share, strict), slack=args.slack, jobs=args.jobs, cache=cache)
            elapsed = time.perf_counter() - started
            timing = (f"{len(runs)} labelled run(s) in {len(corpora)} corpora, {len(t.scores.settings)} setting(s) "
                      f"of {args.rule}; loaded in {loaded:.1f} s, replayed in {elapsed - loaded:.1f} s")
        else:
            t = tune(runs, configs, patiences, grid=grid, held=held, split=Split(args.holdout, args.folds, args.seed),
                     rule=Rule(args.max_premature_share, strict), slack=args.slack, jobs=args.jobs,
                     scheduler=args.scheduler, cache=cache)
            elapsed = time.perf_counter() - started
            st = t.stats
            timing = (f"{len(runs)} labelled run(s) in {len(corpora)} corpora, {len(configs)} novelty config(s) × "
                      f"{len(patiences)} patience value(s); loaded in {loaded:.1f} s, swept in "
                      f"{elapsed - loaded:.1f} s on {st.where}: {st.computed} (run, config) pair(s) computed, "
                      f"{st.memory} from memory, {st.disk} from disk")
        command = shlex.join(["imprint", *getattr(args, "argv", ["tune"])])
        step("writing the results")
        written = write_outputs(t, Path(args.out), command, timing)
    for w in t.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(recommendation(t, command), indent=2, default=str))
    else:
        _print(t, timing, written)
    if args.apply or args.dry_run:
        return _apply(t, args)
    return EXIT_OK


def _apply(t, args: argparse.Namespace) -> int:
    """The diff first; then, for --apply, a yes (asked, or --yes) before anything is written."""
    from .shipped import apply, plan
    flag = "--apply" if args.apply else "--dry-run"
    best = t.scores.settings[t.best]
    if not t.feasible:
        raise UserInputError("no setting meets the premature-stop limits: nothing applied", key=flag)
    say = sys.stderr if args.json else sys.stdout       # --json keeps stdout for its JSON
    if best.shipped:
        print(f"{flag}: the recommendation is the shipped setting; nothing to change", file=say)
        return EXIT_OK
    _, diff = plan(best.patience, best.changed)
    print(diff, end="", file=say)
    moved = baselines_moved(t)
    for line in moved:
        print(line, file=say)
    if args.dry_run:
        print("--dry-run: nothing written", file=say)
        return EXIT_OK
    if not args.yes:
        print("write this change? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("--apply: nothing written", file=sys.stderr)
            return EXIT_OK
    apply(best.patience, best.changed, shown=diff)
    print("--apply: wrote the recommended setting; review the diff, run `make test`, then commit it with "
          "reports/tune/" + (" and the re-pinned baselines" if moved else ""), file=say)
    return EXIT_OK


def baselines_moved(t, config: str | Path | None = None) -> list[str]:
    """What the applied setting does to the gate's loop-recall baselines:
    each one pinned for the shipped rule (the record's, or one built on it,
    which takes its patience and novelty), with this tune's figures for the
    record's rule at the shipped and the applied setting, and the commands that re-pin
    them (no command writes them: a person copies the measured figures)."""
    from imprint_core.settings import SPECS
    from ..analysis.gate.config import load_config
    from .inputs import DEFAULT_GATE_CONFIG
    path = Path(config or DEFAULT_GATE_CONFIG)
    if not path.is_file():
        return []
    cfg = load_config(path)
    ps = cfg.premature_stops
    from imprint_core.stoprules import resolve
    rule = ps.get("rule")
    if "patience" not in resolve(rule).params or ps.get("rule_params") or ps.get("novelty") \
            or ps.get("patience") != SPECS["chat.research_no_progress_rounds"].default:
        return []       # the gate pins a rule of its own: the shipped defaults do not reach its baselines
    lines = []
    for corpus, base in cfg.loop_recall_baseline.items():
        if base.get("rule", "record") != rule:
            continue
        if rule != "record":    # a rule built on the record's (the shipped repeat-aware): tune judged that half only
            lines.append(f"  {corpus}: pinned {base.get('caught', '?')}/{base.get('loops', '?')} for {rule}, whose "
                         "record half this setting changes; this tune judged the record's rule alone: re-measure it")
            continue
        pinned = f"pinned {base['caught']}/{base['loops']}" if "caught" in base and "loops" in base \
            else f"pinned {base['recall']:.0%}"
        if corpus not in t.corpora:
            lines.append(f"  {corpus}: {pinned}; not among this tune's corpora: re-measure it")
            continue
        was, now = t.figures(t.shipped, None, corpus), t.figures(t.best, None, corpus)
        change = "moves" if now.caught != was.caught else "unchanged on these runs"
        lines.append(f"  {corpus}: {pinned}; {change}: {was.caught}/{was.loops} caught at the shipped setting, "
                     f"{now.caught}/{now.loops} at the applied one, on the {now.runs} run(s) this tune judged")
    if not lines:
        return []
    return [f"the gate's loop-recall baselines ({path} [loop_recall_baseline]) measure the shipped rule this "
            "changes; re-pin them in the same commit:", *lines,
            "  re-measure with: make run && imprint check --json   (then set each source's recall, caught, loops "
            "and commit under [loop_recall_baseline] from its `loop recall` line)"]


def _print(t, timing: str, written: list[Path]) -> None:
    from rich.table import Table
    from ..analysis.tune.search import PARTS
    from ..analysis.tune.report import figures_text as _fig
    out = console()
    s = t.scores.settings[t.best]
    table = Table(title=f"imprint tune: recommended {s.label()}" + ("" if t.feasible else " (constraints not met)"))
    shipped = t.scores.settings[t.shipped]
    words = f"patience {shipped.patience}, shipped novelty config" if shipped.patience is not None else shipped.label()
    for col in ("corpus", "part", "recommended", f"shipped ({words})"):
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
