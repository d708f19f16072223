"""Fingerprints: the windows and shingles a paragraph is judged by, hashed.

A unit's words (as str.split() gives them) are judged in windows of
WINDOW_WORDS words; a window's shingles are its SHINGLE_WORDS-word runs, or
the whole window if shorter. A fingerprint is a 64-bit hash of the UTF-8
bytes of a span of normalized text: one shingle (five words joined by single
spaces) or one window. All the spans of a round are hashed at once: a
polynomial hash mod 2**64 from prefix sums, sum((b[j] + 1) * P**j), shifted
to the span's start by the inverse power of P. Deterministic across processes
and machines (no str hash()), never 0 (0 marks an empty slot in the store).
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np

SHINGLE_WORDS = 5
WINDOW_WORDS = 200  # long paragraphs are judged in windows of this many words

_P = 0x9E3779B97F4A7C15                     # odd, so invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_POWERS = [np.ones(1, np.uint64), np.ones(1, np.uint64)]
_ONE = np.uint64(1)
_ZERO = np.zeros(1, np.intp)
_SEPARATORS = bytes(1 if i == 32 else 2 if i == 10 else 0 for i in range(256))  # space 1, newline 2


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
    """Fingerprints of data[starts[i]:ends[i]] for every i."""
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
class Windows:
    """The windows (judged paragraphs) of some units and their shingles."""
    hashes: np.ndarray      # one fingerprint per window
    unit: np.ndarray        # the unit (index into the units given) of each window
    shingles: np.ndarray    # the windows' shingle fingerprints, window after window
    counts: np.ndarray      # shingles per window


# What str.split() splits on, beyond the space and the newline.
_OTHER_ASCII_SPACE = tuple(c for c in map(chr, range(128)) if c.isspace() and c not in " \n")
_NON_ASCII_SPACE = tuple(c for c in map(chr, range(128, 0x10000)) if c.isspace())


def canonical(units: Sequence[str]) -> tuple[bytes, np.ndarray] | None:
    """The units' words joined by single spaces, units joined by newlines
    (empty ones left out), as UTF-8; and the index of each unit kept. Most
    units are canonical already; only the others are split and joined."""
    joined = "\n".join(units)
    if not joined:
        return None
    checks = [c for c in _OTHER_ASCII_SPACE if c in joined]   # what, found in a unit, means it is not
    if joined.count("\n") != len(units) - 1:
        checks.append("\n")
    if "  " in joined:
        checks.append("  ")
    if not joined.isascii():
        checks += [c for c in _NON_ASCII_SPACE if c in joined]
    # An empty or space-edged unit, looked at unit by unit: cheaper than
    # searching the joined text for " \n", "\n " and "\n\n".
    need = [not u or u[0] == " " or u[-1] == " " for u in units]
    if not checks and not any(need):
        return joined.encode(), np.arange(len(units))
    for c in checks:
        need = [n or c in u for n, u in zip(need, units)]
    canon = [" ".join(u.split()) if n else u for n, u in zip(need, units)]
    kept = list(filter(None, canon))
    if not kept:
        return None
    index = np.arange(len(canon)) if len(kept) == len(canon) else \
        np.flatnonzero(np.fromiter(map(bool, canon), bool, len(canon)))
    return "\n".join(kept).encode(), index


def windows_of(units: Sequence[str]) -> Windows | None:
    """Windows of WINDOW_WORDS words over each unit's whitespace-split words;
    a window's shingles are its 5-word runs, or the whole window if shorter."""
    canon = canonical(units)
    if canon is None:
        return None
    data, unit_of = canon
    kinds = np.frombuffer(data.translate(_SEPARATORS), np.uint8)
    seps = kinds.nonzero()[0]
    nw = seps.size + 1
    bounds = np.empty(nw + 1, np.intp)                 # word k is data[bounds[k] + 1:bounds[k + 1]]
    bounds[0] = -1
    bounds[1:-1] = seps
    bounds[-1] = len(data)
    first = (kinds[seps] == 2).nonzero()[0]            # a unit starts after each newline
    first += 1
    first = np.concatenate((_ZERO, first))
    size = np.empty_like(first)
    np.subtract(first[1:], first[:-1], out=size[:-1])
    size[-1] = nw - first[-1]
    if size.max() > WINDOW_WORDS:                      # long units: windows of WINDOW_WORDS
        per_unit = (size + (WINDOW_WORDS - 1)) // WINDOW_WORDS
        which = np.repeat(np.arange(first.size), per_unit)
        k = np.arange(which.size) - np.repeat(np.cumsum(per_unit) - per_unit, per_unit)
        first = first[which] + k * WINDOW_WORDS
        size = np.minimum(size[which] - k * WINDOW_WORDS, WINDOW_WORDS)
        unit_of = unit_of[which]
    last = first + size
    last -= 1
    k = SHINGLE_WORDS - 1
    counts = size - k
    if counts.min() >= 1:
        sh_first = np.arange(nw - k * first.size) + (first - (counts.cumsum() - counts)).repeat(counts)
        sh_last = sh_first + k
    else:                                              # a short window is one shingle
        np.maximum(counts, 1, out=counts)
        offsets = counts.cumsum() - counts
        sh_first = np.arange(int(offsets[-1] + counts[-1])) + (first - offsets).repeat(counts)
        sh_last = np.minimum(sh_first + k, last.repeat(counts))
    starts = bounds[np.concatenate((first, sh_first))]
    starts += 1
    ends = bounds[np.concatenate((last, sh_last)) + 1]
    h = _span_hashes(data, starts, ends)
    return Windows(hashes=h[:first.size], unit=unit_of, shingles=h[first.size:], counts=counts)


def shingles(words: Sequence[str]) -> set[int]:
    """64-bit fingerprints of the 5-word shingles; a shorter text is one shingle.
    (Words are whitespace-free tokens, as str.split() gives them.)"""
    if not words:
        return set()
    data = " ".join(words).encode()
    lens = np.fromiter((len(w.encode()) for w in words), np.intp, len(words))
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    k = SHINGLE_WORDS - 1
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
    `known`, valid while the store's `version` is `version`)."""
    __slots__ = ("array", "_list", "in_young", "known", "version")

    def __init__(self, values: Iterable[int] | np.ndarray = (), in_young: np.ndarray | None = None,
                 known: np.ndarray | None = None, version: int = -1):
        if isinstance(values, np.ndarray):  # sorted, distinct, nonzero: from the tracker
            self.array = values
        else:
            self.array = as_fingerprints(values)
        self._list = None
        self.in_young, self.known, self.version = in_young, known, version

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


