"""A candidate amendment to ADR 0102: the record's rule, plus a short
patience for rounds that only repeat earlier outcomes (`repeat-aware`).

Why: on the labelled real runs the record's novelty x patience rule catches
almost no loop (reports/compare/). Reading the loops shows why: a looping
agent repeats an *outcome* (the same page with new OCR noise, the same
failing write, the same test output) while its *evidence* looks new to a
shingle count, and the record's patience (9 rounds, chosen so that useful
coding runs are not stopped) is longer than most loops.

The rule, per round (judged against what the reply saw before the round):

- each executed call is *new*, a *repeat*, or *neutral*:
  - a successful read whose result is a near-duplicate of an earlier result
    of the same tool (Jaccard of the normalized text's sketches at least
    `similarity`; novelty/neardup.py) is a repeat, any other is new;
  - an error whose normalized text was seen before from the same tool is a
    repeat; a first error is neutral: errors never reset patience, even
    when their text changes (research-loop.md, "Progress");
  - an answered ask is new (amendment 0159); an empty result (an empty
    status, or a result novelty/echo.py's `evidence_free` calls empty), a
    successful write and a call the deadline suppressed are neutral;
- a round with a new call resets the streak; a round whose calls are
  repeats and neutral ones, with at least one repeat, adds one; a round of
  neutral calls only (or a failed request) leaves it as it is;
- research stops after `repeats` consecutive repeating rounds, and also, as
  ever, when the record's rule stops (its patience and novelty unchanged).

Where it departs from the record, and why: the record leaves every round
holding a write out of the heuristic; here a failed write whose error
repeats is a repeat (it changed nothing, and retrying it is the commonest
loop in the tau-bench runs). Successful writes stay neutral, and writes are
never deduplicated, skipped or retried: the rule only decides when research
stops. The record's fixed points hold: errors and empty reads never reset
its patience (they never reset the streak either), reordering, scores,
timestamps and changed queries alone are not progress (a near-duplicate
result is a repeat whatever the query), and memory stays bounded (two
generations of sketches per tool, at most `MAX_TOOLS` tools).
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections import OrderedDict
from typing import Any, Sequence

import xxhash

from ..novelty import NoveltyConfig, normalize
from ..novelty import neardup
from ..novelty.echo import echoes_of, evidence_free
from ..novelty.normalization import normalize_units, split_profile
from ..novelty.segmentation import segment
from .builtin import PATIENCE_DEFAULT, AnyRule, make_record
from .protocol import Rule, RoundView
from .registry import stop_rule

MAX_KEYS = 4096   # distinct pages and actions remembered (the oldest forgotten first)
MEASURES = ("jaccard", "containment")
WRITES = ("reset", "neutral")
_URL = re.compile(r"https?://[^\s)\]>\"']+")
ACTION_PROFILE = "default"
HEAD_CHARS = 400   # where a browsing tool says which page it shows


class OutcomeRepeat(Rule):
    """Evidence of looping, added up round by round: a round whose calls only
    repeat earlier outcomes adds 1/N, where N is the patience of the weakest
    kind of repeat in it (`error_repeats` for a repeated error, `page_repeats`
    for a page revisited with near-duplicate content, `action_repeats` for an
    action repeated with a near-duplicate result); a round with anything new
    resets the sum; a round of neutral calls leaves it. Research stops when
    the sum reaches 1."""

    def __init__(self, error_repeats: int, page_repeats: int, action_repeats: int, write_repeats: int,
                 similarity: float, measure: str, normalization: str, memory: int, writes: str):
        for name, v in (("error_repeats", error_repeats), ("page_repeats", page_repeats),
                        ("action_repeats", action_repeats), ("write_repeats", write_repeats)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer of at least 1; got {v!r}")
        if not 0 < similarity <= 1:
            raise ValueError(f"similarity must be in (0, 1]; got {similarity}")
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}")
        if memory < 2:
            raise ValueError(f"memory must be at least 2; got {memory}")
        if writes not in WRITES:
            raise ValueError(f"writes must be one of {', '.join(WRITES)}; got {writes!r}")
        NoveltyConfig(normalization=normalization)   # checks the profile's name
        # The text is normalized as the record normalizes it with `base`, then with the masks `normalization`
        # adds: beside the record's rule (repeat-aware), the record's normalized text is read, not made again.
        self.base, self.rest = split_profile(normalization)
        self.patience = {"error": error_repeats, "page": page_repeats, "action": action_repeats,
                         "write": write_repeats}
        self.similarity, self.measure = similarity, measure
        self.normalization, self.memory, self.writes = normalization, memory, writes
        self.reset()

    def reset(self) -> None:
        self.sketches: OrderedDict[str, neardup.SketchStore] = OrderedDict()
        self.errors: OrderedDict[int, None] = OrderedDict()
        self.wrote: OrderedDict[str, None] = OrderedDict()   # write actions that ran
        self.evidence = 0.0    # the sum of 1/N over the current run of repeating rounds
        self.rounds = 0        # rounds in the current run of repeats
        self.last = ""

    def _target(self, c) -> tuple[str, str]:
        """(kind, key): a page when a browsing tool's result names pages at its
        head (the key is those pages), else an action (tool and normalized arguments)."""
        urls = _URL.findall(c.result[:HEAD_CHARS])
        if urls:
            return "page", c.tool + "@" + " ".join(sorted(set(urls)))
        # Arguments are masked with the default profile: OCR-noise masks would merge distinct short arguments.
        args = json.dumps(c.args, sort_keys=True, ensure_ascii=False, default=str)
        return "action", c.tool + ":" + normalize(args, ACTION_PROFILE)

    def _store(self, key: str) -> neardup.SketchStore:
        store = self.sketches.get(key)
        if store is None:
            store = self.sketches[key] = neardup.SketchStore(self.memory)
            while len(self.sketches) > MAX_KEYS:
                self.sketches.popitem(last=False)
        self.sketches.move_to_end(key)
        return store

    def _rest(self, text: str) -> str:
        return self.rest.apply(text) if self.rest is not None else text

    def _units(self, i: int, c, reads: dict[int, tuple] | None) -> Sequence[str] | None:
        """A successful read's evidence units normalized with `base`, or None
        for an empty read: as the record's tracker judges them (`reads`, the
        record rule's judgement of this round, when its normalization is `base`)."""
        if reads is not None and i in reads:
            verdict, normed = reads[i]
            return None if verdict.status != "ok" or normed is None else normed
        units = list(c.segments) if c.segments is not None else segment(c.result)
        echoes = (lambda: echoes_of(c.args, self.base)) if c.args else None
        if not any(u.strip() for u in units) or evidence_free(c.result, echoes):
            return None
        return normalize_units(units, self.base)

    def verdicts(self, round: RoundView, reads: dict[int, tuple] | None = None) -> list[str]:
        """Each call's verdict: new, neutral, or the kind of repeat (error,
        page, action), judged against what the reply saw before this round;
        then the round is remembered. `reads`: the record rule's judgement of
        the same round (RecordRule.reads), read instead of normalizing again."""
        out, pending_sk, pending_err, pending_w = [], [], [], []
        for i, c in enumerate(round.calls):
            if c.status == "not_executed":
                out.append("neutral")
            elif c.kind == "write" and c.status in ("ok", "empty"):
                # A write that ran changed something: what follows is news ("reset"), or it is left out like the
                # record leaves write rounds out ("neutral"). The same write done again (a backup restored, an
                # edit re-applied) is a repeat of its own kind: the write still runs, only the stop rule counts it.
                _, action = self._target(c)
                out.append("write" if action in self.wrote else "new" if self.writes == "reset" else "neutral")
                pending_w.append(action)
            elif c.status == "empty":
                out.append("neutral")
            elif c.kind == "ask":
                out.append("new" if c.status == "ok" else "neutral")
            elif c.status == "error":
                # The same action failing the same way is a repeated error; the same error after another
                # action is a retry with variation, which says something, so it weighs as a repeated action.
                _, action = self._target(c)
                text = self._rest(normalize(c.result, self.base))
                same = xxhash.xxh3_64_intdigest(f"{action}\0{text}".encode())
                other = xxhash.xxh3_64_intdigest(f"{c.tool}\0{text}".encode())
                # A first error is neutral, not new: otherwise changing error texts between repeated reads
                # reset the streak for ever (research-loop.md: changing errors do not reset patience).
                out.append("error" if same in self.errors else "action" if other in self.errors else "neutral")
                pending_err += [same, other]
            elif (units := self._units(i, c, reads)) is None:
                out.append("neutral")     # an empty read, whatever envelope it came in (as the record judges it)
            else:
                sk = neardup.sketch(" ".join(self._rest(" ".join(units)).split()).encode())
                if sk is None:
                    out.append("neutral")
                    continue
                kind, key = self._target(c)
                best = self.sketches[key].best(*sk, self.measure) if key in self.sketches else 0.0
                out.append(kind if best >= self.similarity else "new")
                pending_sk.append((key, sk))
        # Remembered after the whole round is judged, so the verdict does not depend on call order.
        for key, sk in pending_sk:
            self._store(key).add([sk])
        for sig in pending_err:
            self.errors[sig] = None
            self.errors.move_to_end(sig)
        for action in pending_w:
            self.wrote[action] = None
            self.wrote.move_to_end(action)
        while len(self.wrote) > self.memory:
            self.wrote.popitem(last=False)
        while len(self.errors) > self.memory:
            self.errors.popitem(last=False)
        return out

    @property
    def judging(self) -> tuple:
        """What the verdicts depend on (every parameter but the patiences):
        rules alike in it give the same verdicts round by round, so a replay
        may judge once for all of them and `tally` each (harness sweep/stops.py)."""
        return self.similarity, self.measure, self.normalization, self.memory, self.writes

    def observe(self, round: RoundView, reads: dict[int, tuple] | None = None) -> str | None:
        return self.tally(self.verdicts(round, reads) if round.kind != "error" else [])

    def tally(self, verdicts: list[str]) -> str | None:
        """A round's verdicts added to the evidence: the reason to stop, or None."""
        repeats = [v for v in verdicts if v in self.patience]
        if "new" in verdicts:
            self.evidence, self.rounds = 0, 0
        elif repeats:
            # The weakest kind of repeat in the round sets its weight: the longest patience.
            self.evidence += 1 / max(self.patience[v] for v in repeats)
            self.rounds += 1
        self.last = ",".join(verdicts)
        if self.evidence >= 1 - 1e-9:
            return f"{self.rounds} consecutive rounds that only repeat earlier outcomes ({self.last})"
        return None

    def notes(self) -> dict[str, Any]:
        return {"repeat_evidence": round(self.evidence, 4), "repeat_rounds": self.rounds, "calls": self.last}


