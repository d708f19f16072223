"""`imprint replay`: runs through a stop rule (by default the record's novelty
and patience rule): round logs, our traces, and other agents' raw
trajectories (converted in memory)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from imprint_core.errors import UserInputError

from imprint_core.novelty import NORMALIZATIONS

from imprint_core.stoprules.protocol import Rule, RoundView

from ..conventions import EXIT_OK
from ..realruns.roundlogs import PATIENCE
from .console import console
from .ruleargs import add_rule_options, choice_of

if TYPE_CHECKING:
    from ..realruns.roundlogs import ReplayResult, RoundLog


def add_parser(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("replay", help="replay runs through a stop rule (default: the record's novelty and patience)",
                        description="Print, per run, the round where the stop rule stops (or that it never "
                                    "stops), in the rule's own words, and the rounds judged as progress where the rule judges progress; "
                                    "--rounds shows, round by round, why it stopped or went on. Takes imprint-rounds/1 logs, our "
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
    rp.add_argument("--rounds", action="store_true",
                    help="a table per run, a row per round: its calls, the rule's state after it (its notes) and "
                         "why the rule stopped there or went on")
    rp.add_argument("--json", action="store_true", help="one JSON object per line (with --rounds, each round under "
                                                        "`per_round`)")
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
    explained = {rf.display: explain_rounds(rf.log, choice) for rf, _ in results} if args.rounds else {}
    if args.json:
        for rf, r in results:
            extra = {"per_round": [row.to_dict() for row in explained[rf.display]]} if args.rounds else {}
            print(json.dumps(r.to_dict() | {"file": rf.display, "kind": rf.kind} | extra, default=_jsonable))
        return EXIT_OK
    for rf, r in results:
        print(run_line(rf.display, r))
        if args.rounds:
            print_rounds(explained[rf.display], choice)
    stopped = [r.stop_round for _, r in results if r.stop_round]
    print(f"{len(results)} run(s): {len(stopped)} stopped by {rule_words}"
          + (f" at rounds {sorted(stopped)}" if stopped else ""))
    return EXIT_OK


def run_line(display: str, r: "ReplayResult") -> str:
    """One run's replay: where the rule stops it, in the rule's own words,
    and the rounds it judged as progress where it judges progress at all."""
    stop = f"stops at round {r.stop_round}: {r.detail or r.stop_reason}" if r.stop_round else "never stops"
    progress = f"; progress rounds {r.progress_rounds}" if r.tracks_progress else ""
    return f"{display}: {r.rounds} rounds, {stop}{progress}"


@dataclass
class RoundRow:
    """One round as the rule saw it: its calls, the rule's state after it
    (each member's, for `any`), and why it stopped or went on."""
    round: int
    reply: int
    kind: str
    n_calls: int
    calls: list[str]
    state: dict[str, Any]
    stop: str | None
    why: str
    after_stop: bool

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "reply": self.reply, "kind": self.kind, "n_calls": self.n_calls, "calls": self.calls,
                "state": self.state, "stop": self.stop, "why": self.why, "after_stop": self.after_stop}


class _Watched(Rule):
    """A rule, with what it answered and its state (its members' apart) kept after each round."""

    def __init__(self, inner: Rule):
        self.inner, self.name = inner, inner.name
        self.seen: list[tuple[str | None, dict[str, Any]]] = []

    def observe(self, round: RoundView) -> str | None:
        why = self.inner.observe(round)
        members = getattr(self.inner, "rules", None)     # `any`: each member's state under its name
        state = {n: dict(r.notes()) for n, r in members} if isinstance(members, list) else dict(self.inner.notes())
        self.seen.append((why, state))
        return why

    def reset(self) -> None:
        self.inner.reset()

    def notes(self) -> dict[str, Any]:
        return self.inner.notes()


def _goes_on(state: dict[str, Any], kind: str) -> str:
    """Why a rule that did not stop went on, where its notes say (the record's
    patience counter); else only that it went on."""
    if "patience_counter" in state and "patience" in state:
        if kind == "write":
            return f"goes on: a write round neither counts nor resets ({state['patience_counter']} of " \
                   f"{state['patience']})"
        if state.get("progress"):
            return "goes on: new evidence (patience counter reset)"
        return f"goes on: {state['patience_counter']} of {state['patience']} rounds without new evidence"
    return "goes on"


def explain_rounds(log: "RoundLog", choice: Any) -> list[RoundRow]:
    """Every round of `log` through the rule, as `replay` walks it (reset at
    each reply), with the rule's state and reason per round."""
    from ..realruns.roundlogs import replay_rule
    watched: list[_Watched] = []

    def factory() -> Rule:
        watched.append(_Watched(choice.build()))
        return watched[-1]

    r = replay_rule(log, factory, to_end=True)
    rows = []
    for (reply, view, _), (why, state) in zip(r.rounds, watched[0].seen):
        tools = Counter(c.tool for c in view.calls)
        calls = [f"{t}×{n}" if n > 1 else t for t, n in tools.items()]
        after = r.stop_round is not None and view.index > r.stop_round
        if why:
            said = f"{'would stop' if after else 'STOPS'}: {why}"
        elif isinstance(getattr(watched[0].inner, "rules", None), list):
            said = "; ".join(f"{n}: {_goes_on(s, view.kind)}" for n, s in state.items())
        else:
            said = _goes_on(state, view.kind)
        rows.append(RoundRow(view.index, reply, view.kind, len(view.calls), calls, state, why, said, after))
    return rows


def _jsonable(v: Any) -> Any:
    """A rule's note as JSON holds it: a dataclass (the record's per-call verdicts) as its fields."""
    return dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else str(v)


def _value(v: Any) -> str:
    """A note in a table cell: a per-call verdict object by its status alone."""
    if isinstance(v, dict) and any(dataclasses.is_dataclass(x) for x in v.values()):
        v = {k: getattr(x, "status", type(x).__name__) for k, x in v.items()}
    return json.dumps(v, default=str, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)


def _state_text(state: dict[str, Any]) -> str:
    if state and all(isinstance(v, dict) for v in state.values()):      # `any`: each member's notes
        return "; ".join(f"{n}: " + (" ".join(f"{k}={_value(v)}" for k, v in s.items()) or "-")
                         for n, s in state.items())
    return " ".join(f"{k}={_value(v)}" for k, v in state.items()) or "-"


def print_rounds(rows: list[RoundRow], choice: Any) -> None:
    """The per-round table: a rich table on a terminal, a plain line a round
    elsewhere (logs and pipes keep every column, whatever their width)."""
    out = console()
    info = choice.info or choice._info()
    params = {**info.params, **choice.params}
    shown = [f"{k}={v}" for k, v in params.items() if isinstance(v, (int, float, str, list))]
    print(f"  rule {info.name}" + (f" ({', '.join(shown)})" if shown else "") + f": {len(rows)} round(s)")
    cells = [(str(row.round) + ("" if row.reply == 1 else f" (reply {row.reply})"),
              f"{row.n_calls} {row.kind}" + (": " + ", ".join(row.calls) if row.calls else ""),
              _state_text(row.state), ("(after the stop) " if row.after_stop else "") + row.why) for row in rows]
    if not out.is_terminal:
        for c in cells:
            print(f"  round {c[0]} | calls {c[1]} | state {c[2]} | {c[3]}")
        return
    from rich.table import Table
    t = Table(box=None, show_edge=False)
    for name in ("round", "calls", "rule's state", "why it stopped or went on"):
        t.add_column(name)
    for c in cells:
        t.add_row(*c)
    out.print(t)
