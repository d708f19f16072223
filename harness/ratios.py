"""Statistics of ratios: estimated / measured prompt tokens, bytes per
measured token. One rule for every place that sums them up (the report's
tables and plots, the gate's divergence condition, the recorded smoke
sessions' figures), so the same requests never get two p95s.

The median is the middle value (the mean of the two middle ones for an even
count); the p95 interpolates linearly between the closest ranks (pandas' and
numpy's default). A ratio below 1 is an under-count, 1 an exact count.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class RatioStats:
    count: int
    median: float
    p95: float
    under: float     # the share below 1
    exact: float     # the share equal to 1
    lowest: float
    highest: float


def ratio_stats(ratios: Iterable[float] | Any) -> RatioStats | None:
    """The statistics of `ratios` (a sequence or a pandas Series; missing
    values left out), or None when there is none."""
    import pandas as pd   # lazily: the live sessions import this module, and need pandas only here
    r = pd.Series(ratios if isinstance(ratios, pd.Series) else list(ratios), dtype=float).dropna()
    if r.empty:
        return None
    return RatioStats(len(r), float(r.median()), float(r.quantile(0.95)), float((r < 1).mean()),
                      float((r == 1).mean()), float(r.min()), float(r.max()))
