"""The built-in stop rules. Each cites where it comes from and keeps that
source's parameter names and defaults; each registers as a user's rule would.

What a round log cannot show: model text (Gemini CLI's content rule,
OpenHands' monologue) and context-window condensations (OpenHands' fifth
scenario) are not in a round, so those parts cannot fire on replays; where
the loop can see their analogue (replies with neither text nor calls) the
rule says so.
"""
from __future__ import annotations

import dataclasses
import typing
from collections import OrderedDict, deque
from typing import Any

import xxhash

from .. import params as typed
from ..novelty import NoveltyConfig, NoveltyTracker, PatienceRule
from ..novelty.rule import RoundNovelty
from ..rounds import classify_round
from ..settings import SPECS
from .protocol import CallView, Rule, RoundView, calls_of
from .registry import build, register, stop_rule

_NOVELTY_FIELDS = {f.name: f.default for f in dataclasses.fields(NoveltyConfig)}
_NOVELTY_TYPES = {n: t for n, t in typing.get_type_hints(NoveltyConfig).items() if n in _NOVELTY_FIELDS}
PATIENCE_DEFAULT = SPECS["chat.research_no_progress_rounds"].default


class RecordRule(Rule):
    """ADR 0102: consecutive read rounds without new evidence, up to
    `patience`; a write round neither counts nor resets; an answered ask
    resets; errors and empty reads count like any round without evidence."""

    name = "record"

    def __init__(self, patience: int = PATIENCE_DEFAULT, novelty: NoveltyConfig | None = None):
        self.config = novelty or NoveltyConfig()
        self.patience = PatienceRule(patience)
        self.tracker = NoveltyTracker(self.config)
        self._notes: dict[str, Any] = {}
        self.reads: dict[int, tuple] = {}   # the last round's reads: call index -> (verdict, normalized units)

    def reset(self) -> None:
        self.tracker = NoveltyTracker(self.config)
        self.patience = PatienceRule(self.patience.patience)

    def observe(self, round: RoundView) -> str | None:
        self.reads: dict[int, tuple] = {}
        if round.kind == "error":   # a failed request or an empty reply: a round without evidence
            kind, progress, verdicts, new = "error", False, {}, (0, 0)
        else:
            judged_calls, judged, novelty = judge_reads(self.tracker, round)
            kind, progress = classify_round(((c.kind, c.status) for c in round.calls),
                                            novelty_progress=novelty.progress)
            verdicts = {i: j[0] for (i, _), j in zip(judged_calls, judged)}
            # Each read's verdict and normalized units, for a rule that judges the same text after this one.
            self.reads = {i: (v, getattr(sh, "normed", None)) for (i, _), (v, sh, _) in zip(judged_calls, judged)}
            new = (novelty.new_paragraphs, novelty.new_shingles)
        exhausted = self.patience.update(write=kind == "write", progress=progress)
        self._notes = {"progress": progress, "new_paragraphs": new[0], "new_shingles": new[1],
                       "patience_counter": self.patience.counter, "patience": self.patience.patience,
                       "verdicts": verdicts}
        if exhausted:
            return f"{self.patience.patience} consecutive rounds without new evidence"
        return None

    def notes(self) -> dict[str, Any]:
        return self._notes


def judged_calls(round: RoundView) -> list[tuple[int, CallView]]:
    """The (index, call) pairs of a round that the novelty tracker judges: the
    reads that ran. Evidence is what successful reads returned, with the
    call's own arguments echoed in it left out; writes and answers are not judged."""
    return [(i, c) for i, c in enumerate(round.calls) if c.kind == "read" and c.status != "not_executed"]


def judge_reads(tracker: NoveltyTracker, round: RoundView) -> tuple[list, list, RoundNovelty]:
    """A round's reads judged and remembered by the tracker: the judged
    (index, call) pairs (`judged_calls`), their judgements and the round's novelty."""
    calls = judged_calls(round)
    judged = [tracker.judge(c.status, c.result, c.segments, c.args) for _, c in calls]
    return calls, judged, tracker.commit_round(judged)


@stop_rule("record", source="ADR 0102 (Decision; research-loop.md, Progress): novelty × patience",
           extra_params={k: v for k, v in _NOVELTY_FIELDS.items()}, extra_types=_NOVELTY_TYPES)
def make_record(patience: int = PATIENCE_DEFAULT, novelty: NoveltyConfig | None = None, **fields: Any) -> RecordRule:
    """The record's rule: `patience` consecutive read rounds without new evidence (any NoveltyConfig field too)."""
    spec = SPECS["chat.research_no_progress_rounds"]
    if isinstance(patience, bool) or not isinstance(patience, int) or not spec.min <= patience <= spec.max:
        raise ValueError(f"patience must be an integer in {spec.bounds()}; got {patience!r}")
    cfg = dataclasses.replace(novelty or NoveltyConfig(), **fields) if fields else novelty
    return RecordRule(patience, cfg)


