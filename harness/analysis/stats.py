"""How sure a figure is: the statistics behind every rate and comparison the
testbed reports, all through `scipy.stats` (no hand-written statistics).

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

import warnings
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
        if not self.n:
            return None
        from scipy.stats import binomtest
        ci = binomtest(self.k, self.n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
        return float(ci.low), float(ci.high)

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
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    if only_a + only_b == 0:
        return McNemar(0, 0, 1.0)
    from scipy.stats import binomtest
    return McNemar(only_a, only_b, float(binomtest(only_a, only_a + only_b, 0.5).pvalue))


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


def _grouped(values: Sequence[float], groups: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    keys = list(dict.fromkeys(groups))
    index = {k: i for i, k in enumerate(keys)}
    out = np.zeros(len(keys))
    np.add.at(out, [index[g] for g in groups], np.asarray(values, dtype=float))
    return out, keys


def paired_difference(a: Sequence[float], b: Sequence[float], den: Sequence[float], groups: Sequence[Any], *,
                      resamples: int = RESAMPLES, seed: int = SEED) -> Difference:
    """(Σa − Σb) / Σden over runs, with a bootstrap over `groups` (tasks):
    each resample draws tasks with replacement and takes all their runs.
    Percentile intervals: two-sided 95% (`low`, `high`) and the one-sided
    95% upper bound. Where every task has the same a and b the difference is
    exactly 0 and so is every bound (nothing to resample)."""
    if not (len(a) == len(b) == len(den) == len(groups)):
        raise ValueError("paired values need one of each per run")
    sa, _ = _grouped(a, groups)
    sb, _ = _grouped(b, groups)
    sd, keys = _grouped(den, groups)
    total = sd.sum()
    if not len(keys) or total <= 0:
        return Difference(None, None, None, None, len(keys))
    diff = float((sa.sum() - sb.sum()) / total)
    if np.array_equal(sa, sb):
        return Difference(diff, diff, diff, diff, len(keys))
    if len(keys) < 2:           # one task: nothing to resample, no interval
        return Difference(diff, None, None, None, len(keys))
    from scipy.stats import DegenerateDataWarning, bootstrap

    def stat(x, y, d, axis=-1):
        with np.errstate(invalid="ignore", divide="ignore"):
            return (x.sum(axis=axis) - y.sum(axis=axis)) / d.sum(axis=axis)

    with warnings.catch_warnings():
        # Every resample the same (one task carries the whole difference, or none can change it): a point
        # interval, which is the answer; scipy's warning about it would only be noise in every log.
        warnings.simplefilter("ignore", DegenerateDataWarning)
        res = bootstrap((sa, sb, sd), stat, paired=True, vectorized=True, n_resamples=resamples,
                        method="percentile", confidence_level=CONFIDENCE, rng=np.random.default_rng(seed))
    # One resampled distribution gives both bounds by the percentile method (a
    # resample that drew only tasks without a denominator is undefined: left out).
    dist = res.bootstrap_distribution
    dist = dist[np.isfinite(dist)]
    tail = (1 - CONFIDENCE) * 100
    low, high = np.percentile(dist, [tail / 2, 100 - tail / 2])
    return Difference(diff, float(low), float(high), float(np.percentile(dist, 100 - tail)), len(keys))
