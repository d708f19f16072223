"""Echoes.spans finds the echoes without compiling a regex a call; the
regex (Echoes.pattern) is the definition it must agree with."""
from __future__ import annotations

import string

from hypothesis import given, settings, strategies as st

from imprint_core.novelty.echo import ECHO_MARK, Echoes

# Pieces that make the alternatives' edges interesting: separators, quotes,
# word characters of other scripts, digits, the characters re.escape changes.
_PIECES = st.sampled_from(['"', ":", "=", " ", "#", "_", "é", "٣", "x", "ab", "a.b", "*", "\n", "-", "q", "1"])
_WORD = st.text(st.sampled_from("abq1_é. :=\"#"), min_size=1, max_size=6)
_ARGS = st.dictionaries(st.sampled_from(["q", "page", "a b", "x_1", "é", '"k"']),
                        st.one_of(_WORD, st.integers(-3, 30), st.booleans()), min_size=1, max_size=4)


def _texts(arguments: dict):
    """Texts built from the arguments' own names and values and the pieces around them."""
    parts = [str(k) for k in arguments] + [str(v).lower() for v in arguments.values()]
    return st.lists(st.one_of(st.sampled_from(parts), _PIECES), max_size=25).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_spans_are_what_the_regex_finds(data):
    arguments = data.draw(_ARGS)
    echo = Echoes(arguments, data.draw(st.sampled_from(["default", "basic", "none"])))
    text = data.draw(_texts(arguments))
    lo = data.draw(st.integers(0, len(text)))
    hi = data.draw(st.integers(lo, len(text)))
    if echo.pattern is None:
        assert not echo.has_echoes and echo.spans(text, lo, hi) == []
        return
    assert echo.spans(text, lo, hi) == [m.span() for m in echo.pattern.finditer(text, lo, hi)]
    assert echo.spans(text) == [m.span() for m in echo.pattern.finditer(text)]


def test_a_pair_takes_the_separator_the_regex_tries_first():
    echo = Echoes({"q": '"ab'}, "none")
    # `q: "ab` (separator `: `, value `"ab`) before `q: "` + `ab`: both end alike, the first is taken.
    text = 'x q: "ab y q="ab q #"ab q "ab'
    assert echo.spans(text) == [m.span() for m in echo.pattern.finditer(text)]
    assert [text[a:b] for a, b in echo.spans(text)] == ['q: "ab', 'q="ab', 'q #"ab', 'q "ab']


def test_the_edges_of_a_window_bound_what_follows_a_match_not_what_precedes_it():
    echo = Echoes({"q": "abc"}, "none")
    text = "xabc abcd abc"
    # Before lo the text is still read (x is a word character: no echo at 1);
    # at hi the text ends (abcd cut to abc is an echo).
    assert echo.spans(text, 1, 8) == [m.span() for m in echo.pattern.finditer(text, 1, 8)] == [(5, 8)]
    # A pair whose value the window's end cuts (`page: 1|2`) is no echo, as for the regex.
    pair, text = Echoes({"page": 12}, "none"), "page: 12"
    for hi in range(len(text) + 1):
        assert pair.spans(text, 0, hi) == [m.span() for m in pair.pattern.finditer(text, 0, hi)], hi
    assert pair.spans(text, 0, 7) == [] and pair.spans(text, 0, 8) == [(0, 8)]


def test_between_a_name_and_its_value_only_the_regexs_separators_make_a_pair():
    echo = Echoes({"page": 2}, "none")    # "none" keeps the case: any printable character may stand between
    for c in string.printable + "é٣":
        text = f"page{c}2"
        assert echo.spans(text) == [m.span() for m in echo.pattern.finditer(text)], repr(c)
    assert {c for c in string.printable if echo.spans(f"page{c}2")} == {":", "=", " "}


def test_a_boolean_argument_is_echoed_as_json_writes_it_under_every_normalization():
    text = '{"safe": true, "strict": false, "n": 3}'
    for variant in ("none", "basic", "default"):
        echo = Echoes({"safe": True, "strict": False}, variant)
        assert [text[a:b] for a, b in echo.spans(text)] == ['safe": true', 'strict": false'], variant


def test_replaced_marks_what_spans_finds():
    echo = Echoes({"query": "capital of spain", "page": 2}, "default")
    # the query in its quotes and the page after its name: one mark for both, next to each other
    assert echo.replaced('results for "capital of spain" page: 2 madrid') == f"results for {ECHO_MARK} madrid"
    assert echo.replaced('"capital of spain" is madrid, page 3') == f"{ECHO_MARK} is madrid, page 3"