@stop_rule("outcome-repeat", source="the repeat half of the candidate amendment (docs/adr/0102-amendment-repeat-aware.md): "
                                    "consecutive rounds whose calls only repeat earlier outcomes")
def make_outcome_repeat(error_repeats: int = 1, page_repeats: int = 2, action_repeats: int = 6,
                        write_repeats: int = 3, similarity: float = 0.8, measure: str = "jaccard", normalization: str = "ocr",
                        memory: int = 1024, writes: str = "reset") -> OutcomeRepeat:
    """Stop after consecutive rounds that only repeat earlier outcomes: `error_repeats` rounds of repeated errors,
    `page_repeats` of pages revisited with near-duplicate content, `action_repeats` of actions repeated with
    near-duplicate results (mixed rounds weigh by their weakest repeat)."""
    return OutcomeRepeat(error_repeats, page_repeats, action_repeats, write_repeats, similarity, measure,
                         normalization, memory, writes)


class RepeatAware(AnyRule):
    """`any` of the record's rule and outcome-repeat, where outcome-repeat
    reads the text the record's tracker normalized (when its profile builds on
    the record's), instead of normalizing each result a second time: the same
    stops as `any[rules=record,outcome-repeat]`, at about the cost of one."""

    def observe(self, round: RoundView) -> str | None:
        (_, record), (_, repeat) = self.rules
        why = record.observe(round)
        shared = record.reads if repeat.base == record.config.normalization else None
        return self.fired([("record", why), ("outcome-repeat", repeat.observe(round, shared))])


