"""`imprint regress add|list`: regression runs, stored with their label and
judged by the gate (`imprint check`) and the tuner (`imprint tune`) every time.

The store (`harness.realruns.regressionstore`) and the verdicts
(`harness.analysis.gate.regressions`) live below; this module parses, orders the
checks before any write, and prints."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Callable

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from ..realruns.regressionstore import LABELS_FILE, LOOP_SPEC, STORE
from .console import console
from .inputs import DEFAULT_GATE_CONFIG, gate_config

today: Callable[[], date] = date.today
"""The date an added regression records (tests put their own here)."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=STORE, metavar="DIR", help=f"the regressions' round logs (default {STORE})")
    p.add_argument("--labels", default=LABELS_FILE, metavar="FILE",
                   help=f"the regressions' labels file (default {LABELS_FILE})")
    p.add_argument("--config", default=DEFAULT_GATE_CONFIG,
                   help=f"the gate config whose stop rule judges them (default {DEFAULT_GATE_CONFIG})")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "regress", help="regression runs: add one that the stop rule got wrong, list what the rule does with each",
        description="Regression runs: runs that the stop rule once got wrong, stored as round logs under "
                    f"{STORE}/ with their label in {LABELS_FILE}. `imprint check` judges each on its own (one "
                    "that fails makes it exit 1, naming the run) and `imprint tune` tunes on them as a corpus of "
                    "their own.",
        epilog="Paths are relative to the current directory (run it from the repository root). The stop rule is "
               "the gate config's [premature_stops] setting.")
    rsub = p.add_subparsers(required=True, metavar="ACTION")
    a = rsub.add_parser(
        "add", help="store a run and its label",
        description="Store RUN as a round log and append its label (with the note, the source, the date and what "
                    "the current rule does with it) to the labels file. RUN is one of our traces, a round log, or "
                    "a raw trajectory in any format `imprint import` reads (FILE#RUN picks one run of a file of "
                    "many, as a tau-bench results file). The label is checked against the run first: the rounds "
                    "exist and a loop's period fits; a run already stored is refused. Nothing is written unless "
                    "every check passes.")
    a.add_argument("run", metavar="RUN", help="the run's file (FILE or FILE#RUN)")
    what = a.add_mutually_exclusive_group(required=True)
    what.add_argument("--useful-until", type=int, metavar="N",
                      help="the run was useful up to round N: a no-progress stop before it is premature")
    what.add_argument("--loop", action="append", metavar="START-END[:PERIOD]",
                      help=f"rounds START to END only repeat earlier work, each round the one PERIOD rounds before "
                           f"it (repeatable; {LOOP_SPEC})")
    a.add_argument("--note", default="", metavar="TEXT", help="why: what the run does there")
    a.add_argument("--name", metavar="NAME", help="the regression's name (default: the run's file stem)")
    _common(a)
    a.set_defaults(fn=cmd_add)
    ls = rsub.add_parser("list", help="what the current stop rule does with each regression",
                         description="One row per regression: its label, what the current stop rule does with it "
                                     "(its stop round, premature or not, loops caught or not), and what it did when "
                                     "the regression was added; a changed verdict is highlighted.")
    ls.add_argument("--json", action="store_true", help="print the rows as JSON")
    _common(ls)
    ls.set_defaults(fn=cmd_list)


def _labels_elsewhere(cfg, labels_path: Path):
    """The gate's other labels files, merged: a new name must not be theirs."""
    from ..realruns.labels import load_labels
    own = labels_path.resolve()
    return load_labels([f for f in cfg.inputs["labels"] if Path(f).resolve() != own])


