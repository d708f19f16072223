"""What `imprint compare` and `imprint tune` share: the split by task into
`PARTS` (`Split`), a stop rule as the user named it (`RuleChoice`) and its
first stop in every run (`rule_stops`; the record's rule through the tuner's
cached per-round progress, any other rule replayed directly).

Both `compare.py` and `tune/search.py` import these from here, so neither imports
the other.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from imprint_core.novelty import NoveltyConfig, shared_work
from imprint_core.stoprules import build, resolve
from imprint_core.stoprules.builtin import AnyRule
from imprint_core.stoprules.candidate import OutcomeRepeat
from imprint_core.stoprules.guard import RuleFailed

from ...realruns.roundlogs import round_view
from .cache import ProgressCache
from .progress import TuneRun, compute_progress, stop_rounds

PARTS = ("dev", "held-out")


# ---- the split ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """Deterministic, by task: a task is held out when the hash of
    `seed:part:task` falls below `holdout` (its own id alone decides, so a
    task never moves when the corpus grows); dev tasks fall into `folds`
    folds by the hash of `seed:fold:task`."""
    holdout: float = 0.3
    folds: int = 5
    seed: str = "imprint-tune"

    def _unit(self, salt: str, task: str) -> float:
        h = hashlib.sha256(f"{self.seed}:{salt}:{task}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2 ** 64

    def part(self, task: str) -> str:
        return "held-out" if self._unit("part", task) < self.holdout else "dev"

    def fold(self, task: str) -> int:
        return min(self.folds - 1, int(self._unit("fold", task) * self.folds))


# ---- a rule's stops ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleChoice:
    label: str                      # as the user named it: `gemini-cli[threshold=3]`
    spec: str
    params: dict[str, Any] = field(default_factory=dict)


def _record_fast(choice: RuleChoice) -> tuple[int, NoveltyConfig] | None:
    """A record rule given only patience and novelty fields goes through the
    tuner's cached progress."""
    if resolve(choice.spec).name != "record":
        return None
    info = resolve("record")
    params = dict(choice.params)
    patience = params.pop("patience", info.params["patience"])
    from imprint_core.stoprules import convert
    fields = {k: convert(info, k, v) for k, v in params.items()}
    rule = build("record", {"patience": patience, **fields})   # checks every value
    return rule.patience.patience, rule.config


def rule_stops(choice: RuleChoice, runs: Sequence[TuneRun], *, cache: ProgressCache | None = None,
               jobs: int | None = 1, progress: Callable[[int], None] | None = None) -> list[int | None]:
    """The first stop round of `choice` in every run (None: never)."""
    return rules_stops([choice], runs, cache=cache, jobs=jobs, progress=progress)[choice.label]


def _members(choice: RuleChoice) -> list[RuleChoice]:
    """The rules whose earliest stop is `choice`'s: the members of an `any`
    (each through its own fast path: the record's cached), or itself."""
    made = build(choice.spec, choice.params)
    if isinstance(made, AnyRule) and made.specs:
        return [m for n, p in made.specs for m in _members(RuleChoice(n, n, p))]
    return [choice]


def rules_stops(choices: Sequence[RuleChoice], runs: Sequence[TuneRun], *, cache: ProgressCache | None = None,
                jobs: int | None = 1, progress: Callable[[int], None] | None = None) -> dict[str, list[int | None]]:
    """The first stop round of each choice in every run (None: never), by
    label; `progress(n)` as n of the (choice, run) pairs are done. The
    record's rule goes through the tuner's cached progress; every other rule
    is replayed, a run at a time, over round views made once for all of them
    (read-only: `protocol.CallView`); rules that judge rounds alike and differ
    only in their patiences (outcome-repeat's variants, the repeat half of
    repeat-aware: `OutcomeRepeat.judging`) judge each round once for all."""
    members = {c.label: _members(c) for c in choices}
    done: dict[int, list[int | None]] = {}      # id of a member: its stops
    replayed: list[RuleChoice] = []
    for c in choices:
        for m in members[c.label]:
            if (fast := _record_fast(m)) is not None:
                patience, cfg = fast
                computed, _ = compute_progress(runs, [cfg], jobs=jobs, cache=cache)
                done[id(m)] = [stop_rounds(computed[(0, ri)], run.numbers, [patience])[patience]
                               for ri, run in enumerate(runs)]
            else:
                replayed.append(m)
        if progress and all(id(m) in done for m in members[c.label]):
            progress(len(runs))
    waiting = sum(any(id(m) not in done for m in ms) for ms in members.values())
    done |= _replayed(replayed, runs, lambda: progress(waiting) if progress else None)
    out = {}
    for c in choices:
        per = [done[id(m)] for m in members[c.label]]
        out[c.label] = per[0] if len(per) == 1 else [min((s for s in col if s is not None), default=None)
                                                     for col in zip(*per)]
    return out


def _replayed(choices: Sequence[RuleChoice], runs: Sequence[TuneRun],
              ran: Callable[[], None] = lambda: None) -> dict[int, list[int | None]]:
    """Each choice replayed over every run, reset at each reply as in the
    loop (a fresh rule a run), by the choice's id; `ran()` after each run."""
    infos = [resolve(c.spec) for c in choices]     # `_members` already checked the parameters, before any run
    alike: dict[tuple, list[int]] = {}
    plain = []
    for k, c in enumerate(choices):
        made = build(infos[k], c.params)
        if isinstance(made, OutcomeRepeat):
            alike.setdefault(made.judging, []).append(k)
        else:
            plain.append(k)
    # one rule of each kind alike, reset for each run (`reset` is the whole state; building one costs a
    # normalization profile's checks)
    tallies = {key: [build(infos[k], choices[k].params) for k in group] for key, group in alike.items()}
    out: list[list[int | None]] = [[] for _ in choices]
    with shared_work():     # a run's repeated results and arguments normalized, segmented and echoed once
        for run in runs:
            views = [[(rnd.number, round_view(rnd)) for rnd in rep.rounds] for rep in run.full]
            try:
                for k in plain:
                    out[k].append(_first_stop(build(infos[k], choices[k].params), views))
            except RuleFailed as exc:     # a user's rule raised (stoprules/guard.py): say in which run
                raise exc.in_run(run.origin or run.name) from None
            for key, group in alike.items():
                for k, stop in zip(group, _tallied(tallies[key], views)):
                    out[k].append(stop)
            ran()
    return {id(c): stops for c, stops in zip(choices, out)}


def _first_stop(rule, views: list[list[tuple[int, Any]]]) -> int | None:
    for i, reply in enumerate(views):
        if i:
            rule.reset()
        for number, view in reply:
            if rule.observe(view):
                return number
    return None


def _tallied(rules: Sequence[OutcomeRepeat], views: list[list[tuple[int, Any]]]) -> list[int | None]:
    """The first stop of each of `rules` (alike in `judging`) in one run: the
    first judges each round, every one tallies its verdicts, until all have
    stopped; the same stops as replaying each alone."""
    stops: list[int | None] = [None] * len(rules)
    judge, waiting = rules[0], set(range(len(rules)))
    for i, reply in enumerate(views):
        for rule in rules:
            rule.reset()
        for number, view in reply:
            verdicts = judge.verdicts(view) if view.kind != "error" else []
            for k in [k for k in waiting if rules[k].tally(verdicts)]:
                stops[k] = number
                waiting.discard(k)
            if not waiting:
                return stops
    return stops
