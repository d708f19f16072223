"""The one converter of parameter values (`imprint_core.params`, issue 45
item 6): text or parsed values into typed values, the same checks on every
road, one list separator."""
from __future__ import annotations

import math
from typing import Literal, Optional

import pytest
from hypothesis import given, strategies as st

from imprint_core import params as typed
from imprint_core.errors import UserInputError
from imprint_core.stoprules import build, choose

NOT_INTEGERS = [2.5, float("nan"), float("inf"), -float("inf"), "2.5", "nan", "inf", "", True, None, [3]]


@given(st.integers(-10**30, 10**30))
def test_an_integer_reads_the_same_as_text_or_as_a_value(n):
    assert typed.convert(n, int) == typed.convert(str(n), int) == typed.convert(f"  {n} ", int) == n


@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not (math.isfinite(x) and x == int(x))))
def test_no_fraction_nan_or_inf_is_an_integer_on_any_road(x):
    for value in (x, repr(x), str(x)):
        with pytest.raises(typed.ParamError):
            typed.convert(value, int)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_number_parameter_takes_finite_numbers_only(x):
    if math.isfinite(x):
        assert typed.convert(x, float) == typed.convert(repr(x), float) == x
    else:
        with pytest.raises(typed.ParamError):
            typed.convert(x, float)
        with pytest.raises(typed.ParamError):
            typed.convert(repr(x), float)


WORDS = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters="-_."), min_size=1, max_size=8)


@given(st.lists(WORDS, max_size=5))
def test_a_list_written_as_text_reads_back_whatever_road(items):
    text = typed.show(items)
    assert typed.convert(text, list[str]) == items
    assert typed.convert(",".join(items), list[str]) == items
    assert typed.convert(items, list[str]) == items
    assert typed.convert(text, tuple[str, ...]) == tuple(items)


@given(st.lists(st.one_of(WORDS, st.lists(WORDS, min_size=1, max_size=3).map(typed.show)), max_size=5))
def test_top_level_commas_cut_and_bracketed_ones_do_not(parts):
    assert typed.split_top(",".join(parts)) == (parts or [""])


def test_the_other_types():
    assert typed.convert("yes", bool) is True and typed.convert(False, bool) is False
    for bad in ("maybe", 1, 0.0):
        with pytest.raises(typed.ParamError):
            typed.convert(bad, bool)
    assert typed.convert("none", Optional[int]) is None and typed.convert("3", Optional[int]) == 3
    assert typed.convert("line", Literal["paragraph", "line"]) == "line"
    with pytest.raises(typed.ParamError):
        typed.convert("page", Literal["paragraph", "line"])
    with pytest.raises(typed.ParamError):
        typed.convert(5, str)
    with pytest.raises(typed.ParamError):
        typed.split_top("a,[b,c")


@pytest.mark.parametrize("bad", NOT_INTEGERS)
def test_every_integer_parameter_of_a_rule_refuses_what_is_not_an_integer(bad):
    """Text (`--param`) and parsed values (TOML `--params`, `gate.toml`, a
    scenario's `stop_rule_params`) alike: a rule at threshold NaN never stops."""
    for spec, name in (("gemini-cli", "threshold"), ("round-cap", "max_rounds"), ("record", "patience"),
                       ("record", "min_new_shingles"), ("outcome-repeat", "page_repeats")):
        with pytest.raises(UserInputError) as info:
            build(spec, {name: bad})
        assert name in info.value.key
        with pytest.raises(UserInputError):
            choose(spec, {name: bad})


def test_one_list_separator_for_rule_parameters_and_novelty_fields():
    from imprint_core.novelty.config import parse_assignment
    assert typed.convert("a,b", tuple[str, ...]) == ("a", "b") == typed.convert("[a,b]", tuple[str, ...])
    assert typed.convert("a+b", tuple[str, ...]) == ("a+b",)       # `,` is the one separator
    assert parse_assignment("min_new_shingles=1,3") == ("min_new_shingles", [1, 3])
    rule = build("any", {"rules": "round-cap,gemini-cli"})
    assert [n for n, _ in rule.specs] == ["round-cap", "gemini-cli"]
    assert [n for n, _ in build("any", {"rules": "[round-cap,gemini-cli]"}).specs] == ["round-cap", "gemini-cli"]


def test_a_rule_file_s_annotations_type_its_parameters(tmp_path):
    f = tmp_path / "typed_rule.py"
    f.write_text("class R:\n    def observe(self, r): return None\n    def reset(self): pass\n"
                 "def make(limit: int = None, share: float = 0.5, names: list[str] = ()):\n    return R()\n")
    choice = choose(f"{f}:make", {"limit": "4", "share": 1, "names": "a,b"})
    assert dict(choice.params) == {"limit": 4, "share": 1.0, "names": ["a", "b"]}
    for bad in ({"limit": 2.5}, {"share": float("nan")}, {"limit": "x"}):
        with pytest.raises(UserInputError):
            choose(f"{f}:make", bad)


def test_a_type_is_named_with_the_article_its_sound_takes():
    # issue 44 item 11: "is not a int"
    class Interval:
        pass

    class Range:
        pass

    assert typed.type_name(int) == "an integer" and typed.type_name(Interval) == "an Interval"
    assert typed.type_name(Range) == "a Range" and typed.type_name(object) == "an object"
    assert typed.with_article("int") == "an int" and typed.with_article("dict") == "a dict"


def test_a_novelty_field_s_refusal_names_its_type_in_words():
    from harness.realruns.noveltyconfigs import parse_value
    with pytest.raises(UserInputError) as info:
        parse_value("min_new_shingles", "abc")
    assert info.value.describe() == ("--grid: min_new_shingles: 'abc' is not an integer (expected an integer)")