def cmd_add(args: argparse.Namespace) -> int:
    from ..analysis.gate.regressions import judge_logs, verdict
    from ..realruns.labels import Labels
    from ..realruns import regressionstore as reg
    store, labels_path = Path(args.store), Path(args.labels)
    # Every check comes before the first write; the config first, as its absence means "not in a checkout".
    cfg = gate_config(args.config)
    reg.read_labels_file(labels_path)    # a malformed labels file is named before any work (read again locked)
    loops = [reg.parse_loop(s) for s in args.loop or []]
    run = reg.read_run(args.run)
    name = reg.check_name(args.name) if args.name is not None else reg.default_name(run)
    new = reg.Regression(name, args.useful_until, loops, args.note, source=args.run, added=today().isoformat())
    reg.check_against(new, run.log, args.run)
    key = reg.key_of(store, name)
    target = store / f"{name}.jsonl"
    log = replace(run.log, path=str(target))    # named as stored: the gate's run id and label key
    jr = judge_logs([log], Labels({key: new.as_label(key)}), cfg)[key]
    new.when_added = verdict(jr, cfg)
    # The labels file is read, checked and written under its lock.
    with reg.locked(labels_path):
        text, labels = reg.read_labels_file(labels_path)
        reg.check_new(store, name, run.log, _labels_elsewhere(cfg, labels_path), labels)
        new_text = reg.with_entry(text, labels, labels_path, key, new)
        reg.write(store, name, log, labels_path, new_text)
    from rich.markup import escape
    out = console()
    out.print(escape(f"stored {target} ({len(log.rounds)} rounds, from {args.run})"), soft_wrap=True)
    out.print(escape(f"labelled {key} in {labels_path}: {new.describe()}"), soft_wrap=True)
    out.print(f"the current rule ({new.when_added.rule}): {_now(jr)}", soft_wrap=True)
    if not jr.holds:
        out.print("`imprint check` fails while the rule does this; `imprint tune` tunes on it", soft_wrap=True)
    return EXIT_OK


def _now(jr) -> str:
    if jr is None:
        return "[red]missing[/]: its round log is not in the store"
    stop = "never stops it" if jr.stop is None else f"stops it at round {jr.stop}"
    return f"{stop}: " + ("[green]holds[/]" if jr.holds else f"[red]FAILS[/] ({'; '.join(jr.problems())})")


def _label_text(lab) -> str:
    parts = [f"useful until {lab.should_not_stop_before}"] if lab.should_not_stop_before is not None else []
    periods = lab.periods or (None,) * len(lab.loops)
    parts += [f"loop {a}-{b}" + (f":{p}" if p is not None else "") for (a, b), p in zip(lab.loops, periods)]
    return ", ".join(parts)


def _now_cells(jr) -> tuple[str, str, str, str]:
    """stop now, premature, loops caught, verdict now."""
    if jr is None:
        return "-", "-", "-", "[red]MISSING[/] (no round log)"
    j, lab = jr.judgement, jr.label
    premature = "-" if lab.should_not_stop_before is None else "[red]yes[/]" if j.premature else "no"
    caught = f"{j.loops_caught} of {j.loops}" if j.loops else "-"
    return ("never" if jr.stop is None else str(jr.stop)), premature, caught, \
        "[green]holds[/]" if jr.holds else "[red]FAILS[/]"


def _then_text(lab) -> str:
    then = lab.when_added
    if then is None:
        return lab.added or "-"
    stop = "never stopped" if then.stop_round is None else f"stop {then.stop_round}"
    return f"{lab.added or '?'}: {stop}, {'holds' if then.holds else 'FAILS'}"


def cmd_list(args: argparse.Namespace) -> int:
    from ..analysis.gate.regressions import rows, rule_of
    from ..realruns.regressionstore import read_labels_file
    cfg = gate_config(args.config)
    _, labels = read_labels_file(Path(args.labels))
    found, warnings = rows(Path(args.store), labels, cfg)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps({"rule": rule_of(cfg), "config": cfg.path, "labels": args.labels, "store": args.store,
                          "regressions": [r.to_dict(cfg) for r in found]}, indent=2))
        return EXIT_OK
    from rich.table import Table
    out = console()
    if found:
        t = Table(title=f"imprint regress list: {len(found)} regression(s); rule: {rule_of(cfg)} ({cfg.path})")
        for col in ("regression", "label", "stop now", "premature", "loops caught", "verdict now", "when added",
                    "change"):
            t.add_column(col)
        for r in found:
            t.add_row(r.name, _label_text(r.label), *_now_cells(r.now), _then_text(r.label),
                      "[bold yellow]CHANGED[/]" if r.changed else "", style="bold" if r.changed else None)
        out.print(t)
    else:
        out.print(f"no regressions in {args.labels}: `imprint regress add RUN --useful-until N` adds one",
                  soft_wrap=True)
    changed = [r.name for r in found if r.changed]
    if changed:
        out.print(f"[bold yellow]verdict changed since added: {', '.join(changed)}[/]", soft_wrap=True)
    return EXIT_OK
