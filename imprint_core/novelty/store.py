"""Stores: what the tracker remembers, bounded however long the run.

Both keep two generations: when the young one holds half the capacity it
becomes the old one and the previous old one is dropped, so memory stays flat
and a cycle (A B A B, A B C A B C) stays visible as long as it fits.
BoundedHashSet is that rule over Python sets (paragraph and error hashes, a
few per result); FingerprintStore is the same rule over numpy hash tables
(_Table) for the shingles, looked up a whole round's array at a time.
tests/core/novelty/test_novelty_speed_invariants.py checks that the two agree.
"""
from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Iterable

import numpy as np

from ._fast import accel
from .fingerprints import FingerprintSet, as_fingerprints, unique


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

    def flags(self, hs: list[int]) -> np.ndarray:
        """Whether each of hs is held, as bools (the sets asked in C, not a Python call per hash)."""
        got = np.fromiter(map(self._young.__contains__, hs), bool, len(hs))
        if self._old:
            got |= np.fromiter(map(self._old.__contains__, hs), bool, len(hs))
        return got

    def count_known(self, hs: set[int]) -> int:
        known = hs & self._young
        if self._old:
            known |= (hs - known) & self._old
        return len(known)

    def add_all(self, hs: Iterable[int]) -> None:
        self._young.update(hs)
        if len(self._young) >= self.capacity // 2:
            self._old, self._young = self._young, set()


_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)


class _Table:
    """One generation of fingerprints: a hash table of 8-slot buckets (one
    64-byte cache line each) in a numpy array, 0 meaning empty, and a small
    sorted array of the keys that found their bucket full. Lookups and inserts
    take whole arrays of fingerprints at once.

    Overflow goes to that array rather than into the next bucket so that a
    lookup is a fixed handful of numpy calls (a searchsorted for the keys of
    full buckets) instead of a loop walking the chains of full buckets: at
    this load a few percent of buckets are full, so nearly every round had a
    key to chase."""
    SLOTS = 8
    MAX_LOAD = 0.5          # sized for this many keys per slot
    GROW_LOAD = 0.75        # grown (rehashed) past this many

    def __init__(self, expected: int):
        bits = 1
        while (1 << bits) * self.SLOTS * self.MAX_LOAD < max(expected, 8):
            bits += 1
        self.keys = np.zeros((1 << bits, self.SLOTS), np.uint64)
        self.flat = self.keys.reshape(-1)              # the same memory, slot by slot
        self.fill = np.zeros(1 << bits, np.intp)       # used slots per bucket
        self.overflow = np.empty(0, np.uint64)         # sorted: keys whose bucket was full
        self.shift = np.uint64(64 - bits)
        self.count = 0

    def _bucket(self, q: np.ndarray) -> np.ndarray:
        return ((q * _FIBONACCI) >> self.shift).astype(np.intp)

    def contains(self, q: np.ndarray) -> np.ndarray:
        """Which of the nonzero fingerprints q are held."""
        rows = self.keys.take(self._bucket(q), axis=0)
        found = (rows == q[:, None]).view(np.uint64).ravel() != 0  # any() of each row of 8 bools
        over = self.overflow
        if over.size:
            go = (rows[:, -1] != 0).nonzero()[0]      # only a full bucket's keys can be in overflow
            if go.size:
                qg = q[go]
                i = over.searchsorted(qg)
                np.minimum(i, over.size - 1, out=i)
                found[go] |= over[i] == qg
        return found

    def insert(self, q: np.ndarray) -> None:
        """Add fingerprints, distinct and not yet held."""
        if not q.size:
            return
        if self.count + q.size > self.keys.size * self.GROW_LOAD:
            self._grow(self.count + q.size)
        self.count += q.size
        ext = accel.ext
        if ext is not None:                     # the same keys held, placed by the extension in one pass
            full = ext.insert(self.keys, self.fill, q)
            if full.size:
                self.overflow = np.sort(np.concatenate((self.overflow, full)))
            return
        b = self._bucket(q)
        flat, fill = self.flat, self.fill
        while q.size:
            slot = fill[b]
            room = slot < self.SLOTS
            if not room.all():
                self.overflow = np.sort(np.concatenate((self.overflow, q[~room])))
                q, b, slot = q[room], b[room], slot[room]
            cell = b * self.SLOTS + slot
            flat[cell] = q                      # of keys sharing a cell, one lands
            landed = flat[cell] == q
            fill[b[landed]] += 1                # (so no bucket twice here)
            q, b = q[~landed], b[~landed]

    def _grow(self, expected: int) -> None:
        held = np.concatenate((self.flat[self.flat != 0], self.overflow))
        self.__init__(2 * expected)
        self.insert(held)

    def clear(self) -> None:
        self.flat.fill(0)
        self.fill.fill(0)
        self.overflow = self.overflow[:0]
        self.count = 0


