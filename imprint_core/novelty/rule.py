"""The rule: when a read round brings new evidence, and when patience runs out.

ADR 0102 and research-loop.md ("Progress"), as this module applies them:

- Evidence is what read calls returned, judged on normalized text
  (normalization.py: a profile of volatile-token masks), never on the query
  that fetched it: the call's own argument values echoed in its result are
  not judged (echo.py), nor are the lines of the result's template (a line
  that, read with the value replaced, another value gave before:
  echo.template_lines), and a JSON result whose every list is empty is an
  empty read. A result is split into units
  (segmentation.py: JSON hits or paragraphs); units into windows of lines
  (fingerprints.py: a paragraph, or with line fingerprints each line; long
  ones cut where their content says), judged by their shingles, runs of
  `shingle_words` words that never cross a line break.
- A window is *new* when it was not seen exactly before (its fingerprint
  does not depend on the order of its lines) and fewer than
  `containment_threshold` of its distinct judged shingles are in the store,
  or when it holds a *new passage*: a line of two or more shingles none of
  which the store holds, or 2 * `shingle_words` shingles in a row of one
  line that it does not hold (at least shingle_words + 1 new words in a
  row). A new log line or sentence inside a large result is new evidence,
  however much of the result is known; a changed word or number is not.
- A round makes *progress* when it has a new window, and its results
  together (the union, not the sum) add at least `min_new_shingles` judged
  shingles the store does not hold, or all of its largest new window when
  that window is shorter (a short new fact counts), and at least
  `min_new_share` of the judged shingles of all its windows.
- With `near_duplicate` on, a result whose sketch is that close to an
  earlier result's (neardup.py) adds nothing new; it is still remembered.
- Every result of a round is judged against the store as it was before the
  round, so the verdict does not depend on result order; the round is then
  remembered (its echoed shingles too, so that the same evidence is known
  whichever query fetched it). The stores are bounded (store.py): cycles
  stay visible while they fit in them, memory stays flat however long the run.
- A tool error is not evidence: its text is normalized to a signature
  (`repeated_error` tells whether it was seen), and it never makes progress,
  nor does an empty read. Writes are not judged at all; PatienceRule leaves
  a write round out.
- Novelty is a heuristic: it decides when to stop, never what is true.

The counting itself is done in bulk by _fast/tally.py; judging results one by one
(judge, then commit_round) gives the same verdicts as observe_round.
tests/core/novelty/test_novelty_speed_invariants.py checks both against a plain tracker.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import xxhash

from . import neardup
from .echo import Echoes, echoes_of, evidence_free, template_lines
from ._fast.memo import frozen, shared
from ._fast.tally import tally_store
from .fingerprints import SHINGLE_WORDS, FingerprintSet, Lines, Windows, unique, windows_of
from .config import FINGERPRINT_UNITS, MAX_SHINGLE_WORDS, NEAR_DUPLICATE, NoveltyConfig  # noqa: F401  (rule's names too)
from .normalization import normalize, normalize_units
from .segmentation import segment
from .store import BoundedHashSet, FingerprintStore, round_union

_h64 = xxhash.xxh3_64_intdigest

TEMPLATE_CAPACITY = 16_384   # template line readings remembered (echo.template_lines; two generations)


@dataclass
class EvidenceVerdict:
    """Novelty of one tool result, judged against the store before its round."""
    status: str
    paragraphs: int = 0
    new_paragraphs: int = 0
    new_shingles: int = 0
    error_signature: str | None = None
    repeated_error: bool = False
    shingles: int = 0          # judged shingles of its windows, window by window
    largest_new: int = 0       # distinct judged shingles of its largest new window
    near_duplicate: bool = False

    def to_dict(self) -> dict:
        d = {"paragraphs": self.paragraphs, "new_paragraphs": self.new_paragraphs, "new_shingles": self.new_shingles}
        if self.error_signature:
            d["error_signature"] = self.error_signature
            d["repeated_error"] = self.repeated_error
        if self.near_duplicate:
            d["near_duplicate"] = True
        return d


@dataclass
class RoundNovelty:
    verdicts: list[EvidenceVerdict] = field(default_factory=list)
    new_paragraphs: int = 0
    new_shingles: int = 0   # the union over the round, not the sum
    shingles: int = 0       # judged shingles of all the round's windows
    largest_new: int = 0    # distinct judged shingles of the round's largest new window

    min_new_shingles: int = 1
    min_new_share: float = 0.0

    @property
    def progress(self) -> bool:
        return self.progress_at(self.min_new_shingles, self.min_new_share)

    def progress_at(self, min_new_shingles: int, min_new_share: float) -> bool:
        """`progress` under other thresholds: what a sweep's configs that share
        one tracker each read of the same round."""
        return (self.new_paragraphs > 0 and self.new_shingles >= min(min_new_shingles, self.largest_new)
                and self.new_shingles >= min_new_share * self.shingles)


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


_NO_FLAGS = np.empty(0, bool)
_NO_FINGERPRINTS = np.empty(0, np.uint64)


@dataclass
class _JudgedRound:
    verdicts: list[EvidenceVerdict]
    paragraphs: list[int]          # the fingerprints of every window of the round (0: nothing judged in it)
    shingles: np.ndarray           # the distinct judged shingles of the round (unseen windows only)
    in_young: np.ndarray           # ... which the store's young generation holds
    known: np.ndarray              # ... which the store holds
    version: int                   # the store's version they were looked up at
    errors: set[int]
    extra: np.ndarray = field(default_factory=lambda: _NO_FINGERPRINTS)  # shingles remembered, not judged
    sketches: list = field(default_factory=list)  # per verdict: its near-duplicate sketch (or None)
    templates: tuple = ()          # the readings of its echo-bearing lines, to remember (echo.template_lines)
    normed: tuple = ()             # its evidence units, normalized (read by rules that judge the same text again)


Result = Sequence[Any]   # (status, text, segments) or (status, text, segments, arguments)


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
        self._templates = BoundedHashSet(TEMPLATE_CAPACITY)
        self._sketches = neardup.SketchStore() if self.config.near_duplicate != "off" else None

    def judge(self, status: str, text: str, segments: Sequence[str] | None = None,
              arguments: dict | None = None) -> tuple[EvidenceVerdict, AbstractSet[int], set[int]]:
        """Verdict for one result, plus the shingles and paragraph hashes to
        commit once the whole round has been judged. `arguments`: the call's,
        whose values echoed in the result are not evidence."""
        jr = self._judge_round([(status, text, segments, arguments)])
        v = jr.verdicts[0]
        if v.error_signature:
            return v, set(), set(jr.errors)
        if v.status != "ok":
            return v, set(), set()
        sh = FingerprintSet(jr.shingles, jr.in_young, jr.known, jr.version)
        sh.extra, sh.sketch, sh.templates, sh.normed = jr.extra, jr.sketches[0], jr.templates, jr.normed
        return v, sh, set(jr.paragraphs)

    def commit_round(self, judged: Sequence[tuple[EvidenceVerdict, AbstractSet[int], AbstractSet[int]]]) -> RoundNovelty:
        """Remember a round's judged results; the round verdict counts new
        shingles over the union of the round, not the sum."""
        shingle_sets: list[AbstractSet[int]] = []
        paras: list[int] = []
        errors: set[int] = set()
        extra, sketches, templates = [], [], []
        for v, sh, ps in judged:
            if v.error_signature:
                errors |= ps
                continue
            if len(sh):
                shingle_sets.append(sh)
            paras += ps
            if isinstance(sh, FingerprintSet):
                extra.append(sh.extra)
                sketches.append(sh.sketch)
                templates += sh.templates
        union, in_young, known, version = round_union(shingle_sets, self._shingles)
        extra_all = unique(np.concatenate(extra)) if extra else _NO_FINGERPRINTS
        return self._commit(_JudgedRound([v for v, _, _ in judged], paras, union, in_young, known, version, errors,
                                         extra_all, sketches, tuple(templates)))

    def observe_round(self, results: Sequence[Result]) -> RoundNovelty:
        """Judge a round's (status, text, segments[, arguments]) results, then remember them."""
        return self._commit(self._judge_round(results))

    @property
    def stored(self) -> int:
        return len(self._shingles) + len(self._paragraphs) + len(self._errors) + len(self._templates)

    # ------------------------------------------------------------------

    def _judge_round(self, results: Sequence[Result]) -> _JudgedRound:
        cfg = self.config
        verdicts: list[EvidenceVerdict] = []
        errors: set[int] = set()
        units: list[str] = []
        owners: list[int] = []           # the verdict of each unit
        echoes: dict[int, Echoes] = {}   # the verdicts whose call had arguments
        for result in results:
            status, text, segments = result[0], result[1], result[2]
            arguments = result[3] if len(result) > 3 else None
            if status == "error":        # not evidence: a signature, to tell repeated errors
                sig = f"{_h64(normalize(text, 'default').encode()):016x}"
                verdicts.append(EvidenceVerdict(status, error_signature=sig, repeated_error=int(sig, 16) in self._errors))
                errors.add(int(sig, 16))
                continue
            us = list(segments) if segments is not None else segment(text)
            echo = echoes_of(arguments, cfg.normalization) if arguments and status == "ok" else None
            if status != "ok" or not any(map(str.strip, us)) or evidence_free(text, echo):
                verdicts.append(EvidenceVerdict("empty" if status == "ok" else status))
                continue
            if echo is not None and (echo.has_echoes or echo.templated):
                echoes[len(verdicts)] = echo
            owners += [len(verdicts)] * len(us)
            units += us
            verdicts.append(EvidenceVerdict(status))
        nv = len(verdicts)
        version = self._shingles.version
        sketches: list = [None] * nv
        normed = normalize_units(units, cfg.normalization) if units else []
        owner_of_unit = np.array(owners, np.intp)
        # Lines that some other value of the arguments gave before: the template's, not evidence.
        known_templates, remember = [], []
        templated = {o for o, echo in echoes.items() if echo.templated}
        for u, o in enumerate(owners) if templated else ():
            if o in templated:
                echo = echoes[o]
                tl = template_lines(normed[u], echo)
                remember += tl.remember
                if tl.unit_key is not None and tl.unit_key in self._templates:
                    known_templates += [(u, i) for i in range(tl.lines)]
                else:
                    known_templates += [(u, i) for i, ks in tl.lookups if any(k in self._templates for k in ks)]
        templates = tuple(remember)
        win = _round_windows(normed, cfg.shingle_words, cfg.fingerprint_unit == "line", owners, echoes,
                             tuple(known_templates)) if units else None
        if win is None:
            return _JudgedRound(verdicts, [], _NO_FINGERPRINTS, _NO_FLAGS, _NO_FLAGS, version, errors, sketches=sketches,
                                templates=templates, normed=tuple(normed))
        owner = owner_of_unit[win.unit]       # the verdict of each window
        shingles, counts, extra, lines = win.shingles, win.counts, win.extra, win.line
        if self._sketches is not None:        # a near-copy of an earlier result adds nothing new
            near = np.zeros(nv, bool)
            texts: dict[int, list[str]] = {}
            for u, o in zip(normed, owners):
                texts.setdefault(o, []).append(u)
            for i, us in texts.items():
                sk = neardup.sketch(" ".join(" ".join(us).split()).encode())
                sketches[i] = sk
                if sk is not None and self._sketches.best(*sk, cfg.near_duplicate) >= cfg.near_duplicate_threshold:
                    near[i] = verdicts[i].near_duplicate = True
            if near.any():
                drop = near[owner].repeat(counts)
                extra = np.concatenate((extra, shingles[drop]))
                shingles, counts, lines = shingles[~drop], np.where(near[owner], 0, counts), lines[~drop]
        paragraphs = win.hashes.tolist()
        # An exactly seen paragraph is not new and adds nothing; any other is new below the containment threshold.
        t = tally_store(shingles, counts, self._paragraphs.flags(paragraphs), owner, nv, self._shingles,
                        cfg.containment_threshold, lines, cfg.shingle_words)
        for v, counted in zip(verdicts, t.results):
            v.paragraphs, v.shingles, v.new_paragraphs, v.new_shingles, v.largest_new = counted
        return _JudgedRound(verdicts, paragraphs, t.shingles, t.in_young, t.known, version, errors, unique(extra),
                            sketches, templates, tuple(normed))

    def _commit(self, jr: _JudgedRound) -> RoundNovelty:
        cfg = self.config
        rn = RoundNovelty(verdicts=jr.verdicts, min_new_shingles=cfg.min_new_shingles, min_new_share=cfg.min_new_share)
        rn.new_paragraphs = sum(v.new_paragraphs for v in jr.verdicts)
        rn.shingles = sum(v.shingles for v in jr.verdicts)
        rn.largest_new = max((v.largest_new for v in jr.verdicts), default=0)
        union, in_young, known = jr.shingles, jr.in_young, jr.known
        if jr.version != self._shingles.version:  # judged before another commit: look again
            in_young, known = self._shingles.lookup(union)
        rn.new_shingles = union.size - int(np.count_nonzero(known))
        self._shingles.add_new(union[~in_young])
        if jr.extra.size:
            self._shingles.add_all(jr.extra)
        paragraphs = set(jr.paragraphs)
        paragraphs.discard(0)       # a window with nothing judged
        self._paragraphs.add_all(paragraphs)
        self._errors.add_all(jr.errors)
        self._templates.add_all(jr.templates)
        if self._sketches is not None:
            self._sketches.add([sk for sk in jr.sketches if sk is not None])
        return rn


