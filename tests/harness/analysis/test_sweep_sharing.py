"""Work shared across configs (`novelty.shared_work`, `sweep.work.shared_progress`):
the same progress for every (run, config) as judging each config alone, the
pure steps remembered give what they compute, and the memory stays bounded."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache
from harness.analysis.sweep.progress import Corpus, _balanced, compute_progress, load_corpora, plan
from harness.analysis.sweep.work import progress_of, shared_progress
from harness.realruns import noveltyconfigs
from imprint_core.novelty._fast import memo as _memo
from imprint_core.novelty import fingerprints as fp, normalization as nz, segmentation as sg, shared_work

ROOT = Path(__file__).resolve().parents[3]
TAU = ROOT.parent / "shared" / "data" / "roundlogs" / "tau-bench-airline"
TAU_LABELS = ROOT / "scenarios" / "labels" / "labels-tau-bench.yaml"
WEB = ROOT / "traces" / "webruns"
WEB_LABELS = ROOT / "scenarios" / "labels" / "labels-webruns.yaml"

# Two profiles, two widths, both window units, two thresholds: every way the
# configs of a grid share work or do not.
GRID = {"normalization": ["default", "logs"], "shingle_words": [3, 5], "fingerprint_unit": ["paragraph", "line"],
        "min_new_shingles": [1, 3]}


@pytest.fixture(scope="module")
def runs():
    corpora = [Corpus([str(WEB)], str(WEB_LABELS))]
    if TAU.exists():
        corpora.append(Corpus([str(TAU)], str(TAU_LABELS)))
    got, _ = load_corpora(corpora)
    return got[::2]


def test_configs_apart_only_in_thresholds_share_one_tracker_and_read_it_each_their_own_way(runs) -> None:
    # min_new_share only reads a round's counts: one tracker for all six, six answers
    configs = noveltyconfigs.expand({"min_new_shingles": [1, 3, 8], "min_new_share": [0.0, 0.5]})
    differ = False
    for run in runs:
        alone = [progress_of(run.replies, c) for c in configs]
        assert shared_progress(run.replies, configs) == alone, run.origin
        differ |= len({str(p) for p in alone}) > 1
    assert differ, "the thresholds made no difference: the test shows nothing"


def test_shared_progress_is_each_config_alone(runs) -> None:
    configs = noveltyconfigs.expand(GRID)
    assert len(configs) == 16
    for run in runs:
        alone = [progress_of(run.replies, c) for c in configs]
        assert shared_progress(run.replies, configs) == alone, run.origin


def test_sweep_with_and_without_sharing_agree(runs) -> None:
    configs = noveltyconfigs.expand({"min_new_shingles": [1, 3], "fingerprint_unit": ["paragraph", "line"]})
    clear_memory_cache()
    plain, plain_stats = compute_progress(runs, configs, jobs=1, cache=ProgressCache(None), share=False)
    clear_memory_cache()
    shared, shared_stats = compute_progress(runs, configs, jobs=1, cache=ProgressCache(None))
    assert shared == plain
    assert shared_stats.computed == plain_stats.computed
    assert shared_stats.items == 1 and plain_stats.items == len(configs)   # all configs in one item, or one each


def test_plan_groups_runs_by_the_configs_they_miss() -> None:
    missing = {0: [0, 1], 1: [0, 1], 2: [1]}
    weights = [10, 20, 30]
    assert plan(missing, weights, 1) == [((0, 1), [0, 1]), ((1,), [2])]
    assert sorted(plan(missing, weights, 1, share=False)) == [((0,), [0, 1]), ((1,), [0, 1, 2])]
    items = plan(missing, weights, 4)
    assert sorted(ri for _, idx in items for ri in idx) == [0, 1, 2]    # every run once, in chunks
    assert all(cis == (0, 1) for cis, idx in items if 2 not in idx)



def _balanced_by_scan(idx, weights, n):
    """The plain definition: each run, heaviest first, onto the bin with the
    least (load, index)."""
    bins, load = [[] for _ in range(n)], [0] * n
    for ri in sorted(idx, key=lambda i: (-weights[i], i)):
        b = min(range(n), key=lambda k: (load[k], k))
        bins[b].append(ri)
        load[b] += weights[ri]
    return [sorted(b) for b in bins if b]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=60), st.integers(1, 70), st.data())
def test_balanced_bins_are_the_scans_bins(weights: list[int], n: int, data) -> None:
    # Equal weights and zero weights put the tie-break to work; n past the run
    # count leaves bins empty, which must be left out.
    idx = data.draw(st.lists(st.sampled_from(range(len(weights))), unique=True, min_size=1))
    got = _balanced(idx, weights, n)
    assert got == _balanced_by_scan(idx, weights, n)
    assert sorted(ri for b in got for ri in b) == sorted(idx)

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
words = st.lists(st.sampled_from(["alpha", "Beta", "2026-10-28", "10:15:07", "0x7ffd5e8a", "score: 0.93", "/tmp/x/y",
                                  "\n", "\n\n", " ", "  ", "deadbeefdeadbeef01", "ago", "3 min ago", "é", "ﬁ"]),
                 max_size=40).map("".join)
texts = st.one_of(text, words)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.sampled_from(nz.NORMALIZATIONS))
def test_memoized_normalization_is_plain(t: str, variant: str) -> None:
    plain = nz.normalize.plain(t, variant)
    units = sg.segment.plain(t) or [t]
    plain_units = nz.normalize_units.plain(units, variant)
    with shared_work():
        for _ in range(2):          # computed, then remembered
            assert nz.normalize(t, variant) == plain
            assert sg.segment(t) == sg.segment.plain(t)
            got = nz.normalize_units(units, variant)
            assert got == plain_units
            got.append("changed by the caller")      # a copy: what is remembered stays
    assert nz.normalize(t, variant) == plain


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(words, min_size=1, max_size=4), st.integers(1, 6), st.booleans())
def test_memoized_shingles_are_plain(units: list[str], width: int, per_line: bool) -> None:
    def flat(w):
        return None if w is None else [a.tolist() for a in (w.hashes, w.unit, w.shingles, w.counts, w.extra, w.line)]
    plain = [flat(fp.windows_of(units, width, unit)) for unit in (per_line, not per_line)]
    with shared_work():   # the second and third calls reuse the first one's shingles
        assert [flat(fp.windows_of(units, width, unit)) for unit in (per_line, per_line, not per_line)] == \
            [plain[0], plain[0], plain[1]]


def test_sharing_is_off_by_default_per_thread_and_bounded(monkeypatch) -> None:
    assert _memo.stats() == (0, 0)
    nz.normalize("Seen at 10:15:07")
    assert _memo.stats() == (0, 0)                  # off: nothing remembered
    seen: list = []
    with shared_work():
        nz.normalize("Seen at 10:15:07")
        nz.normalize("Seen at 10:15:07")
        assert _memo.stats() == (1, 1)
        other = threading.Thread(target=lambda: seen.append(_memo.stats()))
        other.start()
        other.join()
    assert seen == [(0, 0)]                         # another thread has its own (none)
    monkeypatch.setattr(_memo, "ENTRIES", 8)
    monkeypatch.setattr(_memo, "CHARS", 100)
    with shared_work():
        for i in range(50):
            nz.normalize(f"line {i}")
        nz.normalize("x" * 500)                     # larger than the whole table: not kept
        table = _memo._local.table
        assert len(table.entries) <= 8 and table.chars <= 100
        assert all(len(k[1][1]) < 500 for k in table.entries)


def test_remembered_arrays_are_read_only() -> None:
    with shared_work():
        fp.windows_of(["one two three four five six"], 3)
        got = fp._shingled(["one two three four five six"], 3)
    h = got[6]
    with pytest.raises(ValueError):
        h[0] = 0
    with pytest.raises(ValueError):    # and those inside the dataclasses it holds (the canonical lines)
        got[0].bounds[0] = 0
