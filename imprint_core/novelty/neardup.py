"""Near-duplicate results: a whole result that is a near-copy of an earlier
one (a screenshot read by OCR again, a page fetched with a changed line).

A result's text is its normalized units' words joined by single spaces, as
UTF-8. Its *grams* are its GRAM-byte runs (a shorter text is padded with NUL
bytes to one gram); a
gram's hash is mix64 of its bytes read as a little-endian integer plus one
(distinct grams, distinct hashes).
Its sketch (one-permutation MinHash) keeps, in each of BINS bins chosen by a
hash's top bits, the smallest hash that falls there (EMPTY where none);
its size is its number of distinct grams.

- Jaccard: of the bins either sketch fills, the share both fill alike.
- Containment (how much of the new result the earlier one holds):
  J * (|A| + |B|) / ((1 + J) * |A|), at most 1.

A result whose best match among the remembered sketches reaches the
threshold makes nothing new. Sketches are remembered in two generations of
CAPACITY // 2 results each: bounded however long the run.
"""
from __future__ import annotations

import numpy as np

from .fingerprints import mix64

GRAM = 4
BINS = 128
CAPACITY = 4_096
EMPTY = np.uint64(2**64 - 1)
_SHIFT = np.uint64(64 - 7)
assert BINS == 1 << 7


def sketch(data: bytes) -> tuple[np.ndarray, int] | None:
    """The sketch and size of a text (None: no text)."""
    if not data:
        return None
    if len(data) < GRAM:
        data = data.ljust(GRAM, b"\0")
    b = np.frombuffer(data, np.uint8).astype(np.uint64)
    n = b.size - GRAM + 1
    v = b[:n].copy()
    for i in range(1, GRAM):
        v |= b[i:i + n] << np.uint64(8 * i)
    v += np.uint64(1)
    # Sorted, not deduplicated: the first hash of a bin is still its smallest,
    # and the distinct count is one plus the changes between neighbours. An
    # in-place sort costs a third of np.unique's hash-then-sort (bench_rules).
    h = mix64(v)
    h.sort()
    size = int(np.count_nonzero(h[1:] != h[:-1])) + 1
    bins = (h >> _SHIFT).astype(np.intp)
    first = np.empty(h.size, bool)
    first[0] = True
    np.not_equal(bins[1:], bins[:-1], out=first[1:])   # sorted: the first of a bin is its smallest
    out = np.full(BINS, EMPTY, np.uint64)
    out[bins[first]] = h[first]
    return out, size


def similarity(a: np.ndarray, a_size: int, b: np.ndarray, b_sizes: np.ndarray, measure: str) -> np.ndarray:
    """Similarity of sketch a to each row of b: "jaccard" or "containment" (of a in b)."""
    a_full = a != EMPTY
    either = (b != EMPTY) | a_full
    same = (b == a) & a_full
    j = same.sum(axis=1) / np.maximum(either.sum(axis=1), 1)
    if measure == "jaccard":
        return j
    return np.minimum(j * (a_size + b_sizes) / ((1 + j) * a_size), 1.0)


class SketchStore:
    """Remembered sketches: two generations of CAPACITY // 2 each."""

    def __init__(self, capacity: int = CAPACITY):
        self.half = capacity // 2
        self._young: list[tuple[np.ndarray, int]] = []
        self._old: list[tuple[np.ndarray, int]] = []
        self._stacked: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def best(self, sk: np.ndarray, size: int, measure: str) -> float:
        """The highest similarity of a sketch to any remembered one (0 if none)."""
        if not len(self):
            return 0.0
        if self._stacked is None:
            held = self._old + self._young
            self._stacked = np.stack([s for s, _ in held]), np.array([n for _, n in held], float)
        rows, sizes = self._stacked
        return float(similarity(sk, size, rows, sizes, measure).max())

    def add(self, sketches: list[tuple[np.ndarray, int]]) -> None:
        if not sketches:
            return
        self._young += sketches
        self._stacked = None
        if len(self._young) >= self.half:
            self._old, self._young = self._young, []
