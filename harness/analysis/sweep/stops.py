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

from imprint_core.novelty import NoveltyConfig
from imprint_core.stoprules import build, resolve
from imprint_core.stoprules.builtin import AnyRule
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
    made = build(choice.spec, choice.params)
    if isinstance(made, AnyRule) and made.specs:
        # The earliest of the members' stops, each member through its own fast path (the record's: cached).
        per = [rule_stops(RuleChoice(n, n, p), runs, cache=cache, jobs=jobs) for n, p in made.specs]
        out = [min((s for s in col if s is not None), default=None) for col in zip(*per)]
        if progress:
            progress(len(runs))
        return out
    fast = _record_fast(choice)
    if fast is not None:
        patience, cfg = fast
        computed, _ = compute_progress(runs, [cfg], jobs=jobs, cache=cache)
        out = [stop_rounds(computed[(0, ri)], run.numbers, [patience])[patience] for ri, run in enumerate(runs)]
        if progress:
            progress(len(runs))
        return out
    info = resolve(choice.spec)          # `made` above already checked the parameters, before any run
    out = []
    for run in runs:
        rule = build(info, choice.params)
        stop = None
        try:
            for i, rep in enumerate(run.full):
                if i:
                    rule.reset()
                for rnd in rep.rounds:
                    if rule.observe(round_view(rnd)):
                        stop = rnd.number
                        break
                if stop is not None:
                    break
        except RuleFailed as exc:     # a user's rule raised (stoprules/guard.py): say in which run
            raise exc.in_run(run.origin or run.name) from None
        out.append(stop)
        if progress:
            progress(1)
    return out