class RoundCap(Rule):
    def __init__(self, max_rounds: int):
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1; got {max_rounds}")
        self.max_rounds, self.rounds = max_rounds, 0

    def reset(self) -> None:
        self.rounds = 0

    def observe(self, round: RoundView) -> str | None:
        self.rounds += 1
        return f"round cap of {self.max_rounds} reached" if self.rounds >= self.max_rounds else None

    def notes(self) -> dict[str, Any]:
        return {"rounds": self.rounds}


@stop_rule("round-cap", source="ADR 0101's fixed cutoff (12 rounds), rejected by ADR 0102; smolagents' max_steps")
def make_round_cap(max_rounds: int = 12) -> RoundCap:
    """Stop after `max_rounds` rounds of a reply, whatever they brought."""
    return RoundCap(max_rounds)


class IdenticalBatch(Rule):
    def __init__(self, repeats: int):
        if repeats < 2:
            raise ValueError(f"repeats must be at least 2 (a batch and its repetition); got {repeats}")
        self.repeats = repeats
        self.reset()

    def reset(self) -> None:
        self.last: tuple[str, ...] | None = None
        self.count = 0

    def observe(self, round: RoundView) -> str | None:
        batch = tuple(c.action for c in round.calls)
        if not batch:            # no batch: nothing to compare, the streak ends
            self.reset()
            return None
        self.count = self.count + 1 if batch == self.last else 1
        self.last = batch
        if self.count >= self.repeats:
            return f"{self.count} identical consecutive call batches"
        return None

    def notes(self) -> dict[str, Any]:
        return {"identical_batches": self.count}


@stop_rule("identical-batch", source="ADR 0101's repetition test (identical consecutive call batches), "
                                     "rejected by ADR 0102")
def make_identical_batch(repeats: int = 2) -> IdenticalBatch:
    """Stop when `repeats` consecutive rounds call the same tools with the same arguments, in the same order."""
    return IdenticalBatch(repeats)


class OpenHandsStuck(Rule):
    """The StuckDetector's scenarios over the reply's calls (action: tool and
    arguments; observation: status and result text), checked after every
    call as OpenHands checks after every step."""

    def __init__(self, repeat_pairs: int, repeat_errors: int, alternating_steps: int, empty_replies: int):
        for n, v, lo in (("repeat_pairs", repeat_pairs, 2), ("repeat_errors", repeat_errors, 2),
                         ("alternating_steps", alternating_steps, 4), ("empty_replies", empty_replies, 2)):
            if v < lo:
                raise ValueError(f"{n} must be at least {lo}; got {v}")
        if alternating_steps % 2:
            raise ValueError(f"alternating_steps must be even (pairs of A, B); got {alternating_steps}")
        self.repeat_pairs, self.repeat_errors = repeat_pairs, repeat_errors
        self.alternating_steps, self.empty_replies = alternating_steps, empty_replies
        self.reset()

    def reset(self) -> None:
        keep = max(self.repeat_pairs, self.repeat_errors, self.alternating_steps)
        self.steps: deque[tuple[str, tuple[str, str]]] = deque(maxlen=keep)  # (action, observation)
        self.empty = 0

    def observe(self, round: RoundView) -> str | None:
        if round.kind == "error" and not round.calls:
            # The loop's analogue of an empty agent message: a reply with
            # neither text nor calls (OpenHands' empty-response scenario).
            self.empty += 1
            return f"{self.empty} consecutive empty replies" if self.empty >= self.empty_replies else None
        self.empty = 0
        for c in calls_of(round):
            self.steps.append((c.action, (c.status, c.result)))
            why = self._stuck()
            if why:
                return why
        return None

    def _stuck(self) -> str | None:
        s = list(self.steps)
        n = self.repeat_pairs
        if len(s) >= n and all(x == s[-1] for x in s[-n:]):
            return f"the same action and observation {n} times in a row"
        n = self.repeat_errors
        if len(s) >= n and all(a == s[-1][0] and o[0] == "error" for a, o in s[-n:]):
            return f"the same action failing {n} times in a row"
        n = self.alternating_steps
        if len(s) >= n:
            last = s[-n:]
            if all(last[i] == last[i % 2] for i in range(n)) and last[0] != last[1]:
                return f"two actions alternating with the same observations over {n} steps"
        return None

    def notes(self) -> dict[str, Any]:
        return {"steps": len(self.steps)}


@stop_rule("openhands", source="OpenHands StuckDetector (openhands/controller/stuck.py): scenarios 1, 2, 4 and 6; "
                               "the monologue (3) and condensation (5) scenarios need model text and condensation "
                               "events, which round logs do not carry")
def make_openhands(repeat_pairs: int = 4, repeat_errors: int = 3, alternating_steps: int = 6,
                   empty_replies: int = 3) -> OpenHandsStuck:
    """Repeated action/observation pairs, an action failing again and again, A/B alternation, empty replies."""
    return OpenHandsStuck(repeat_pairs, repeat_errors, alternating_steps, empty_replies)


