"""A verdict's figures as the trace writes them, and echo-only units judged
line by line (mutmut survivors of the novelty rule, killed here)."""
from __future__ import annotations

import json

import pytest

from imprint_core.novelty import NoveltyConfig, NoveltyTracker

from helpers import doc

QUERY = {"q": "capital of Spain"}
FIRST = "The capital of Spain is Madrid."
SECOND = "The capital of Spain has many people."


def shingles(text: str, **config) -> int:
    verdict, _, _ = NoveltyTracker(NoveltyConfig(**config)).judge("ok", text, None, QUERY)
    return verdict.shingles


@pytest.mark.parametrize("unit", ["paragraph", "line"])
def test_an_echo_only_result_of_two_lines_is_judged_line_by_line(unit):
    """Every shingle of each line touches the echoed query, so the lines are
    judged with the echo replaced; shingles still never cross a line break."""
    both = shingles(FIRST + "\n" + SECOND, fingerprint_unit=unit)
    assert both == shingles(FIRST, fingerprint_unit=unit) + shingles(SECOND, fingerprint_unit=unit) == 2


def test_a_verdicts_counts_are_integers_in_the_trace():
    tracker = NoveltyTracker(NoveltyConfig())
    tracker.commit_round([tracker.judge("ok", doc("a") + "\n\n" + doc("b"))])
    verdict, _, _ = tracker.judge("ok", doc("a") + "\n\n" + doc("c") + " " + doc("d"))
    figures = {k: getattr(verdict, k) for k in ("paragraphs", "shingles", "new_paragraphs", "new_shingles",
                                               "largest_new")}
    assert figures["new_paragraphs"] == 1 and figures["largest_new"] > 0
    assert all(type(v) is int for v in figures.values()), figures
    assert '.0' not in json.dumps(verdict.to_dict())
