"""Novelty against the record's "Progress" rules, on the shapes an audit of
the loop found misjudged: empty reads that looked like evidence, new facts
hidden by an echoed query, an echoed page number, relative times in words,
and a new line inside a large result."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from imprint_core.novelty import NoveltyConfig, NoveltyTracker, PatienceRule
from imprint_core.novelty.echo import Echoes, evidence_free
from imprint_core.novelty.rule import FINGERPRINT_UNITS

from helpers import doc

EVIDENCE = "The Sunday timetable runs two direct trains to the coast, at 08:10 and at 13:40, from platform four."

# What tools say when they found nothing.
EMPTY_SHAPES = [
    "null", "No results.", "no results found", "0 results", "Nothing found.", "(no output)", "None", '""', "[]", "{}",
    "```json\n[]\n```", "```\n\n```", "<html><body></body></html>",
    "<!DOCTYPE html><html><head><title>Search</title><style>p{}</style></head><body>\n</body></html>",
    '{"items": [], "total_count": 0}', '{"results": [], "took": 17}', '{"hits": {"total": 0, "hits": []}}',
    '{"data": null}', '{"facets": {}, "total": 0, "took": 4}', '{"results": [], "message": "No matching documents"}', '[{}]', '{"error": null, "results": []}',
    'No results found for "sunday trains"',
]


def progress(rounds, config: NoveltyConfig | None = None) -> list[bool]:
    """Progress per round; a round is a list of (text, arguments) results."""
    t = NoveltyTracker(config)
    return [t.observe_round([("ok", text, None, args) for text, args in r]).progress for r in rounds]


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_an_empty_shape_is_an_empty_read(shape):
    assert evidence_free(shape, None)
    t = NoveltyTracker()
    t.observe_round([("ok", EVIDENCE, None)])
    v = t.judge("ok", shape, None)[0]
    assert v.status == "empty" and v.new_shingles == 0


def test_twenty_empty_shapes_one_after_another_never_reset_patience():
    t, rule = NoveltyTracker(), PatienceRule(len(EMPTY_SHAPES) + 1)
    assert not rule.update(write=False, progress=t.observe_round([("ok", EVIDENCE, None)]).progress)
    for shape in EMPTY_SHAPES:
        rule.update(write=False, progress=t.observe_round([("ok", shape, None)]).progress)
    assert rule.counter == len(EMPTY_SHAPES)


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=2, max_size=6, unique=True),
       st.sampled_from(["results", "items", "hits", "documents"]), st.sampled_from(["took", "total", "count", "ms"]))
def test_property_the_figures_of_no_results_are_not_evidence(values, key, figure):
    rounds = [[(json.dumps({key: [], figure: v}), None)] for v in values]
    assert progress([[(EVIDENCE, None)]] + rounds) == [True] + [False] * len(values)


def test_echoed_arguments_are_nothing_at_any_depth_each_by_its_own_type():
    e = Echoes({"terms": ["paris", "weather"], "safe": True}, "default")
    # a batch tool that writes its request back: the call's values in a list inside a list
    assert evidence_free('{"request": [{"terms": ["paris", "weather"]}], "results": []}', e)
    assert not evidence_free('{"request": [{"terms": ["paris", "rain"]}], "results": []}', e)
    assert evidence_free('{"query": "paris", "safe": true}', e)
    # True == 1 in Python, yet the result's `true` is no echo of the argument 1, nor its `1` of true
    assert not evidence_free('{"query": "paris", "safe": true}', Echoes({"query": "paris", "safe": 1}, "default"))
    assert not evidence_free('{"query": "paris", "safe": 1}', e)


_NO_RESULTS_FOR = ['No results found for "{}"', "No results for {}.", "0 results for '{}'", "Nothing found for {}",
                   "no matching documents were found for `{}`"]


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.text("abcdefghij xyz2", min_size=1, max_size=20).map(str.strip).filter(bool),
                min_size=2, max_size=5, unique=True), st.sampled_from(_NO_RESULTS_FOR))
def test_property_no_results_for_the_echoed_query_is_an_empty_read(queries, phrase):
    """The query a "no results for" phrase echoes is gone before the phrase
    is read (the phrase ends in `for`): an empty read, from the first."""
    t = NoveltyTracker()
    assert t.observe_round([("ok", EVIDENCE, None, {"query": "sunday trains"})]).progress
    for q in queries:
        text = phrase.format(q)
        assert evidence_free(text, Echoes({"query": q}, "default")), text
        r = t.observe_round([("ok", text, None, {"query": q})])
        assert not r.progress and r.verdicts[0].status == "empty", text


def test_a_no_results_phrase_around_the_echoed_arguments_is_an_empty_read():
    e = Echoes({"query": "paris"}, "default")
    for text in ("paris: no results", '"paris": "none"', "paris - nothing found."):
        assert evidence_free(text, e), text
    assert not evidence_free("paris: two trains", e)
    # read under the echoes' own normalization: "basic" keeps the date that "default" would mask
    assert evidence_free("2024-01-05: no results", Echoes({"date": "2024-01-05"}, "basic"))
    # punctuation alone is judged as nothing by the shingles: no phrase, with echoes or without
    assert not evidence_free("...", e) and not evidence_free("...", None)


@pytest.mark.parametrize("text", [
    '{"results": [{"title": "Coast line"}], "took": 3}', '{"temperature": 21}', '[3]', "No results? Trains run at 9.",
    "<html><body><p>Two trains run on Sunday.</p></body></html>", '{"count": 2, "items": ["a train", "a bus"]}',
    "No results for the exact phrase; similar: " + " ".join([EVIDENCE] * 5),    # longer than any phrase
])
def test_reads_with_something_in_them_are_not_empty(text):
    assert not evidence_free(text, None)


def test_a_json_result_nested_too_deep_is_judged_not_raised():
    deep = "[" * 100_000 + "]" * 100_000
    v = NoveltyTracker().judge("ok", deep, None)[0]
    assert v.status in ("ok", "empty")


def test_a_new_short_fact_that_repeats_the_query_is_progress():
    rounds = [[(f"The capital of {c} is {k}.", {"q": f"capital of {c}"})]
              for c, k in [("Spain", "Madrid"), ("France", "Paris"), ("Italy", "Rome"), ("Norway", "Oslo")]]
    assert progress(rounds) == [True] * 4
    # and the same fact fetched again by the same query is not
    assert progress(rounds + rounds[:2]) == [True] * 4 + [False] * 2


def test_an_echo_only_header_stays_the_same_whatever_the_query():
    e = Echoes({"q": "aaa"}, "default")
    assert e.replaced('search results for "aaa":') == e.replaced('search results for "aaa ":') \
        == "search results for <q>"
    rounds = [[(f'Search results for "{q}":\n\n{EVIDENCE}', {"q": q})] for q in ["sunday trains", "coast trains "]]
    assert progress(rounds) == [True, False]


@pytest.mark.parametrize("footer", ["Page {p} of 9", "page: {p}", "page={p}", "Showing page #{p}"])
def test_a_changed_argument_echoed_in_a_footer_is_not_progress(footer):
    hits = "\n\n".join(doc(f"hit{i}", 20) for i in range(3))
    rounds = [[(hits + "\n\n" + footer.format(p=p), {"query": "trains", "page": p})] for p in range(1, 6)]
    assert progress(rounds) == [True] + [False] * 4


def test_a_page_number_not_among_the_arguments_is_still_evidence():
    hits = doc("hits", 30)
    rounds = [[(hits + f"\n\nPage {p} of 9", {"query": "trains"})] for p in range(1, 4)]
    assert progress(rounds) == [True] * 3


@pytest.mark.parametrize("when", ["two days ago", "three weeks ago", "twenty minutes ago", "eleven months ago",
                                  "a couple of days ago", "several hours ago", "five years ago"])
def test_relative_times_in_words_are_masked(when):
    page = "Bridge reopened to traffic after repairs to the north span. Updated {} by the city desk."
    assert progress([[(page.format("an hour ago"), None)], [(page.format(when), None)]]) == [True, False]


def big_log(n: int) -> str:
    return "\n".join(f"INFO worker {i % 7} finished batch {i} of the nightly import" for i in range(n))


@pytest.mark.parametrize("n", [40, 2_000])
def test_a_new_line_appended_to_a_large_log_is_progress(n):
    log = big_log(n)
    more = log + "\nERROR worker 3 lost its database connection while writing the summary table"
    assert progress([[(log, None)], [(more, None)]]) == [True, True]


def test_a_new_sentence_inside_a_5000_word_paragraph_is_progress():
    words = doc("long", 5_000).split()
    inserted = words[:2_500] + "the new finding is that the pump fails below minus thirty degrees".split() \
        + words[2_500:]
    for unit in FINGERPRINT_UNITS:
        assert progress([[(" ".join(words), None)], [(" ".join(inserted), None)]],
                        NoveltyConfig(fingerprint_unit=unit)) == [True, True]


@pytest.mark.parametrize("n", [40, 2_000])
def test_a_changed_number_in_a_large_log_is_not_progress(n):
    lines = big_log(n).split("\n")
    lines[n // 2] = lines[n // 2].replace("finished", "finished 99999")
    assert progress([[(big_log(n), None)], [("\n".join(lines), None)]]) == [True, False]


def test_the_same_large_log_with_a_new_line_read_again_is_not_progress():
    more = big_log(2_000) + "\nERROR worker 3 lost its database connection while writing the summary table"
    assert progress([[(big_log(2_000), None)], [(more, None)], [(more, None)]]) == [True, True, False]


# ---- issue 45, item 1: an envelope of nothing, whatever changes in it ----------------------------
# The scalars a search API writes beside its (empty) lists: timings, ids, timestamps, counts, statuses.
_envelope_scalars = st.one_of(
    st.integers(-10**12, 10**12), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
    st.uuids().map(str), st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.text("0123456789abcdef-_", min_size=1, max_size=24),                 # request ids, tokens
    st.sampled_from(["ok", "success", "OK", "completed", "200", "partial"]))
_keys = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
# What an empty list may hold and still say nothing: nothing, or empty things.
_empty_items = st.lists(st.sampled_from([None, "", {}, []]), max_size=3)


@st.composite
def _empty_envelope(draw, query: str) -> str:
    """A JSON object whose every list is empty of content, one list at least,
    maybe nested (`{"hits": {"hits": []}}`), with drawn scalars beside them."""
    def obj(depth: int) -> dict:
        d = draw(st.dictionaries(_keys, _envelope_scalars, max_size=4))
        if draw(st.booleans()):
            d["query"] = query                       # the echoed query
        for _ in range(draw(st.integers(0 if depth else 1, 2))):
            k = draw(_keys)
            d[k] = obj(depth + 1) if depth < 2 and draw(st.booleans()) else draw(_empty_items)
        return d
    while True:
        d = obj(0)
        if json.dumps(d).count("["):                 # a list survived the drawn keys' collisions
            return json.dumps(d, indent=draw(st.sampled_from([None, 2])))


@hsettings(max_examples=80, deadline=None)
@given(st.data(), st.integers(2, 6))
def test_property_envelopes_of_nothing_are_empty_reads_and_never_reset_patience(data, n):
    """research-loop.md: empty reads never reset patience. A JSON result whose
    every list is empty is an empty read, whatever scalars sit beside the lists."""
    queries = [f"sunday trains query {i}" for i in range(n)]
    shapes = [data.draw(_empty_envelope(q)) for q in queries]
    t, rule = NoveltyTracker(), PatienceRule(n + 1)
    assert t.observe_round([("ok", EVIDENCE, None, {"query": "sunday trains"})]).progress
    for q, shape in zip(queries, shapes):
        assert evidence_free(shape, None)
        r = t.observe_round([("ok", shape, None, {"query": q})])
        assert not r.progress and r.verdicts[0].status == "empty", shape
        rule.update(write=False, progress=r.progress)
    assert rule.counter == n
