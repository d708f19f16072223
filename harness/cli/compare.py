"""`imprint compare`: stop rules side by side over the labelled corpora, split
by task as `imprint tune` splits them; table, Markdown, JSON and a plot."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from imprint_core.errors import UserInputError
from imprint_core.settings import SPECS

from ..conventions import EXIT_FAILED, EXIT_OK, workdir
from ..realruns.labels import LOOP_SLACK
from .console import console, progress_lines, say
from .corpora import add_corpus_options, corpora_from
from .inputs import RUN_OUTPUTS
from .ruleargs import add_rule_options, rules_of

DEFAULT_OUT = f"{RUN_OUTPUTS}/compare"   # ignored by git; `--out reports/compare` refreshes the committed one


def add_parser(sub: argparse._SubParsersAction) -> None:
    from ..analysis.compare import DEFAULT_RULES
    p = sub.add_parser(
        "compare", help="stop rules side by side on the labelled corpora: recall, premature stops, latency, cost",
        description="Replay every labelled run through each stop rule (by default every built-in at its documented "
                    "defaults, and the record's rule at the record's patience 4) and report, per rule, corpus and "
                    "part (dev and held-out, split by task as `imprint tune` splits them): loop recall, premature "
                    "stops on useful runs, stops before a loop, the median rounds from a loop's start to the stop, "
                    "and the rounds and estimated tokens spent inside labelled loops before the stop. Writes "
                    "compare.md, compare.json, compare.png and command.txt under --out.",
        epilog="Rules: " + ", ".join(DEFAULT_RULES) + " by default; --rule NAME[PARAM=VALUE,...] (repeatable) for "
               "others, FILE.py:FACTORY for a rule of your own. Corpora as for `imprint tune`.")
    add_corpus_options(p)
    add_rule_options(p, many=True)
    p.add_argument("--user-turns", choices=("reset", "ignore"), default="reset",
                   help="a user turn starts a new reply with the rule reset (default, as in the loop) or is ignored")
    p.add_argument("--holdout", type=float, default=0.3, metavar="SHARE", help="share of tasks held out (default 0.3)")
    p.add_argument("--seed", default="imprint-tune", help="salt of the task hash that splits (default imprint-tune)")
    p.add_argument("--slack", type=int, default=LOOP_SLACK, metavar="N",
                   help=f"a stop up to N rounds after a loop's last round still catches it (default {LOOP_SLACK})")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="local processes for the record rule's novelty (default: all cores)")
    p.add_argument("--no-disk-cache", action="store_true", help="keep the record rule's novelty cache in memory only")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--decide", metavar="RULE", action="append",
                   help="judge RULE (one of the compared rules; added when not named) against the shipped rule on "
                        "the held-out part by the rule of research-loop.md ('Changing the default stop rule'): "
                        "harm not worse, benefit better, cost at most 2x; prints the verdict with its figures and "
                        "exits 1 when it does not pass (repeatable: exit 0 only when every one passes)")
    p.add_argument("--against", metavar="RULE", default=None,
                   help="pair every rule with RULE (RULE[NAME=VALUE,...]) instead of the shipped default "
                        f"({SPECS['chat.research_stop_rule'].default}): to make again a decision taken before "
                        "the winner shipped")
    p.add_argument("--costs", default=None, metavar="FILE",
                   help="each rule's cost per round for --decide (default reports/bench/rules.json, written by "
                        "benchmarks/bench_rules.py)")
    p.add_argument("--detail", action="store_true",
                   help="print every corpus and part, pooled rows first (default: one row a rule, pooled over every "
                        "corpus, on the held-out part)")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from imprint_core.files import atomic_write_text
    from ..analysis.compare import (DEFAULT_RULES, TERMINAL_LEGEND, RuleChoice, compare, markdown, plot,
                                    pooled_part, rows)
    from ..analysis.decision import COST_FILE
    from ..analysis.sweep.cache import ProgressCache, default_cache_dir
    from ..analysis.sweep.progress import load_corpora
    from ..analysis.sweep.stops import Split
    if not 0 <= args.holdout < 1:
        raise UserInputError(f"{args.holdout} is not a share", key="--holdout", expected="0 to below 1")
    if args.slack < 0:
        raise UserInputError(f"{args.slack} is negative", key="--slack", expected="0 or more rounds")
    if args.jobs is not None and args.jobs < 1:
        raise UserInputError(f"{args.jobs} jobs", key="--jobs", expected="1 or more")
    choices = [RuleChoice(label, spec, params) for label, spec, params in rules_of(args, list(DEFAULT_RULES))]
    missing = [d for d in dict.fromkeys(args.decide or []) if d not in [c.label for c in choices]]
    if missing:
        extra = rules_of(argparse.Namespace(rules=missing, params=None, param=None), [])
        choices += [RuleChoice(label, spec, params) for label, spec, params in extra]
    against = None
    if args.against:
        against = next(RuleChoice(*c) for c in rules_of(argparse.Namespace(rules=[args.against], params=None,
                                                                             param=None), []))
        choices = [against] + [c for c in choices if c.label != against.label]
    from imprint_core.stoprules import build
    for c in choices:
        build(c.spec, c.params)           # every rule checked before the corpora are read
    costs = None
    if args.decide:
        from ..analysis.decision import COST_FILE, rule_costs
        cost_file = args.costs or str(workdir() / COST_FILE)
        costs = rule_costs(cost_file) if args.costs or Path(cost_file).exists() else None
    corpora, notes = corpora_from(args)
    out = console(stderr=True)
    say("compare", f"reading {len(corpora)} labelled corpora")
    with out.status("reading the labelled corpora ...") if out.is_terminal else _nothing():
        runs, warnings = load_corpora(corpora, args.user_turns, outcomes=True)
    for w in notes + warnings:
        print(f"warning: {w}", file=sys.stderr)
    cache = ProgressCache(None if args.no_disk_cache else default_cache_dir())
    comp = _compare_with_progress(out, runs, choices, Split(args.holdout, 5, args.seed), args, cache, compare, against)
    command = shlex.join(["imprint", *getattr(args, "argv", ["compare"])])
    dest = Path(args.out)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"cannot create the output folder: {exc.strerror}", file=str(dest), key="--out") from None
    say("compare", f"writing compare.md, compare.json and compare.png to {dest}")
    decisions = []
    if args.decide:
        from ..analysis.decision import decide
        decisions += [decide(comp, d, costs, args.costs or COST_FILE) for d in dict.fromkeys(args.decide)]
    data = comp.to_dict() | {"command": command, "decisions": [d.to_dict() for d in decisions]}
    atomic_write_text(dest / "compare.json", json.dumps(data, indent=1, default=str) + "\n")
    atomic_write_text(dest / "compare.md", markdown(comp, command, decisions=decisions))
    atomic_write_text(dest / "command.txt", command + "\n")
    plot(comp, dest / "compare.png")
    code = EXIT_OK if all(d.passed for d in decisions) else EXIT_FAILED
    if args.json:
        print(json.dumps(data, default=str))
        return code
    from rich.markup import escape
    from rich.table import Table
    part = pooled_part(comp)
    # Pooled rows first; by default one row per rule (pooled, held-out), every corpus and part with --detail.
    shown = rows(comp) if args.detail else rows(comp, parts=(part,), corpora=["all"])
    table = Table(title=f"imprint compare: {len(comp.rules)} rule(s) over {len(runs)} run(s); "
                        f"paired with the shipped rule {comp.shipped!r}; 95% intervals"
                        + ("" if args.detail else f"; pooled over every corpus, {part} part, one row a rule"))
    drop = () if args.detail else ("corpus", "part")
    for col in shown[0] if shown else []:
        if col not in drop:
            table.add_column(col, overflow="fold")
    for r in shown:
        table.add_row(*(escape(str(v)) for k, v in r.items() if k not in drop))
    console().print(table)
    console().print(TERMINAL_LEGEND + ("" if args.detail else " --detail: every corpus and part."),
                    soft_wrap=True, markup=False)
    for d in decisions:
        for line in d.lines():
            console().print(line, soft_wrap=True, markup=False)
    console().print(f"wrote compare.md (every corpus and part, and what each column means), compare.json, "
                    f"compare.png to {dest}", soft_wrap=True, markup=False)
    return code


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _compare_with_progress(out, runs, choices, split, args, cache, compare, against=None):
    from ..analysis.compare import compared
    total = len(runs) * len(compared(choices, against)[0])
    if not out.is_terminal:     # a log gets a line each tenth of the way where a terminal gets the bar
        return compare(runs, choices, split=split, slack=args.slack, cache=cache, jobs=args.jobs, against=against,
                       progress=progress_lines("compare", "rule × run pairs replayed", total))
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out, transient=True) as bar:
        task = bar.add_task("replaying (rule × run)", total=total)
        return compare(runs, choices, split=split, slack=args.slack, cache=cache, jobs=args.jobs, against=against,
                       progress=lambda n: bar.advance(task, n))