def _windows_key(normed: list[str], width: int, per_line: bool, owners: list[int], echoes: dict[int, Echoes],
                 templates: tuple = ()):
    return tuple(normed), width, per_line, tuple(owners), tuple((i, e.key) for i, e in echoes.items()), templates


@shared(key=_windows_key, size=lambda normed, *_: sum(map(len, normed)), keep=frozen)
def _round_windows(normed: list[str], width: int, per_line: bool, owners: list[int],
                   echoes: dict[int, Echoes], templates: tuple = ()) -> Windows | None:
    """The windows of a round's units (each unit's owner the verdict it
    counts for), the echoes of their calls excluded: the same for every config
    of one normalization, width and fingerprint unit, so a sweep's trackers
    that differ only in what they count (containment threshold, near-duplicate
    setting) share them. `templates`: the (unit, line) pairs that are
    template lines (echo.template_lines), none of whose words is judged."""
    if not echoes:
        return windows_of(normed, width, per_line)
    owner_of_unit = np.array(owners, np.intp)
    win = windows_of(normed, width, per_line, _echo_words(echoes, owner_of_unit, templates))
    if win is not None:
        win = _judge_echo_only_units(win, normed, owner_of_unit, echoes, width, per_line, templates)
    return win


def _judge_echo_only_units(win: Windows, normed: list[str], owner_of_unit: np.ndarray, echoes: dict[int, Echoes],
                           width: int, per_line: bool, templates: tuple) -> Windows:
    """A unit whose every shingle touches an echo is judged on its text with
    the echoes replaced (echo.ECHO_MARK), its template lines left out (a
    unit of template lines only is not judged); what it said in full is
    still remembered, not judged."""
    n = len(normed)
    has = np.bincount(win.unit, minlength=n) > 0
    judged = np.bincount(win.unit, weights=win.counts, minlength=n)
    redo = (has & (judged == 0)).nonzero()[0].tolist()
    if not redo:
        return win
    units = list(normed)
    template_of: dict[int, set[int]] = {}
    for u, i in templates:
        template_of.setdefault(u, set()).add(i)
    redone = set()
    for u in redo:
        echo, skip = echoes[int(owner_of_unit[u])], template_of.get(u, set())
        lines = [line for line in (" ".join(raw.split()) for raw in units[u].split("\n")) if line]
        kept = [echo.replaced(line) for i, line in enumerate(lines) if i not in skip]
        if kept:
            units[u] = "\n".join(kept)
            redone.add(u)
    if not redone:
        return win
    exclude = _echo_words(echoes, owner_of_unit, tuple((u, i) for u, i in templates if u not in redone))
    again = windows_of(units, width, per_line, exclude)
    again.extra = np.concatenate((again.extra, win.extra))
    return again


def _echo_words(echoes: dict[int, Echoes], owner_of_unit: np.ndarray, templates: tuple = ()):
    """The words of each result that its call's arguments echo, and every
    word of its template lines (fingerprints.Exclude)."""
    def exclude(lines: Lines) -> np.ndarray | None:
        flags = np.zeros(lines.bounds.size - 1, bool)
        line_owner = owner_of_unit[lines.unit]
        found = False
        for i, echo in echoes.items():
            at = (line_owner == i).nonzero()[0]
            if at.size:
                found |= echo.words(lines, int(at[0]), int(at[-1]), flags)
        if templates:
            starts = np.searchsorted(lines.unit, [u for u, _ in templates])   # each unit's first line
            for line in (starts + np.array([i for _, i in templates])).tolist():
                flags[lines.first[line]:lines.first[line] + lines.size[line]] = True
            found = True
        return flags if found else None
    return exclude