def test_configs_sharing_work_share_one_echoes_but_never_across_types():
    from imprint_core.novelty._fast.memo import shared_work
    from imprint_core.novelty.echo import echoes_of
    with shared_work():
        one = echoes_of({"page": 1}, "default")
        assert echoes_of({"page": 1}, "default") is one
        # True == 1 and 1 == 1.0 in Python, yet they echo as "true", "1" and "1.0"
        assert echoes_of({"page": True}, "default").scalars == {(True, True)}
        assert echoes_of({"page": 1.0}, "default").pattern.pattern != one.pattern.pattern
        assert echoes_of({"page": 1}, "basic") is not one
    assert echoes_of({"page": 1}, "default") is not echoes_of({"page": 1}, "default")   # off: built anew


def test_the_shared_table_weighs_an_echoes_by_its_argument_names_and_values(monkeypatch):
    # The table's bound (memo.CHARS) holds for arguments with long names as for long values.
    from imprint_core.novelty._fast import memo
    from imprint_core.novelty.echo import echoes_of
    monkeypatch.setattr(memo, "CHARS", 12)
    with memo.shared_work():
        small = {"page": 12, "q": "abc"}                           # 4 + 2 + 1 + 3 characters
        assert echoes_of(small, "default") is echoes_of(small, "default")
        for big in ({"page_number_of_results": 1}, {"q": "a" * 12}):   # past CHARS: not kept
            assert echoes_of(big, "default") is not echoes_of(big, "default")


_SHAPES = st.sampled_from(["{}", "No results for {}", '{{"query": "{}", "results": []}}', "<html><p>{}</p></html>",
                           "```\n{}\n```", '["{}"]', "{} " + "z" * 420, "<div>{} " + "y" * 420 + "</div>",
                           # a page longer than a phrase whose text is short enough to be one
                           "<html><script>" + "s" * 420 + "</script><p>no results {}</p></html>", "{}"])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_an_empty_read_is_judged_alike_whether_its_echoes_are_made_before_or_on_demand(data):
    # the candidate rule hands evidence_free a function that makes the echoes, and it makes them only where
    # they can change the answer (JSON, a page, text short enough to be a "no results" phrase)
    from imprint_core.novelty.echo import PHRASE_CHARS, evidence_free
    args = data.draw(_ARGS)
    text = data.draw(_SHAPES).format(data.draw(_texts(args)))
    made = []

    def later():
        made.append(1)
        return Echoes(args, "default")

    assert evidence_free(text, later) == evidence_free(text, Echoes(args, "default"))
    s = text.strip()
    if len(s) > PHRASE_CHARS and s[0] not in "[{\"<`" and s != "null":
        assert not made         # plain text too long to be a phrase: the echoes were never needed


def test_occurrences_are_whole_words_the_first_then_the_longest():
    """Echoes.occurrences: an argument's form where the line writes it as
    whole words (at a word-character edge), every place, of overlapping ones
    the first and then the longest; `forms` narrows the forms looked for."""
    from imprint_core.novelty.echo import echoes_of
    e = echoes_of({"q": "cat"}, "default")
    line = "cat concat cat-food cats xcat cat"
    assert e.occurrences(line) == e.occurrences(line, ["cat"]) == [(0, 3), (11, 14), (30, 33)]
    assert e.occurrences(line, []) == []
    assert e.occurrences("c++ and c++x", ["c++"]) == [(0, 3), (8, 11)]
    both = echoes_of({"q": "new york", "r": "york"}, "default")
    assert both.occurrences("new york and york, newyork") == [(0, 8), (13, 17)]
    # two forms from the same place: the longer, whichever order the forms come in
    prefix = echoes_of({"q": "new york", "r": "new"}, "default")
    assert prefix.occurrences("new york, new") == [(0, 8), (10, 13)]
    assert prefix.occurrences("new york", ["new", "new york"]) == [(0, 8)]


def test_a_reading_is_bare_without_its_marks_and_its_words_punctuation():
    from imprint_core.novelty.echo import ECHO_MARK, _bare
    reading = f'"q": {ECHO_MARK} , (hello) world!'
    assert _bare(reading) == "q hello world"
    assert _bare(reading, keep=ECHO_MARK) == f"q {ECHO_MARK} hello world"
