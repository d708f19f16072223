"""Evidence novelty: normalization, fingerprints, a bounded store, patience.

A read round makes progress when some paragraph of its evidence is new (its
5-word-shingle containment in what was already seen is below a threshold)
and the round adds enough new shingles. Every paragraph of a round is judged
against the store as it was before the round, so the verdict does not depend
on result order. The store keeps two generations of bounded sets, so memory
stays flat however long the run, and cycles (A B A B, A B C A B C) stay
visible as long as the cycle fits in the store.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import xxhash

_h64 = xxhash.xxh3_64_intdigest

NORMALIZATIONS: tuple[str, ...] = ("none", "basic", "default")
SHINGLE_WORDS = 5
WINDOW_WORDS = 200  # long paragraphs are judged in windows of this many words

# Volatile tokens the `default` variant masks. Other numbers are kept: prices,
# counts and versions can be the very facts the research is after.
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*"), r"\1"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    # Not the digits of a decimal fraction ("score: 0.4279989206443445e-05").
    (re.compile(r"(?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"), "<date>"),
    (re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "<date>"),
    (re.compile(r"\b" + _MONTH + r" \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"), "<date>"),
    (re.compile(r"\b\d{1,2} " + _MONTH + r",? \d{4}\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\+\d)?\b"), "<time>"),
    (re.compile(r"\b\d+ (?:second|minute|hour|day|week|month|year)s? ago\b"), "<ago>"),
    (re.compile(r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
                r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), r"\1\2<n>"),
    (re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|][ \t]?"), ""),
)


def normalize(text: str, variant: str = "default") -> str:
    """Normalize one paragraph. `none` leaves it as it is; `basic` is NFKC,
    casefold and collapsed whitespace; `default` also masks volatile tokens."""
    if variant == "none":
        return text
    if variant not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {variant!r}; allowed: {', '.join(NORMALIZATIONS)}")
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if variant == "default":
        for pattern, repl in _MASKS:
            text = pattern.sub(repl, text)
    return " ".join(text.split())


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def segment(text: str) -> list[str]:
    """Split a tool result into evidence units: the items of a JSON array (one
    hit each), else blank-line separated paragraphs."""
    stripped = text.strip()
    if stripped[:1] == "[" and stripped[-1:] == "]":
        try:
            items = json.loads(stripped)
        except ValueError:
            items = None
        if isinstance(items, list):
            return [i if isinstance(i, str) else json.dumps(i, ensure_ascii=False, sort_keys=True) for i in items]
    return [p for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def shingles(words: Sequence[str]) -> set[int]:
    """64-bit fingerprints of the 5-word shingles; a shorter text is one shingle."""
    if not words:
        return set()
    hashes = list(map(_h64, map(str.encode, words)))
    if len(hashes) < SHINGLE_WORDS:
        return {hash(tuple(hashes))}
    return set(map(hash, zip(*(hashes[i:] for i in range(SHINGLE_WORDS)))))


class BoundedHashSet:
    """At most `capacity` hashes in two generations: when the young one is
    half full it becomes the old one and the previous old one is dropped."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._young: set[int] = set()
        self._old: set[int] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, h: int) -> bool:
        return h in self._young or h in self._old

    def count_known(self, hs: set[int]) -> int:
        known = hs & self._young
        if self._old:
            known |= (hs - known) & self._old
        return len(known)

    def add_all(self, hs: Iterable[int]) -> None:
        self._young.update(hs)
        if len(self._young) >= self.capacity // 2:
            self._old, self._young = self._young, set()


@dataclass(frozen=True)
class NoveltyConfig:
    normalization: str = "default"
    containment_threshold: float = 0.8   # a paragraph is new below this
    min_new_shingles: int = 3            # a round needs at least this many
    shingle_capacity: int = 262_144
    paragraph_capacity: int = 65_536

    def __post_init__(self):
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {self.normalization!r}; allowed: {', '.join(NORMALIZATIONS)}")
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


class NoveltyTracker:
    """Judges rounds of evidence; keeps bounded fingerprints of all it saw."""

    def __init__(self, config: NoveltyConfig | None = None):
        self.config = config or NoveltyConfig()
        self._shingles = BoundedHashSet(self.config.shingle_capacity)
        self._paragraphs = BoundedHashSet(self.config.paragraph_capacity)
        self._errors = BoundedHashSet(4_096)

    def _windows(self, unit: str) -> Iterable[list[str]]:
        words = normalize(unit, self.config.normalization).split()
        for start in range(0, max(len(words), 1), WINDOW_WORDS):
            window = words[start:start + WINDOW_WORDS]
            if window:
                yield window

    def judge(self, status: str, text: str, segments: Sequence[str] | None = None) -> tuple[EvidenceVerdict, set[int], set[int]]:
        """Verdict for one result, plus the shingles and paragraph hashes to
        commit once the whole round has been judged."""
        if status == "error":
            sig = f"{_h64(normalize(text, 'default').encode()):016x}"
            v = EvidenceVerdict(status, error_signature=sig, repeated_error=int(sig, 16) in self._errors)
            return v, set(), {int(sig, 16)}
        units = list(segments) if segments is not None else segment(text)
        if status != "ok" or not any(u.strip() for u in units):
            return EvidenceVerdict("empty" if status == "ok" else status), set(), set()
        v = EvidenceVerdict(status)
        all_sh: set[int] = set()
        paras: set[int] = set()
        threshold = self.config.containment_threshold
        for unit in units:
            for window in self._windows(unit):
                v.paragraphs += 1
                ph = _h64(" ".join(window).encode())
                paras.add(ph)
                if ph in self._paragraphs:
                    continue  # the exact paragraph was seen: not new, nothing to add
                sh = shingles(window)
                if self._shingles.count_known(sh) < threshold * len(sh):
                    v.new_paragraphs += 1
                all_sh |= sh
        v.new_shingles = len(all_sh) - self._shingles.count_known(all_sh)
        return v, all_sh, paras

    def commit_round(self, judged: Sequence[tuple[EvidenceVerdict, set[int], set[int]]]) -> RoundNovelty:
        """Remember a round's judged results; the round verdict counts new
        shingles over the union of the round, not the sum."""
        rn = RoundNovelty(min_new_shingles=self.config.min_new_shingles)
        round_sh: set[int] = set()
        round_paras: set[int] = set()
        errors: set[int] = set()
        for v, sh, paras in judged:
            rn.verdicts.append(v)
            rn.new_paragraphs += v.new_paragraphs
            if v.error_signature:
                errors |= paras
            else:
                round_sh |= sh
                round_paras |= paras
        rn.new_shingles = len(round_sh) - self._shingles.count_known(round_sh)
        self._shingles.add_all(round_sh)
        self._paragraphs.add_all(round_paras)
        self._errors.add_all(errors)
        return rn

    def observe_round(self, results: Sequence[tuple[str, str, Sequence[str] | None]]) -> RoundNovelty:
        """Judge a round's (status, text, segments) results, then remember them."""
        return self.commit_round([self.judge(st, text, segs) for st, text, segs in results])

    @property
    def stored(self) -> int:
        return len(self._shingles) + len(self._paragraphs) + len(self._errors)


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
