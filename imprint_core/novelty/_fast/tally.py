"""A round counted in bulk, for rule.NoveltyTracker: the same numbers as
counting window by window with Python sets.

Quarantined speed-up. What is counted (rule.py states the rule): for each
window not seen before, how many of its distinct shingles the store holds
(it is new below `threshold` times its distinct shingles); for each result,
how many distinct shingles of its unseen windows the store does not hold,
and the rest of what its verdict counts (Tally.results), so that a round's
verdicts are filled from one call.
Here a stable sort brings equal fingerprints together with their windows
(and so their results) still in order, every distinct fingerprint of the
round is looked up once, and bincounts do the per-window and per-result sums.
tests/core/novelty/test_novelty_speed_invariants.py checks it against a plain tracker.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Protocol

import numpy as np

from . import accel

Lookup = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray]"]


class Store(Protocol):
    """What the tally reads of store.FingerprintStore (named here, not imported: the speed-ups
    sit below the definitions they serve)."""
    def lookup(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def tables(self) -> tuple: ...


class Tally(NamedTuple):
    shingles: np.ndarray     # the round's distinct shingles (of unseen windows only), sorted
    in_young: np.ndarray     # ... which the store's young generation holds
    known: np.ndarray        # ... which the store holds
    new: np.ndarray          # per window: new by containment (seen windows not yet excluded)
    sizes: np.ndarray        # per window: its distinct shingles (0 for a seen window)
    # Per result, what its rule.EvidenceVerdict counts: (paragraphs: its windows; shingles: their judged
    # shingles, window by window; new_paragraphs: its windows not seen and new; new_shingles: the distinct
    # shingles of its unseen windows that the store does not hold; largest_new: its largest new window's size).
    results: list[tuple[int, int, int, int, int]]


def tally_round(shingles: np.ndarray, counts: np.ndarray, seen: np.ndarray, owner: np.ndarray, n_results: int,
                lookup: Lookup, threshold: float, lines: np.ndarray | None = None, width: int = 5) -> Tally:
    """shingles: every window's shingle fingerprints, window after window
    (counts per window); seen: the windows exactly seen before (they add
    nothing); owner: the result of each window; lookup: the store's;
    lines: the line of each shingle, for new passages (rule.py)."""
    n, nv = counts.size, n_results
    sh, all_counts = shingles, counts
    if seen.any():
        keep = (~seen).repeat(counts)
        sh = sh[keep]
        lines = lines[keep] if lines is not None else None
        counts = np.where(seen, 0, counts)
    order = sh.argsort(kind="stable")
    s = sh[order]
    repeated = s[1:] == s[:-1]
    if not repeated.any():                           # every shingle once: counts are as built
        distinct = s
        in_young, known = lookup(distinct)
        if not known.any():
            new = counts > 0
            known_per_result = 0
        else:
            known_window = np.arange(n).repeat(counts)[order[known]]
            new = np.bincount(known_window, minlength=n) < threshold * counts
            known_per_result = np.bincount(owner[known_window], minlength=nv)
        new_shingles = (np.bincount(owner, weights=counts, minlength=nv).astype(np.intp)
                        - known_per_result).tolist()
        sizes = counts
        known_at = np.empty(sh.size, bool)          # per shingle, in the windows' order
        known_at[order] = known
    else:
        first = np.empty(s.size, bool)
        first[0] = True
        np.logical_not(repeated, out=first[1:])
        distinct = s[first]
        in_young, known = lookup(distinct)
        known_sorted = known[first.cumsum() - 1]
        w = np.arange(n).repeat(counts)[order]
        first_w = first.copy()
        first_w[1:] |= w[1:] != w[:-1]
        per_window = np.bincount(w[first_w], minlength=n)
        known_per_window = np.bincount(w[first_w & known_sorted], minlength=n)
        new = known_per_window < threshold * per_window
        r = owner[w]
        first_in_result = first                    # (first is not needed any more)
        first_in_result[1:] |= r[1:] != r[:-1]
        new_shingles = np.bincount(r[first_in_result & ~known_sorted], minlength=nv).tolist()
        sizes = per_window
        known_at = np.empty(sh.size, bool)
        known_at[order] = known_sorted
    if lines is not None and sh.size:
        new |= new_passages(~known_at, lines, counts, width)
    return Tally(distinct, in_young, known, new, sizes,
                 per_result(new & ~seen, sizes, all_counts, owner, nv, new_shingles))


def per_result(new: np.ndarray, sizes: np.ndarray, counts: np.ndarray, owner: np.ndarray, n_results: int,
               new_shingles: list[int]) -> list[tuple[int, int, int, int, int]]:
    """Tally.results, from the windows' counts (new: new and not seen)."""
    largest = np.zeros(n_results, np.intp)
    np.maximum.at(largest, owner[new], sizes[new])
    return list(zip(np.bincount(owner, minlength=n_results).tolist(),
                    np.bincount(owner, weights=counts, minlength=n_results).astype(np.intp).tolist(),
                    np.bincount(owner[new], minlength=n_results).tolist(), new_shingles, largest.tolist()))


def tally_store(shingles: np.ndarray, counts: np.ndarray, seen: np.ndarray, owner: np.ndarray, n_results: int,
                store: Store, threshold: float, lines: np.ndarray | None = None, width: int = 5) -> Tally:
    """tally_round against a FingerprintStore: on the compiled path in one
    call of the extension (the same Tally), else tally_round itself."""
    ext = accel.ext
    if ext is None:
        return tally_round(shingles, counts, seen, owner, n_results, store.lookup, threshold, lines, width)
    got = ext.tally(np.ascontiguousarray(shingles, np.uint64), counts, seen, owner, n_results, store.tables(),
                    float(threshold), lines, width)
    return Tally(*got)


def new_passages(unknown: np.ndarray, lines: np.ndarray, counts: np.ndarray, width: int) -> np.ndarray:
    """Per window: whether it holds a new passage (rule.py), given which of
    its shingles, in order, the store does not hold and the line of each."""
    n = counts.size
    win = np.arange(n).repeat(counts)
    m = unknown.size
    cut = np.ones(m, bool)                     # a segment: one line's shingles inside one window
    np.not_equal(lines[1:], lines[:-1], out=cut[1:])
    cut[1:] |= win[1:] != win[:-1]
    seg = cut.cumsum() - 1
    seg_size = np.bincount(seg)
    whole = (np.bincount(seg, weights=unknown) == seg_size) & (seg_size >= 2)
    hit = np.zeros(n, bool)
    hit[win[cut][whole]] = True
    run_start = unknown.copy()                 # runs of unknown shingles inside a segment
    run_start[1:] &= cut[1:] | ~unknown[:-1]
    run = run_start.cumsum() - 1
    at = unknown.nonzero()[0]
    if at.size:
        lengths = np.bincount(run[at])
        long_runs = (lengths >= 2 * width).nonzero()[0]
        if long_runs.size:
            hit[win[run_start.nonzero()[0][long_runs]]] = True
    return hit