REPEAT_AWARE_ERROR_REPEATS = 3
"""repeat-aware's error_repeats, chosen on the dev part only (the most dev loops among the variants that harm no
more dev runs than the record's rule) and decided on the held-out part (docs/adr/0102-amendment-repeat-aware.md)."""


@stop_rule("repeat-aware", source="ADR 0102 as amended (docs/adr/0102-amendment-repeat-aware.md), the shipped "
                                  "default: the record's rule, and outcome-repeat's short patience for rounds that "
                                  "only repeat")
def make_repeat_aware(error_repeats: int = REPEAT_AWARE_ERROR_REPEATS, page_repeats: int = 2, action_repeats: int = 6,
                      write_repeats: int = 3, similarity: float = 0.8, measure: str = "jaccard",
                      normalization: str = "ocr", memory: int = 1024, writes: str = "reset",
                      patience: int = PATIENCE_DEFAULT, novelty: NoveltyConfig | None = None,
                      record_normalization: str | None = None) -> RepeatAware:
    """The record's rule (its patience and novelty config: the loop's, unless given), and a stop after
    consecutive rounds whose calls only repeat earlier outcomes (outcome-repeat). `record_normalization`
    overrides the novelty config's normalization."""
    repeat = {"error_repeats": error_repeats, "page_repeats": page_repeats, "action_repeats": action_repeats,
              "write_repeats": write_repeats, "similarity": similarity, "measure": measure,
              "normalization": normalization, "memory": memory, "writes": writes}
    cfg = novelty or NoveltyConfig()
    if record_normalization is not None:
        cfg = dataclasses.replace(cfg, normalization=record_normalization)
    record = {"patience": patience, **({"novelty": cfg} if cfg != NoveltyConfig() else {})}
    return RepeatAware([("record", make_record(patience, cfg)), ("outcome-repeat", make_outcome_repeat(**repeat))],
                       specs=[("record", record), ("outcome-repeat", repeat)])