class GeminiToolLoop(Rule):
    def __init__(self, threshold: int):
        if threshold < 2:
            raise ValueError(f"threshold must be at least 2; got {threshold}")
        self.threshold = threshold
        self.reset()

    def reset(self) -> None:
        self.last: str | None = None
        self.count = 0

    def observe(self, round: RoundView) -> str | None:
        for c in round.calls:     # every call the model asked for, as Gemini CLI counts requests
            if c.action == self.last:
                self.count += 1
            else:
                self.last, self.count = c.action, 1
            if self.count >= self.threshold:
                return f"the same tool call {self.count} times in a row ({c.tool})"
        return None

    def notes(self) -> dict[str, Any]:
        return {"repeats": self.count}


@stop_rule("gemini-cli", source="Gemini CLI LoopDetectionService (packages/core/src/services/loopDetectionService.ts): "
                                "the tool-call rule (name and arguments hashed, consecutive repeats, threshold 5); "
                                "its content rule needs streamed model text and its model-judged layer another "
                                "model: both out of scope")
def make_gemini_cli(threshold: int = 5) -> GeminiToolLoop:
    """Stop at `threshold` consecutive identical tool calls (name and arguments)."""
    return GeminiToolLoop(threshold)


class ResultAwareRepeat(Rule):
    """Rounds in which every call repeats an earlier call of the reply with
    the same result: nothing asked was new, and nothing answered was new."""

    def __init__(self, repeats: int, memory: int):
        if repeats < 1 or memory < 1:
            raise ValueError(f"repeats and memory must be at least 1; got {repeats}, {memory}")
        self.repeats, self.memory = repeats, memory
        self.reset()

    def reset(self) -> None:
        self.seen: OrderedDict[int, None] = OrderedDict()   # bounded: the oldest are forgotten first
        self.count = 0

    def observe(self, round: RoundView) -> str | None:
        calls = calls_of(round)
        keys = [xxhash.xxh3_64_intdigest(f"{c.action}\x00{c.status}\x00{' '.join(c.result.split())}".encode())
                for c in calls]
        repeated = bool(keys) and all(k in self.seen for k in keys)
        for k in keys:
            self.seen[k] = None
            self.seen.move_to_end(k)
        while len(self.seen) > self.memory:
            self.seen.popitem(last=False)
        self.count = self.count + 1 if repeated else 0
        if self.count >= self.repeats:
            return f"{self.count} consecutive rounds that only repeat earlier calls and their results"
        return None

    def notes(self) -> dict[str, Any]:
        return {"repeats": self.count}


@stop_rule("result-aware-repeat", source="the repeated-call check with the result compared too, as OpenHands' "
                                         "first scenario compares observations and detectors that moved to it after "
                                         "false positives on verification cycles (re-running a test after an edit)")
def make_result_aware_repeat(repeats: int = 3, memory: int = 4096) -> ResultAwareRepeat:
    """Stop after `repeats` consecutive rounds whose every call repeats an earlier call with the same result."""
    return ResultAwareRepeat(repeats, memory)


class AnyRule(Rule):
    """`specs`, where known: each member as (name, parameters), so that a
    replay can compute each member's stops apart (the first stop of `any` is
    the earliest of its members': each sees every round whoever stops)."""

    def __init__(self, rules: list[tuple[str, Rule]], specs: list[tuple[str, dict[str, Any]]] | None = None):
        if not rules:
            raise ValueError("any needs at least one rule")
        self.rules, self.specs = rules, specs

    def reset(self) -> None:
        for _, r in self.rules:
            r.reset()

    def observe(self, round: RoundView) -> str | None:
        # Every rule sees every round, so each keeps its own state whichever stops.
        return self.fired([(n, r.observe(round)) for n, r in self.rules])

    @staticmethod
    def fired(reasons: list[tuple[str, str | None]]) -> str | None:
        """The reason of a stop: each member's that fired, by name."""
        fired = [f"{n}: {why}" for n, why in reasons if why]
        return "; ".join(fired) if fired else None

    def notes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, r in self.rules:
            for k, v in r.notes().items():
                out.setdefault(k, v)
        return out


@stop_rule("any", source="composition: stops when any of its rules stops")
def make_any(rules: list = ["record", "gemini-cli"], **params: Any) -> AnyRule:  # noqa: B006 (never mutated)
    """Stops when any of `rules` stops; `NAME.PARAM=VALUE` sets a parameter of one of them."""
    names = [r.strip() for r in (typed.list_items(rules) if isinstance(rules, str) else rules) if str(r).strip()]
    per: dict[str, dict[str, Any]] = {n: {} for n in names}
    for key, value in params.items():
        name, dot, p = key.rpartition(".")
        if not dot or name not in per:
            raise ValueError(f"parameter {key!r} names no rule of {names} (write NAME.PARAM=VALUE)")
        per[name][p] = value
    return AnyRule([(n, build(n, per[n])) for n in names], [(n, per[n]) for n in names])


