"""How sure a figure is: the statistics behind every rate and comparison the
testbed reports, through `scipy.stats` (no hand-written statistics; the one
exception, the paired bootstrap, draws exactly what `scipy.stats.bootstrap`
draws and gives its numbers, held to it by a test, at a fraction of its cost
when many figures share one draw).

- A rate k/n gets its 95% Wilson score interval (`rate`): it stays inside
  [0, 1] and is honest at 0/n, where the normal approximation says 0 ± 0.
- Two rules on the same runs are compared pairwise, never as two
  independent rates:
  - counts of events (harm, loops caught): the exact McNemar test, a
    two-sided binomial test on the discordant runs (`mcnemar`);
  - shares summed over runs (harm rate, rounds saved): a paired bootstrap
    that resamples *tasks*, so that the runs of one task (tau-bench's
    trials, one SWE-bench instance in several run folders) move together
    (`paired_difference`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 4_000
"""Bootstrap resamples: the percentile bounds move by well under 0.1
percentage point between seeds at this count on the corpora's sizes."""
SEED = 20261206
"""Fixed, so that a regenerated report gives the same intervals."""


@dataclass(frozen=True)
class Rate:
    """k of n, with its Wilson interval (None where n is 0)."""
    k: int
    n: int

    @property
    def share(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return _wilson(self.k, self.n) if self.n else None

    def to_dict(self, name: str) -> dict[str, Any]:
        ci = self.interval
        return {f"{name}_count": self.k, f"{name}_of": self.n, f"{name}_rate": self.share,
                f"{name}_rate_ci95_low": ci[0] if ci else None, f"{name}_rate_ci95_high": ci[1] if ci else None}

    def of(self, what: str) -> str:
        """`3 of 40 useful runs (7.5%; 95% interval 2.6%–19.9%)`: the gate's wording."""
        if not self.n:
            return f"0 of 0 {what}"
        lo, hi = self.interval
        return f"{self.k} of {self.n} {what} ({self.k / self.n:.1%}; 95% interval {lo:.1%}–{hi:.1%})"

    def text(self) -> str:
        """`3/40 (7.5%, 2.6–19.9%)`, or – with no runs."""
        if not self.n:
            return "–"
        lo, hi = self.interval
        return f"{self.k}/{self.n} ({self.k / self.n:.1%}, {lo:.1%}–{hi:.1%})"


@functools.lru_cache(maxsize=4_096)
def _wilson(k: int, n: int) -> tuple[float, float]:
    """k/n's interval, made once: compare asks for the same counts' in many cells, tables and plots."""
    from scipy.stats import binomtest
    ci = binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(ci.low), float(ci.high)


def rate(k: int, n: int) -> Rate:
    if not 0 <= k <= n:
        raise ValueError(f"a rate needs 0 <= k <= n, got {k}/{n}")
    return Rate(int(k), int(n))


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs: `only_a` where the first rule has the event and the
    second not, `only_b` the reverse; `p`: exact two-sided McNemar p-value
    (1.0 with no discordant pair: nothing tells the rules apart)."""
    only_a: int
    only_b: int
    p: float

    def to_dict(self, name: str) -> dict[str, Any]:
        return {f"{name}_only_candidate": self.only_a, f"{name}_only_shipped": self.only_b,
                f"{name}_mcnemar_p": self.p}


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> McNemar:
    """Exact McNemar test of paired binary outcomes `a` and `b`."""
    if len(a) != len(b):
        raise ValueError("paired outcomes need one value of each per pair")
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    only_a, only_b = int((x & ~y).sum()), int((y & ~x).sum())
    if only_a + only_b == 0:
        return McNemar(0, 0, 1.0)
    return McNemar(only_a, only_b, _binomial_p(only_a, only_a + only_b))


@functools.lru_cache(maxsize=4_096)
def _binomial_p(k: int, n: int) -> float:
    """The exact two-sided binomial test's p of k in n at one half, made once: compare's cells share counts."""
    from scipy.stats import binomtest
    return float(binomtest(k, n, 0.5).pvalue)


@dataclass(frozen=True)
class Difference:
    """The paired difference of two shares (first rule minus second) with its
    bootstrap interval; `upper95` is the one-sided 95% upper bound."""
    diff: float | None
    low: float | None
    high: float | None
    upper95: float | None
    tasks: int

    def to_dict(self, name: str) -> dict[str, Any]:
        return {f"{name}_diff": self.diff, f"{name}_diff_ci95_low": self.low, f"{name}_diff_ci95_high": self.high,
                f"{name}_diff_upper95": self.upper95, f"{name}_tasks": self.tasks}


def paired_difference(a: Sequence[float], b: Sequence[float], den: Sequence[float], groups: Sequence[Any], *,
                      resamples: int = RESAMPLES, seed: int = SEED) -> Difference:
    """(Σa − Σb) / Σden over runs, with a bootstrap over `groups` (tasks):
    each resample draws tasks with replacement and takes all their runs.
    Percentile intervals: two-sided 95% (`low`, `high`) and the one-sided
    95% upper bound. Where every task has the same a and b the difference is
    exactly 0 and so is every bound (nothing to resample)."""
    return paired_differences([(a, b, den)], groups, resamples=resamples, seed=seed)[0]


def paired_differences(pairs: Sequence[tuple[Sequence[float], Sequence[float], Sequence[float]]],
                       groups: Sequence[Any], *, resamples: int = RESAMPLES, seed: int = SEED) -> list[Difference]:
    """`paired_difference` of each (a, b, den) over the same runs and
    `groups`, each exactly what it gives alone: every one is resampled with
    the same tasks (one seed draws one index matrix), so the matrix is drawn
    once for all. The draw is scipy.stats.bootstrap's (paired, vectorized,
    percentile: `rng.integers(0, tasks, (resamples, tasks))`), and the
    resampled sums are counts of each task per resample times the tasks'
    sums, which is exact, hence equal to summing the drawn tasks, for
    integer-valued figures such as runs, rounds and tokens (others are
    summed as drawn, as scipy sums them)."""
    keys = list(dict.fromkeys(groups))
    at = {k: i for i, k in enumerate(keys)}
    where = np.fromiter((at[g] for g in groups), dtype=np.intp, count=len(groups))
    rows = [np.asarray(v, dtype=float) for pair in pairs for v in pair]
    if any(len(v) != len(groups) for v in rows):
        raise ValueError("paired values need one of each per run")
    sums = [np.bincount(where, weights=v, minlength=len(keys)) if len(v) else np.zeros(0) for v in rows]
    out: list[Difference | None] = []
    todo: list[tuple[int, float]] = []
    for k in range(len(pairs)):
        sa, sb, sd = sums[3 * k:3 * k + 3]
        total = sd.sum()
        if not len(keys) or total <= 0:
            out.append(Difference(None, None, None, None, len(keys)))
            continue
        diff = float((sa.sum() - sb.sum()) / total)
        if np.array_equal(sa, sb):
            out.append(Difference(diff, diff, diff, diff, len(keys)))
        elif len(keys) < 2:       # one task: nothing to resample, no interval
            out.append(Difference(diff, None, None, None, len(keys)))
        else:
            out.append(None)
            todo.append((k, diff))
    if todo:
        resampled = _resampled_sums([sums[3 * k + j] for k, _ in todo for j in range(3)], len(keys), resamples, seed)
        tail = (1 - CONFIDENCE) * 100
        with np.errstate(invalid="ignore", divide="ignore"):
            dists = (resampled[0::3] - resampled[1::3]) / resampled[2::3]
        # One resampled distribution gives every bound by the percentile method (a resample that drew only
        # tasks without a denominator is undefined: left out). Each bound is an order statistic's, whatever
        # else is asked of the same call: the figures whose every resample is defined are asked at once.
        qs = [tail / 2, 100 - tail / 2, 100 - tail]
        whole = np.isfinite(dists).all(axis=1)
        bounds = np.empty((len(todo), len(qs)))
        if whole.any():
            bounds[whole] = np.percentile(dists[whole], qs, axis=1).T
        for n in np.flatnonzero(~whole):
            bounds[n] = np.percentile(dists[n][np.isfinite(dists[n])], qs)
        for (k, diff), (low, high, upper) in zip(todo, bounds.tolist()):
            out[k] = Difference(diff, low, high, upper, len(keys))
    return out  # type: ignore[return-value]


EXACT = 2.0 ** 53
"""Below this, sums of integer-valued float64 are exact in any order (a resample's sum is at most the
largest |value| times the tasks drawn)."""


def _resampled_sums(vectors: list[np.ndarray], tasks: int, resamples: int, seed: int) -> np.ndarray:
    """Each vector of per-task sums summed over every resample's drawn tasks (a row a vector)."""
    drawn = np.random.default_rng(seed).integers(0, tasks, (resamples, tasks), dtype=np.int64)
    # figures often share a vector (a denominator, the shipped rule's side, nothing saved): each summed once
    # (rows told apart by their bytes: np.unique's row sort cost more than the sums; sums are exact, or each
    # summed alone, in any order of the rows)
    first: dict[bytes, int] = {}
    which = np.array([first.setdefault(np.asarray(v, dtype=float).tobytes(), len(first)) for v in vectors],
                     dtype=np.intp)
    unique = np.stack([np.asarray(v, dtype=float) for v in vectors])[np.unique(which, return_index=True)[1]]
    if np.array_equal(unique, np.round(unique)) and np.abs(unique).max(initial=0) * tasks < EXACT:
        # how often each resample drew each task: one product for every vector
        drawn += (np.arange(resamples, dtype=np.int64) * tasks)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=resamples * tasks).reshape(resamples, tasks)
        sums = (counts.astype(float) @ unique.T).T
    else:
        sums = np.stack([v[drawn].sum(axis=-1) for v in unique])
    return sums[which]
