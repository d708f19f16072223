"""A corpus larger than what the sweep keeps in memory (`sweep.HOLD_CHARS`):
the runs past it travel to the worker as references and are read again there,
an item at a time, and the results are those of a corpus held whole."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.analysis.sweep import progress as sweep
from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache
from harness.analysis.sweep.progress import Corpus, compute_progress, load_corpora
from harness.realruns import noveltyconfigs
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
WEB = ROOT / "traces" / "webruns"
WEB_LABELS = ROOT / "scenarios" / "labels" / "labels-webruns.yaml"
WHO = ROOT.parent / "shared" / "data" / "raw" / "who-and-when"
WHO_LABELS = ROOT / "scenarios" / "labels" / "labels-who-and-when.yaml"
CONFIGS = noveltyconfigs.expand({"min_new_shingles": [1, 3], "fingerprint_unit": ["paragraph", "line"]})


def _corpora() -> list[Corpus]:
    out = [Corpus([str(WEB)], str(WEB_LABELS))]
    if WHO.exists():          # raw trajectories, converted again when read again
        out.append(Corpus([str(WHO)], str(WHO_LABELS)))
    return out


@pytest.fixture(autouse=True)
def _fresh() -> None:
    clear_memory_cache()


@pytest.mark.parametrize("jobs", [1, 2])
def test_runs_not_held_give_the_held_results(monkeypatch, jobs: int) -> None:
    held, _ = load_corpora(_corpora())
    whole, _ = compute_progress(held, CONFIGS, jobs=1, cache=ProgressCache(None))
    assert all(r.held for r in held)
    clear_memory_cache()
    monkeypatch.setattr(sweep, "HOLD_CHARS", 20_000)
    runs, _ = load_corpora(_corpora())
    assert [r.digest for r in runs] == [r.digest for r in held]
    assert sum(not r.held for r in runs) > len(runs) // 2
    got, stats = compute_progress(runs, CONFIGS, jobs=jobs, cache=ProgressCache(None))
    assert got == whole
    assert stats.items > 2            # small items, each reading only its own runs
    assert sum(r.held for r in runs) < len(runs) // 2   # computing did not keep them
    # Who reads a run's replies (compare) gets them, and from then on keeps them.
    last = runs[-1]
    assert not last.held and last.replies == held[-1].replies and last.full == held[-1].full and last.held


def test_a_run_changed_since_loading_is_an_error(monkeypatch, tmp_path: Path) -> None:
    corpus = tmp_path / "runs"
    shutil.copytree(WEB / "fireact-hotpotqa", corpus / "fireact-hotpotqa")
    monkeypatch.setattr(sweep, "HOLD_CHARS", 1)
    runs, _ = load_corpora([Corpus([str(corpus)], str(WEB_LABELS))])
    target = Path(runs[0].source.file)
    lines = target.read_text(encoding="utf-8").splitlines()
    target.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")      # its last round gone
    with pytest.raises(UserInputError, match="changed"):
        compute_progress(runs, CONFIGS[:1], jobs=1, cache=ProgressCache(None))


def test_a_work_item_reads_its_unheld_runs_itself(monkeypatch) -> None:
    """An item given references judges exactly what it would judge given the
    replies; a mix of both keeps each run in its place."""
    from harness.analysis.sweep.work import Unheld, compute_chunk, run_inline
    held, _ = load_corpora(_corpora()[:1])
    clear_memory_cache()
    monkeypatch.setattr(sweep, "HOLD_CHARS", 1)
    runs, _ = load_corpora(_corpora()[:1])
    picked = [i for i, r in enumerate(runs) if not r.held][:3]
    assert len(picked) == 3
    refs = [runs[i].unheld for i in picked]
    assert all(isinstance(r, Unheld) for r in refs)
    direct = compute_chunk(CONFIGS, [held[i].replies for i in picked])
    assert compute_chunk(CONFIGS, refs) == direct
    mixed = [refs[0], held[picked[1]].replies, refs[2]]
    assert compute_chunk(CONFIGS, mixed) == direct
    assert direct[0] != direct[1] or direct[1] != direct[2]     # the runs differ, so order is checked
    # run_inline says which item each result belongs to.
    items = [((0,), [1]), ((1, 0), [0, 2])]
    got = dict(run_inline(CONFIGS, mixed, items))
    assert got == {0: compute_chunk([CONFIGS[0]], [mixed[1]]),
                   1: compute_chunk([CONFIGS[1], CONFIGS[0]], [mixed[0], mixed[2]])}
