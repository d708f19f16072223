"""The rule: when a read round brings new evidence, and when patience runs out.

ADR 0102 and research-loop.md ("Progress"), as this module applies them:

- Evidence is what read calls returned, judged on normalized text
  (normalization.py), never on the query that fetched it. A result is split
  into units (segmentation.py: JSON hits or paragraphs); a unit's words are
  judged in windows of WINDOW_WORDS words (fingerprints.py).
- A window is *new* when it was not seen exactly before and fewer than
  `containment_threshold` of its distinct 5-word shingles are in the store.
- A round makes *progress* when it has a new window and its results together
  (the union, not the sum) add at least `min_new_shingles` shingles the store
  does not hold.
- Every result of a round is judged against the store as it was before the
  round, so the verdict does not depend on result order; the round is then
  remembered. The store is bounded (store.py): cycles stay visible while they
  fit in it, memory stays flat however long the run.
- A tool error is not evidence: its text is normalized to a signature
  (`repeated_error` tells whether it was seen), and it never makes progress,
  nor does an empty read. Writes are not judged at all; PatienceRule leaves
  a write round out.
- Novelty is a heuristic: it decides when to stop, never what is true.

The counting itself is done in bulk by _tally.py; judging results one by one
(judge, then commit_round) gives the same verdicts as observe_round.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import xxhash

from ._tally import round_union, tally_round
from .fingerprints import FingerprintSet, windows_of
from .normalization import check_variant, normalize, normalize_units
from .segmentation import segment
from .store import BoundedHashSet, FingerprintStore

_h64 = xxhash.xxh3_64_intdigest


@dataclass(frozen=True)
class NoveltyConfig:
    normalization: str = "default"       # one of NORMALIZATIONS
    containment_threshold: float = 0.8   # a paragraph is new below this
    min_new_shingles: int = 3            # a round needs at least this many
    shingle_capacity: int = 262_144
    paragraph_capacity: int = 65_536

    def __post_init__(self):
        check_variant(self.normalization)
        if not 0 < self.containment_threshold <= 1:
            raise ValueError(f"containment_threshold must be in (0, 1], got {self.containment_threshold}")


@dataclass
class EvidenceVerdict:
    """Novelty of one tool result, judged against the store before its round."""
    status: str
    paragraphs: int = 0
    new_paragraphs: int = 0
    new_shingles: int = 0
    error_signature: str | None = None
    repeated_error: bool = False

    def to_dict(self) -> dict:
        d = {"paragraphs": self.paragraphs, "new_paragraphs": self.new_paragraphs, "new_shingles": self.new_shingles}
        if self.error_signature:
            d["error_signature"] = self.error_signature
            d["repeated_error"] = self.repeated_error
        return d


@dataclass
class RoundNovelty:
    verdicts: list[EvidenceVerdict] = field(default_factory=list)
    new_paragraphs: int = 0
    new_shingles: int = 0   # the union over the round, not the sum

    min_new_shingles: int = 1

    @property
    def progress(self) -> bool:
        return self.new_paragraphs > 0 and self.new_shingles >= self.min_new_shingles


class PatienceRule:
    """Consecutive read rounds without new evidence, up to `patience`.

    A write round neither counts nor resets; an answered ask resets; a failed
    coordinator request, an empty read or an error counts like any round
    without new evidence."""

    def __init__(self, patience: int):
        self.patience = patience
        self.counter = 0

    def update(self, *, write: bool, progress: bool) -> bool:
        """Apply one round; True when patience is exhausted."""
        if write:
            return False
        self.counter = 0 if progress else self.counter + 1
        return self.counter >= self.patience


_EMPTY = FingerprintSet(np.empty(0, np.uint64))
_NO_FLAGS = np.empty(0, bool)


@dataclass
class _JudgedRound:
    verdicts: list[EvidenceVerdict]
    paragraphs: list[int]          # the fingerprints of every window of the round
    shingles: np.ndarray           # the distinct shingles of the round (unseen paragraphs only)
    in_young: np.ndarray           # ... which the store's young generation holds
    known: np.ndarray              # ... which the store holds
    version: int                   # the store's version they were looked up at
    errors: set[int]


class NoveltyTracker:
    """Judges rounds of evidence; keeps bounded fingerprints of all it saw.

    All the results of a round are judged together against the store as it
    was before the round (one normalization pass, one hashing pass, one lookup
    of every distinct fingerprint), which is also what judging them one at a
    time before committing gives."""

    def __init__(self, config: NoveltyConfig | None = None):
        self.config = config or NoveltyConfig()
        self._shingles = FingerprintStore(self.config.shingle_capacity)
        self._paragraphs = BoundedHashSet(self.config.paragraph_capacity)  # a few per result: Python sets
        self._errors = BoundedHashSet(4_096)

    def judge(self, status: str, text: str, segments: Sequence[str] | None = None) -> tuple[EvidenceVerdict, AbstractSet[int], set[int]]:
        """Verdict for one result, plus the shingles and paragraph hashes to
        commit once the whole round has been judged."""
        jr = self._judge_round([(status, text, segments)])
        v = jr.verdicts[0]
        if v.error_signature:
            return v, set(), set(jr.errors)
        if v.status != "ok":
            return v, set(), set()
        sh = FingerprintSet(jr.shingles, jr.in_young, jr.known, jr.version) if jr.shingles.size else _EMPTY
        return v, sh, set(jr.paragraphs)

    def commit_round(self, judged: Sequence[tuple[EvidenceVerdict, AbstractSet[int], AbstractSet[int]]]) -> RoundNovelty:
        """Remember a round's judged results; the round verdict counts new
        shingles over the union of the round, not the sum."""
        shingle_sets: list[AbstractSet[int]] = []
        paras: list[int] = []
        errors: set[int] = set()
        for v, sh, ps in judged:
            if v.error_signature:
                errors |= ps
            else:
                if len(sh):
                    shingle_sets.append(sh)
                paras += ps
        union, in_young, known, version = round_union(shingle_sets, self._shingles)
        return self._commit(_JudgedRound([v for v, _, _ in judged], paras, union, in_young, known, version, errors))

    def observe_round(self, results: Sequence[tuple[str, str, Sequence[str] | None]]) -> RoundNovelty:
        """Judge a round's (status, text, segments) results, then remember them."""
        return self._commit(self._judge_round(results))

    @property
    def stored(self) -> int:
        return len(self._shingles) + len(self._paragraphs) + len(self._errors)

    # ------------------------------------------------------------------

    def _judge_round(self, results: Sequence[tuple[str, str, Sequence[str] | None]]) -> _JudgedRound:
        verdicts: list[EvidenceVerdict] = []
        errors: set[int] = set()
        units: list[str] = []
        owners: list[int] = []           # the verdict of each unit
        for status, text, segments in results:
            if status == "error":        # not evidence: a signature, to tell repeated errors
                sig = f"{_h64(normalize(text, 'default').encode()):016x}"
                verdicts.append(EvidenceVerdict(status, error_signature=sig, repeated_error=int(sig, 16) in self._errors))
                errors.add(int(sig, 16))
                continue
            us = list(segments) if segments is not None else segment(text)
            if status != "ok" or not any(u.strip() for u in us):
                verdicts.append(EvidenceVerdict("empty" if status == "ok" else status))
                continue
            owners += [len(verdicts)] * len(us)
            units += us
            verdicts.append(EvidenceVerdict(status))
        nv = len(verdicts)
        version = self._shingles.version
        win = windows_of(normalize_units(units, self.config.normalization)) if units else None
        if win is None:
            return _JudgedRound(verdicts, [], np.empty(0, np.uint64), _NO_FLAGS, _NO_FLAGS, version, errors)
        owner = np.array(owners, np.intp)[win.unit]       # the verdict of each window
        for v, c in zip(verdicts, np.bincount(owner, minlength=nv).tolist()):
            v.paragraphs = c
        paragraphs = win.hashes.tolist()

        # An exactly seen paragraph is not new and adds nothing.
        seen = np.fromiter(map(self._paragraphs.__contains__, paragraphs), bool, len(paragraphs))
        if seen.all():
            return _JudgedRound(verdicts, paragraphs, np.empty(0, np.uint64), _NO_FLAGS, _NO_FLAGS, version, errors)
        # Any other is new below the containment threshold.
        t = tally_round(win.shingles, win.counts, seen, owner, nv, self._shingles.lookup,
                        self.config.containment_threshold)
        new = t.new & ~seen
        new_per_result = np.bincount(owner[new], minlength=nv).tolist()
        for v, a, b in zip(verdicts, new_per_result, t.new_shingles):
            v.new_paragraphs, v.new_shingles = a, b
        return _JudgedRound(verdicts, paragraphs, t.shingles, t.in_young, t.known, version, errors)

    def _commit(self, jr: _JudgedRound) -> RoundNovelty:
        rn = RoundNovelty(verdicts=jr.verdicts, min_new_shingles=self.config.min_new_shingles)
        rn.new_paragraphs = sum(v.new_paragraphs for v in jr.verdicts)
        union, in_young, known = jr.shingles, jr.in_young, jr.known
        if jr.version != self._shingles.version:  # judged before another commit: look again
            in_young, known = self._shingles.lookup(union)
        rn.new_shingles = union.size - int(np.count_nonzero(known))
        self._shingles.add_new(union[~in_young])
        self._paragraphs.add_all(jr.paragraphs)
        self._errors.add_all(jr.errors)
        return rn
