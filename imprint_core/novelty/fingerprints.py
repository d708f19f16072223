"""Fingerprints: the shingles and windows evidence is judged by, hashed.

A unit's lines are its newline-separated lines, each reduced to its words
(as str.split() gives them) joined by single spaces; empty lines are left
out. A *shingle* is a run of `width` words (SHINGLE_WORDS by default) inside
one line, or the whole line if it is shorter: shingles never cross a line
break, so the order of a unit's lines changes none of them.

A *span* is a unit (paragraph fingerprints) or a line (line fingerprints).
A span of up to 2 * WINDOW_MIN words is one *window*; a longer one is cut
into windows where its content says (window_cuts): before an *anchor* (a
shingle whose mixed fingerprint's top 24 bits are 0 modulo ANCHOR_EVERY,
is_anchor_plain) at least WINDOW_MIN words after the last cut and before the
end, or WINDOW_MAX words after the last cut if no anchor comes. Cutting at fixed offsets would move
every window when a word is added at the start; anchors move with the text.
A shingle belongs to the window its first word is in.

A shingle fingerprint is a 64-bit hash of the UTF-8 bytes of the shingle
(its words joined by single spaces): a polynomial hash mod 2**64,
sum((b[j] + 1) * P**j) (span_hash_plain), computed for all the shingles of a
round at once from prefix sums (never 0: 0 marks an empty slot in the store).
A window's fingerprint is the sum mod 2**64 of the mixed (mix64) fingerprints
of its judged shingles: a multiset hash, so reordered lines give the same
window. Deterministic across processes and machines (no str hash()).

Shingles that touch an excluded word (the call's own arguments echoed in its
result) are not judged: they are remembered (`extra`) but never counted.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ._fast import accel
from ._fast.memo import frozen, shared

SHINGLE_WORDS = 5
WINDOW_WORDS = 200                   # a long span is cut into windows of about this many words
WINDOW_MIN = WINDOW_WORDS // 2       # no window is shorter, but a whole span
WINDOW_MAX = 2 * WINDOW_WORDS        # no window is longer, but a span's last
ANCHOR_EVERY = WINDOW_WORDS - WINDOW_MIN  # one shingle in this many is an anchor

_P = 0x9E3779B97F4A7C15                     # odd, so invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_MASK64 = (1 << 64) - 1
_MIX = 0xBF58476D1CE4E5B9
_POWERS = [np.ones(1, np.uint64), np.ones(1, np.uint64)]
_ONE = np.uint64(1)
_ZERO = np.zeros(1, np.intp)
_NONE = np.empty(0, np.uint64)
_SEPARATORS = bytes(1 if i == 32 else 2 if i == 10 else 0 for i in range(256))  # space 1, newline 2


def span_hash_plain(data: bytes) -> int:
    """The fingerprint of a span of normalized text, by definition."""
    h, p = 0, 1
    for b in data:
        h = (h + (b + 1) * p) & _MASK64
        p = (p * _P) & _MASK64
    return h or 1


def mix64_plain(x: int) -> int:
    """A fingerprint mixed: its high half folded into its low half, times an
    odd constant. Anchors read its top bits; window fingerprints sum it."""
    return ((x ^ (x >> 32)) * _MIX) & _MASK64


def is_anchor_plain(h: int) -> bool:
    """Whether a shingle with fingerprint h is an anchor (a window may start at it)."""
    return (mix64_plain(h) >> 40) % ANCHOR_EVERY == 0


def mix64(a: np.ndarray) -> np.ndarray:
    """mix64_plain of every element (a new array)."""
    x = a >> np.uint64(32)
    x ^= a
    x *= np.uint64(_MIX)
    return x


def window_cuts(n: int, anchors: Iterable[int]) -> list[int]:
    """Where a span of n words is cut into windows, given the (ascending)
    words where an anchor shingle starts: before an anchor at least
    WINDOW_MIN words after the last cut and before the end; WINDOW_MAX words
    after the last cut when no anchor comes in time."""
    cuts: list[int] = []
    last = 0
    for a in [*anchors, n]:
        while a - last > WINDOW_MAX and n - (last + WINDOW_MAX) >= WINDOW_MIN:
            last += WINDOW_MAX
            cuts.append(last)
        if a < n and a - last >= WINDOW_MIN and n - a >= WINDOW_MIN:
            cuts.append(a)
            last = a
    return cuts


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P**j and P**-j mod 2**64 for j < n (grown by doubling, kept)."""
    pw, ipw = _POWERS
    while pw.size < n:
        k = pw.size
        pw = np.concatenate([pw, pw * np.uint64(pow(_P, k, 1 << 64))])
        ipw = np.concatenate([ipw, ipw * np.uint64(pow(_P_INV, k, 1 << 64))])
        _POWERS[:] = [pw, ipw]
    return pw, ipw