class FingerprintStore:
    """BoundedHashSet's rule (two generations; when the young one holds
    capacity // 2 it becomes the old one and the old one is dropped) over two
    numpy hash tables of the tracker's 64-bit fingerprints: whole arrays are
    looked up at once, and the memory is a few flat arrays of fixed size."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._young = _Table(capacity // 2)
        self._old = _Table(capacity // 2)
        self._slots = self._young.keys.size
        self.version = 0  # changes whenever the content may have

    def __len__(self) -> int:
        return self._young.count + self._old.count

    def __contains__(self, h: int) -> bool:
        return bool(self.lookup(as_fingerprints([h]))[1].any())

    def tables(self) -> tuple:
        """The two generations' arrays, as the extension reads them (compiled.lookup, tally)."""
        y, o = self._young, self._old
        return y.keys, y.overflow, int(y.shift), o.keys, o.overflow, int(o.shift), o.count

    def lookup(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For nonzero fingerprints q: which the young generation holds, and
        which either generation holds."""
        ext = accel.ext
        if ext is not None and q.size:
            return ext.lookup(np.ascontiguousarray(q, np.uint64), self.tables())
        in_young = self._young.contains(q)
        known = in_young
        if self._old.count:
            rest = (~in_young).nonzero()[0]
            if rest.size:
                known = in_young.copy()
                known[rest] = self._old.contains(q[rest])
        return in_young, known

    def count_known(self, hs: Iterable[int] | np.ndarray) -> int:
        q = as_fingerprints(hs)
        return int(np.count_nonzero(self.lookup(q)[1])) if q.size else 0

    def add_all(self, hs: Iterable[int] | np.ndarray) -> None:
        q = as_fingerprints(hs)
        self.add_new(q[~self._young.contains(q)] if q.size else q)

    def add_new(self, q: np.ndarray) -> None:
        """Add distinct fingerprints that the young generation does not hold."""
        self.version += 1
        self._young.insert(q)
        if self._young.count >= self.capacity // 2:
            self._old, self._young = self._young, self._old
            if self._young.keys.size > self._slots:
                self._young = _Table(self.capacity // 2)  # a big round once made it grow: back to size
            else:
                self._young.clear()


def round_union(sets: list[AbstractSet[int]],
                store: FingerprintStore) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The round's distinct shingles, and which of them the store holds (as
    judged, when the store has not changed since), and the store's version."""
    version = store.version
    if sets and all(isinstance(s, FingerprintSet) and s.version == version for s in sets):
        if len(sets) == 1:
            return sets[0].array, sets[0].in_young, sets[0].known, version
        values = np.concatenate([s.array for s in sets])
        order = np.argsort(values, kind="stable")
        s = values[order]
        first = np.empty(s.size, bool)
        first[0] = True
        np.not_equal(s[1:], s[:-1], out=first[1:])
        pick = order[first]
        return values[pick], np.concatenate([s.in_young for s in sets])[pick], \
            np.concatenate([s.known for s in sets])[pick], version
    union = unique(np.concatenate([as_fingerprints(s) for s in sets])) if sets else np.empty(0, np.uint64)
    return (union, *store.lookup(union), version)
