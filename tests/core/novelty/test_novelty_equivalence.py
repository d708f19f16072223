"""The shipped tracker's verdicts equal the reference definitions on real
inputs: the benchmark's corpus (benchmarks/bench_novelty.py) and every run of
every labelled corpus that `imprint tune` judges by default (every run of
them with IMPRINT_EQUIVALENCE_ALL=1, which takes a few minutes).

The reference is RefTracker of test_novelty_speed_invariants.py: the rule
written plainly (each unit normalized alone with every mask as `pattern.sub`,
str.split(), Python sets). The fast path is NoveltyTracker, both as replay
calls it (judge each read, then commit the round) and as observe_round. Every
count of every verdict and every round's progress must be the same; speed is
measured by the benchmark, never here.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from imprint_core.novelty import NoveltyConfig, NoveltyTracker

from test_novelty_compiled import PATHS, on_path
from test_novelty_speed_invariants import RefTracker, fast_round

ROOT = Path(__file__).resolve().parents[3]
BENCH_MB = 1.0   # a prefix of the benchmark's 10 MB (the generator is seeded; a smaller target stops earlier)


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_novelty
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_novelty


def _agree(rounds, cfg: NoveltyConfig, where: str) -> int:
    ref, observed, judged = RefTracker(cfg), NoveltyTracker(cfg), NoveltyTracker(cfg)
    for i, results in enumerate(rounds):
        expected = ref.observe_round(results)
        assert fast_round(observed, results) == expected, f"{where}, round {i + 1} (observe_round)"
        assert fast_round(judged, results, one_by_one=True) == expected, f"{where}, round {i + 1} (judge, commit)"
    return len(rounds)


@pytest.mark.parametrize("path", PATHS)
def test_the_benchmark_corpus_gets_the_reference_verdicts(path):
    bench = _bench()
    rounds = bench.generate_rounds(int(BENCH_MB * 1_000_000))
    assert bench.corpus_bytes(rounds) >= BENCH_MB * 1_000_000
    with on_path(path):
        assert _agree(rounds, NoveltyConfig(), "benchmark corpus") > 100


def _labelled_corpora() -> list[tuple[Path, Path]]:
    from harness.cli.tune import DEFAULT_CORPORA
    out = []
    for data, labels in DEFAULT_CORPORA:
        d, lab = (ROOT / data).resolve(), ROOT / labels
        if d.exists() and lab.exists():
            out.append((d, lab))
    return out


CORPORA = _labelled_corpora()


@pytest.mark.skipif(not CORPORA, reason="no labelled corpus here (../shared/data)")
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("corpus", CORPORA, ids=[lab.stem for _, lab in CORPORA])
def test_every_labelled_run_gets_the_reference_verdicts(corpus, path):
    from harness.realruns.labels import load_labels
    from harness.realruns.runfiles import load_runs
    data, labels = corpus
    runs, _ = load_runs([data])
    lab = load_labels([labels])
    if not runs and not len(lab):
        pytest.skip(f"{data}: no run yet")
    # The labelled runs; IMPRINT_EQUIVALENCE_ALL=1: every run of the corpus
    # (mini-swe-agent's 156 runs take the reference about 80 s here).
    if os.environ.get("IMPRINT_EQUIVALENCE_ALL") != "1":
        runs = [r for r in runs if lab.for_run(r.name, path=r.log.path)]
    assert runs, "no run of the corpus is labelled"
    cfg = NoveltyConfig()   # the shipped rule
    judged = 0
    for run in runs:
        rounds = [[(c.status, c.result, c.segments, c.args) for c in rnd.calls if c.kind == "read"]
                  for rnd in run.log.rounds]
        with on_path(path):
            judged += _agree([r for r in rounds if r], cfg, run.display)
    assert judged
