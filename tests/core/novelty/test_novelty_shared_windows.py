"""Configs that differ only in thresholds share a round's windows while shared work is on."""
from __future__ import annotations

import numpy as np
import pytest

from imprint_core import NoveltyConfig, NoveltyTracker
from imprint_core.novelty import rule, shared_work

from helpers import doc

RESULT = ("ok", doc("a") + "\n\nSearch results for capital of spain: " + doc("b"), None, {"q": "capital of spain"})


@pytest.fixture
def windowings(monkeypatch):
    calls = []
    real = rule.windows_of

    def counting(units, width, per_line, exclude=None):
        calls.append((width, per_line))
        return real(units, width, per_line, exclude)
    monkeypatch.setattr(rule, "windows_of", counting)
    return calls


def _trackers():
    return [NoveltyTracker(NoveltyConfig(min_new_shingles=m, fingerprint_unit=u)) for u in ("paragraph", "line")
            for m in (1, 3)]


def test_thresholds_apart_the_windows_are_computed_once(windowings):
    with shared_work():
        shared = [t.observe_round([RESULT]) for t in _trackers()]
    assert sorted(set(windowings)) == [(5, False), (5, True)] and len(windowings) == 2
    windowings.clear()
    alone = [t.observe_round([RESULT]) for t in _trackers()]
    assert len(windowings) == 4
    assert [r.progress for r in shared] == [r.progress for r in alone]
    assert [(r.new_shingles, r.shingles, r.new_paragraphs) for r in shared] == \
           [(r.new_shingles, r.shingles, r.new_paragraphs) for r in alone]


def test_the_shared_windows_cannot_be_changed_by_one_config():
    with shared_work():
        win = rule._round_windows(["alpha beta gamma delta epsilon zeta"], 5, False, [0], {})
        again = rule._round_windows(["alpha beta gamma delta epsilon zeta"], 5, False, [0], {})
        assert again is win
        with pytest.raises(ValueError):
            win.shingles[0] = np.uint64(1)