def _span_hashes(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """span_hash_plain(data[starts[i]:ends[i]]) for every i."""
    b = np.frombuffer(data, np.uint8)
    pw, ipw = _powers(b.size + 1)
    prefix = np.empty(b.size + 1, np.uint64)
    prefix[0] = 0
    ((b + _ONE) * pw[:b.size]).cumsum(out=prefix[1:])
    h = prefix[ends]
    h -= prefix[starts]
    h *= ipw[starts]
    return np.maximum(h, _ONE, out=h)  # never 0: 0 marks an empty slot in the store


@dataclass
class Lines:
    """Units as canonical lines: word k is data[bounds[k] + 1:bounds[k + 1]]."""
    data: bytes
    bounds: np.ndarray
    first: np.ndarray      # the first word of each line
    size: np.ndarray       # words per line
    unit: np.ndarray       # the unit (index into the units given) of each line
    units_kept: Sequence[str]  # the units with a word, canonical

    def word_at(self, pos: np.ndarray) -> np.ndarray:
        """The word that byte positions fall in (or the one before a separator)."""
        return self.bounds.searchsorted(pos, "left") - 1

    @cached_property
    def decoded(self) -> tuple[str, np.ndarray | None]:
        """The lines' text, and the byte offset of each character (None:
        ASCII, the same); decoded once for all the echo checks of a round."""
        text = self.data.decode()
        if len(text) == len(self.data):
            return text, None
        b = np.frombuffer(self.data, np.uint8)
        return text, np.append(((b & 0xC0) != 0x80).nonzero()[0], b.size)


@dataclass
class Windows:
    """The windows of some units and their shingles."""
    hashes: np.ndarray      # one fingerprint per window (0: no judged shingle)
    unit: np.ndarray        # the unit (index into the units given) of each window
    shingles: np.ndarray    # the windows' judged shingle fingerprints, window after window
    counts: np.ndarray      # judged shingles per window
    extra: np.ndarray       # the shingles not judged (remembered all the same)
    line: np.ndarray | None = None  # the line of each judged shingle (lines numbered across the units)


# What str.split() splits on, beyond the space and the newline.
_OTHER_ASCII_SPACE = tuple(c for c in map(chr, range(128)) if c.isspace() and c not in " \n")
_NON_ASCII_SPACE = tuple(c for c in map(chr, range(128, 0x10000)) if c.isspace())
_NOT_CANONICAL = ("  ", " \n", "\n ", "\n\n")


def _canonical_unit(u: str) -> str:
    ext = accel.ext
    if ext is not None:     # the same text, in one pass of the extension
        try:
            return ext.canonical_unit(u)
        except UnicodeEncodeError:   # a lone surrogate has no UTF-8
            pass
    return _canonical_unit_plain(u)


def _canonical_unit_plain(u: str) -> str:
    """A unit's canonical lines, by definition."""
    return "\n".join(filter(None, (" ".join(line.split()) for line in u.split("\n"))))


def canonical(units: Sequence[str]) -> Lines | None:
    """The units' canonical lines joined by newlines, as UTF-8 (None: no
    word at all). Most units are canonical already; only the others are
    split and joined."""
    joined = "\n".join(units)
    if not joined:
        return None
    checks = [c for c in _OTHER_ASCII_SPACE if c in joined]   # what, found in a unit, means it is not
    if not joined.isascii():
        checks += [c for c in _NON_ASCII_SPACE if c in joined]
    if not checks:
        data = joined.encode()
        kinds = np.frombuffer(data.translate(_SEPARATORS), np.uint8)
        seps = kinds.nonzero()[0]
        # Two separators in a row, or one at an edge: an empty word, so an
        # empty unit or line, or spaces to collapse.
        if not seps.size or seps[0] and seps[-1] != len(data) - 1 and not (seps[1:] - seps[:-1] == 1).any():
            return _lines(data, kinds, seps, np.arange(len(units)), units)
    need = [not u or u[0] in " \n" or u[-1] in " \n" for u in units]
    for c in checks + list(_NOT_CANONICAL):
        need = [n or c in u for n, u in zip(need, units)]
    canon = [_canonical_unit(u) if n else u for n, u in zip(need, units)]
    kept = [i for i, c in enumerate(canon) if c]
    if not kept:
        return None
    if len(kept) < len(canon):
        canon = [canon[i] for i in kept]
    data = "\n".join(canon).encode()
    kinds = np.frombuffer(data.translate(_SEPARATORS), np.uint8)
    return _lines(data, kinds, kinds.nonzero()[0], np.array(kept, np.intp), canon)


def _lines(data: bytes, kinds: np.ndarray, seps: np.ndarray, index: np.ndarray, canon: Sequence[str]) -> Lines:
    per_unit = np.fromiter((u.count("\n") for u in canon), np.intp, len(canon))
    per_unit += 1
    nw = seps.size + 1
    bounds = np.empty(nw + 1, np.intp)                 # word k is data[bounds[k] + 1:bounds[k + 1]]
    bounds[0] = -1
    bounds[1:-1] = seps
    bounds[-1] = len(data)
    first = (kinds[seps] == 2).nonzero()[0]            # a line starts after each newline
    first += 1
    first = np.concatenate((_ZERO, first))
    size = np.empty_like(first)
    np.subtract(first[1:], first[:-1], out=size[:-1])
    size[-1] = nw - first[-1]
    return Lines(data, bounds, first, size, index.repeat(per_unit), canon)


Exclude = Callable[[Lines], "np.ndarray | None"]   # the words not to judge, as flags (None: every word is judged)


@shared(key=lambda units, width: (width, tuple(units)), size=lambda units, width: sum(map(len, units)),
        keep=frozen)
def _shingled(units: Sequence[str], width: int) -> tuple | None:
    """The units' canonical lines and their `width`-word shingles: what every
    config of that width shares, whatever its windows (`windows_of`)."""
    ext = accel.ext
    if ext is None:
        return _shingled_plain(units, width)
    got = ext.shingled(units if isinstance(units, list) else list(units), width)
    if got is None:
        return None
    data, bounds, first, size, unit, kept, *shingles = got
    return (Lines(data, bounds, first, size, unit, _Decoded(data, kept)), *shingles)


class _Decoded(Sequence[str]):
    """The kept units as text, decoded from the lines' bytes only when read:
    windows_of reads only how many there are."""
    __slots__ = ("data", "spans")

    def __init__(self, data: bytes, spans: list[tuple[int, int, int]]):
        self.data, self.spans = data, spans   # spans: (unit, start, end) byte ranges

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        _, a, b = self.spans[i]
        return self.data[a:b].decode()


def _shingled_plain(units: Sequence[str], width: int) -> tuple | None:
    """_shingled with numpy, by definition: (lines, shingles per line, each line's
    first shingle, each shingle's first and last word and line, its span hash, mixed)."""
    text = canonical(units)
    if text is None:
        return None
    bounds, first, size = text.bounds, text.first, text.size
    k = width - 1
    counts = size - k                                  # shingles per line
    if counts.min() >= 1:
        offsets = counts.cumsum()
        offsets -= counts
        sh_first = np.arange(int(offsets[-1] + counts[-1])) + (first - offsets).repeat(counts)
        sh_last = sh_first + k
    else:                                              # a short line is one shingle
        np.maximum(counts, 1, out=counts)
        offsets = counts.cumsum()
        offsets -= counts
        sh_first = np.arange(int(offsets[-1] + counts[-1])) + (first - offsets).repeat(counts)
        sh_last = np.minimum(sh_first + k, (first + size - 1).repeat(counts))
    sh_line = np.arange(counts.size).repeat(counts)
    starts = bounds[sh_first]
    starts += 1
    h = _span_hashes(text.data, starts, bounds[sh_last + 1])
    return text, counts, offsets, sh_first, sh_last, sh_line, h, mix64(h)


def windows_of(units: Sequence[str], width: int = SHINGLE_WORDS, per_line: bool = False,
               exclude: Exclude | None = None) -> Windows | None:
    """The windows of units (see the module's docstring) and their shingles."""
    shingled = _shingled(units, width)
    if shingled is None:
        return None
    text, counts, offsets, sh_first, sh_last, sh_line, h, mixed = shingled

    # Spans: lines, or the lines of a unit together; windows: spans, the
    # long ones cut at their anchors. win_open: each window's first shingle.
    ext = accel.ext
    if ext is not None:                                # the same windows, in one call of the extension
        win_unit, win_counts, win_open, fps = ext.windows(text.first, text.size, text.unit, counts, offsets, sh_first,
                                                          mixed, per_line)
    else:
        win_unit, win_counts, win_open = _spans_cut(text, counts, offsets, sh_first, mixed, per_line)
        fps = np.add.reduceat(mixed, win_open)
        np.maximum(fps, _ONE, out=fps)

    judged = None
    if exclude is not None:
        flags = exclude(text)
        if flags is not None and flags.any():
            seen = np.concatenate((_ZERO, flags.cumsum()))
            judged = seen[sh_last + 1] == seen[sh_first]
    if judged is None:
        return Windows(fps, win_unit, h, win_counts, _NONE, sh_line)
    if not mixed.flags.writeable:                      # shared with other configs (_fast/memo.py): not ours to change
        mixed = mixed.copy()
    mixed[~judged] = 0
    fps = np.add.reduceat(mixed, win_open)
    judged_counts = np.add.reduceat(judged.astype(np.intp), win_open)
    fps = np.where(judged_counts > 0, np.maximum(fps, _ONE), np.uint64(0))
    return Windows(fps, win_unit, h[judged], judged_counts, h[~judged], sh_line[judged])


def _spans_cut(text: Lines, counts, offsets, sh_first, mixed, per_line: bool):
    """The windows (win_unit, win_counts, win_open) of the spans: lines, or the lines of a unit
    together; the long ones cut at their anchors (win_open: each window's first shingle)."""
    bounds, first, size = text.bounds, text.first, text.size
    if per_line or text.unit.size == len(text.units_kept):
        span_first, span_size, win_unit, win_counts, win_open = first, size, text.unit, counts, offsets
    else:
        opens = np.empty(text.unit.size, bool)
        opens[0] = True
        np.not_equal(text.unit[1:], text.unit[:-1], out=opens[1:])
        at = opens.nonzero()[0]
        span_first, win_unit, win_open = first[at], text.unit[at], offsets[at]
        span_size, win_counts = np.add.reduceat(size, at), np.add.reduceat(counts, at)
    if bounds.size - 1 > 2 * WINDOW_MIN:               # there may be a long span
        long = (span_size > 2 * WINDOW_MIN).nonzero()[0]
        if long.size:
            win_unit, win_counts, win_open = _cut(long, span_first, span_size, win_unit, win_counts, win_open,
                                                  sh_first, mixed)
    return win_unit, win_counts, win_open


def _cut(long: np.ndarray, span_first, span_size, win_unit, win_counts, win_open, sh_first, mixed):
    """The windows of spans, the long ones (indices `long`) cut by window_cuts at their anchors."""
    pieces = np.ones(span_size.size, np.intp)
    cut_counts = []
    for s in long.tolist():
        lo, hi = int(win_open[s]), int(win_open[s] + win_counts[s])
        rel = sh_first[lo:hi] - span_first[s]
        anchors = rel[(mixed[lo:hi] >> np.uint64(40)) % np.uint64(ANCHOR_EVERY) == 0].tolist()  # is_anchor_plain
        cuts = window_cuts(int(span_size[s]), anchors)
        if cuts:
            pieces[s] = len(cuts) + 1
            cut_counts.append((s, np.diff(rel.searchsorted(np.array([0, *cuts, int(span_size[s])]), "left"))))
    if not cut_counts:
        return win_unit, win_counts, win_open
    base = pieces.cumsum() - pieces
    counts = win_counts.repeat(pieces)
    for s, pc in cut_counts:
        counts[base[s]:base[s] + pc.size] = pc
    opens = counts.cumsum()
    opens -= counts
    return win_unit.repeat(pieces), counts, opens


def shingles(words: Sequence[str], width: int = SHINGLE_WORDS) -> set[int]:
    """64-bit fingerprints of the `width`-word shingles of one line; a
    shorter line is one shingle. (Words are whitespace-free tokens, as
    str.split() gives them.)"""
    if not words:
        return set()
    data = " ".join(words).encode()
    lens = np.fromiter((len(w.encode()) for w in words), np.intp, len(words))
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    k = width - 1
    if len(words) <= k:
        s, e = starts[:1], ends[-1:]
    else:
        s, e = starts[:-k], ends[k:]
    return set(_span_hashes(data, s, e).tolist())


def unique(a: np.ndarray) -> np.ndarray:
    if a.size < 2:
        return a
    a = np.sort(a)
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


class FingerprintSet(AbstractSet):
    """A judged result's distinct fingerprints: a read-only set of ints over a
    sorted numpy array, so that a round's union is taken without Python sets.
    It remembers what the store held of them when judged (`in_young`,
    `known`, valid while the store's `version` is `version`), and carries
    what else the commit remembers (`extra`, `sketch`, `templates`), and the
    result's normalized units (`normed`)."""
    __slots__ = ("array", "_list", "in_young", "known", "version", "extra", "sketch", "templates", "normed")

    def __init__(self, values: Iterable[int] | np.ndarray = (), in_young: np.ndarray | None = None,
                 known: np.ndarray | None = None, version: int = -1):
        if isinstance(values, np.ndarray):  # sorted, distinct, nonzero: from the tracker
            self.array = values
        else:
            self.array = as_fingerprints(values)
        self._list = None
        self.in_young, self.known, self.version = in_young, known, version
        self.extra = _NONE       # fingerprints to remember that were not judged (echoes)
        self.sketch = None       # the result's near-duplicate sketch, when the rule keeps them
        self.templates = ()      # the readings of its echo-bearing lines (echo.template_lines)
        self.normed = ()         # the result's evidence units as the tracker normalized them

    def __len__(self) -> int:
        return self.array.size

    def __iter__(self) -> Iterator[int]:
        return iter(self.as_list())

    def __contains__(self, h) -> bool:
        if not isinstance(h, int) or not 0 <= h < 1 << 64:
            return False
        i = int(np.searchsorted(self.array, np.uint64(h)))
        return i < self.array.size and int(self.array[i]) == h

    def as_list(self) -> list[int]:
        if self._list is None:
            self._list = self.array.tolist()
        return self._list

    def __repr__(self) -> str:
        return f"FingerprintSet({len(self)} fingerprints)"


def as_fingerprints(hs: Iterable[int] | np.ndarray) -> np.ndarray:
    """Distinct fingerprints as a sorted uint64 array (ints taken mod 2**64, 0 read as 1)."""
    if isinstance(hs, FingerprintSet):
        return hs.array
    if isinstance(hs, np.ndarray):
        a = hs.astype(np.uint64, copy=False)
    else:
        a = np.array([h & 0xFFFF_FFFF_FFFF_FFFF for h in hs], np.uint64)
    return unique(np.maximum(a, _ONE))


