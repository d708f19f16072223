"""The statistics behind every figure (`harness.analysis.stats`): cases with
known answers, and the invariants any correct interval or paired test keeps."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from harness.analysis.stats import mcnemar, paired_difference, rate


def test_the_wilson_interval_of_0_of_34_is_0_to_10_2_percent():
    # Wilson: upper = z²/(n+z²) at k=0 -> 3.8415/(34+3.8415) = 0.10151
    lo, hi = rate(0, 34).interval
    assert lo == 0.0 and hi == pytest.approx(0.101515, abs=1e-5)
    assert rate(0, 34).text() == "0/34 (0.0%, 0.0%–10.2%)"


def test_the_wilson_interval_of_a_half_is_symmetric_and_known():
    lo, hi = rate(10, 20).interval
    assert (lo, hi) == (pytest.approx(0.29929, abs=1e-4), pytest.approx(0.70071, abs=1e-4))


def test_a_rate_of_nothing_has_no_interval_and_a_bad_count_is_refused():
    assert rate(0, 0).interval is None and rate(0, 0).share is None and rate(0, 0).text() == "–"
    with pytest.raises(ValueError):
        rate(3, 2)


def test_mcnemar_with_7_discordant_runs_all_one_way_is_2_to_the_minus_6():
    # exact two-sided: 2 * 0.5**7 = 0.015625; concordant pairs do not count
    m = mcnemar([True] * 7 + [True, False] * 5, [False] * 7 + [True, False] * 5)
    assert (m.only_a, m.only_b) == (7, 0) and m.p == pytest.approx(0.015625)


def test_mcnemar_without_discordant_runs_tells_nothing_apart():
    assert mcnemar([True, False], [True, False]).p == 1.0
    assert mcnemar([], []).p == 1.0


def test_a_bootstrap_whose_pairs_are_identical_gives_zero_and_a_zero_interval():
    d = paired_difference([1, 0, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1], ["a", "a", "b", "c"])
    assert (d.diff, d.low, d.high, d.upper95, d.tasks) == (0.0, 0.0, 0.0, 0.0, 3)


def test_runs_of_one_task_move_together_in_the_bootstrap():
    # every harm of the first rule sits in one task of 10 runs: resampling tasks, not runs,
    # the difference is 0 whenever that task is not drawn, so the lower bound reaches 0
    a = [1] * 10 + [0] * 40
    groups = ["t0"] * 10 + [f"t{i}" for i in range(1, 41)]
    d = paired_difference(a, [0] * 50, [1] * 50, groups)
    assert d.diff == pytest.approx(0.2) and d.low == 0.0 and d.tasks == 41
    by_run = paired_difference(a, [0] * 50, [1] * 50, list(range(50)))
    assert by_run.low > 0.05                    # run by run it would look far surer


def test_no_denominator_means_no_figure():
    d = paired_difference([0, 0], [0, 0], [0, 0], ["a", "b"])
    assert d.diff is None and d.upper95 is None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))).filter(lambda t: t[1] > 0))
def test_a_wilson_interval_holds_its_share_inside_0_and_1(kn):
    k, n = kn
    lo, hi = rate(k, n).interval
    assert 0.0 <= lo <= k / n + 1e-12 and k / n - 1e-12 <= hi <= 1.0
    assert (lo == 0.0) == (k == 0) and (hi == pytest.approx(1.0)) == (k == n)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=60))
def test_mcnemar_is_symmetric_and_a_probability(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    m, r = mcnemar(a, b), mcnemar(b, a)
    assert m.p == pytest.approx(r.p) and 0.0 < m.p <= 1.0 and (m.only_a, m.only_b) == (r.only_b, r.only_a)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 4)), min_size=2, max_size=40))
def test_a_paired_difference_is_antisymmetric_and_its_bounds_are_ordered(rows):
    a = [x for x, _, _ in rows]
    b = [y for _, y, _ in rows]
    den = [10] * len(rows)
    groups = [g for _, _, g in rows]
    d, r = paired_difference(a, b, den, groups), paired_difference(b, a, den, groups)
    assert d.diff == pytest.approx(-r.diff) and d.diff == pytest.approx((sum(a) - sum(b)) / sum(den))
    if d.low is not None:
        assert d.low <= d.upper95 <= d.high + 1e-12
        # the same seed draws the same tasks: the swapped pair is the mirror image, bound for bound
        assert (r.low, r.high) == (pytest.approx(-d.high), pytest.approx(-d.low))


def _scipy_paired(a, b, den, groups):
    """The definition: scipy.stats.bootstrap over tasks, paired, percentile (what stats.py did before it drew
    the resamples once for many figures)."""
    import warnings
    import numpy as np
    from scipy.stats import DegenerateDataWarning, bootstrap
    from harness.analysis.stats import CONFIDENCE, RESAMPLES, SEED
    keys = list(dict.fromkeys(groups))
    sums = []
    for v in (a, b, den):
        s = np.zeros(len(keys))
        np.add.at(s, [keys.index(g) for g in groups], np.asarray(v, dtype=float))
        sums.append(s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)     # scipy's standard error of undefined resamples
        res = bootstrap(tuple(sums), lambda x, y, d, axis=-1: (x.sum(axis) - y.sum(axis)) / d.sum(axis),
                        paired=True, vectorized=True, n_resamples=RESAMPLES, method="percentile",
                        rng=np.random.default_rng(SEED))
    dist = res.bootstrap_distribution
    dist = dist[np.isfinite(dist)]
    tail = (1 - CONFIDENCE) * 100
    return tuple(float(x) for x in np.percentile(dist, [tail / 2, 100 - tail / 2, 100 - tail]))


_runs = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 6), st.integers(0, 5)),
                 min_size=2, max_size=30)


@settings(max_examples=25, deadline=None)
@given(st.lists(_runs, min_size=1, max_size=3).filter(lambda f: len({len(r) for r in f}) == 1), st.booleans())
def test_figures_sharing_one_draw_each_get_exactly_scipy_s_bootstrap(figures, floats):
    # several figures over the same runs and tasks, as compare asks for them per cell: each gets the bounds
    # scipy's bootstrap gives it alone, bit for bit (counts through one product, fractions summed as drawn)
    from harness.analysis.stats import paired_differences
    groups = [g for *_, g in figures[0]]
    scale = 0.37 if floats else 1
    pairs = [([x * scale for x, _, _, _ in f], [y * scale for _, y, _, _ in f], [d for _, _, d, _ in f])
             for f in figures]
    got = paired_differences(pairs, groups)
    for (a, b, den), d in zip(pairs, got):
        alone = paired_difference(a, b, den, groups)
        assert d == alone
        if d.low is not None and d.low != d.high:
            want = _scipy_paired(a, b, den, groups)
            assert (d.low, d.high, d.upper95) == want
