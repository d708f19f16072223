"""The one converter of parameter values (`imprint_core.params`, issue 45
item 6): text or parsed values into typed values, the same checks on every
road, one list separator."""
from __future__ import annotations

import enum
import math
from typing import Any, Literal, Optional

import pytest
from hypothesis import example, given, strategies as st

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


@pytest.mark.parametrize("typ, words", [
    (Any, "any value"), (bool, "true or false"), (int, "an integer"), (float, "a finite number"), (str, "text"),
    (Optional[int], "an integer or none"), (None | float, "none or a finite number"),
    (Literal["paragraph", "line"], "one of paragraph, line"),
    (list[int], "a list (an integer each), e.g. a,b"), (tuple[str, ...], "a list (text each), e.g. a,b"),
    (list, "a list (any value each), e.g. a,b"),
    (3, "a 3"),     # an annotation that is no type (a rule file may write `limit: 3`) is named by its text
])
def test_expected_names_each_kind_of_type_in_words(typ, words):
    assert typed.type_name(typ) == words


def test_an_article_goes_by_the_first_letter_s_sound():
    assert typed.with_article("Xylem") == "a Xylem" and typed.with_article("Object") == "an Object"


NUMBERS = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False))


@given(st.one_of(NUMBERS, st.lists(st.integers(-99, 99), max_size=4), st.lists(st.floats(-9, 9), max_size=4),
                 st.lists(st.integers(-99, 99), max_size=4).map(tuple), st.lists(st.booleans(), max_size=3)))
@example([])
@example(())
@example([7])
@example((2.5,))
@example(True)
@example(False)
def test_a_default_shown_as_text_reads_back_as_itself_by_the_type_it_gives(default):
    """A rule without annotations types its parameters by their defaults
    (`--param sizes=3,4` for a default `[1]` is [3, 4], not ['3', '4'])."""
    back = typed.convert(typed.show(default), typed.type_of_default(default))
    assert back == default and type(back) is type(default)


def test_a_list_default_types_its_items_by_its_first_and_refuses_others(tmp_path):
    f = tmp_path / "untyped_rule.py"
    f.write_text("class R:\n    def observe(self, r): return None\n    def reset(self): pass\n"
                 "def make(sizes=[1], shares=(0.5,), names=[], strict=False, loud=True):\n    return R()\n")
    choice = choose(f"{f}:make", {"sizes": "3,4", "shares": "2", "names": "a,b"})
    assert dict(choice.params) == {"sizes": [3, 4], "shares": (2.0,), "names": ["a", "b"]}
    with pytest.raises(UserInputError):
        choose(f"{f}:make", {"sizes": "3,x"})
    # the default is shown in the words `expected` uses for the type
    for name, default in (("strict", "false"), ("loud", "true")):
        with pytest.raises(UserInputError) as info:
            choose(f"{f}:make", {name: "maybe"})
        assert info.value.expected == f"true or false, like the default {default}"


def test_a_value_none_reads_in_any_case_and_in_either_order_of_the_union():
    for text in ("none", "null", "NULL", " None "):
        assert typed.convert(text, Optional[int]) is None
    assert typed.convert("3", None | int) == 3 and typed.convert(None, None | int) is None


def test_a_union_takes_the_first_of_its_types_that_accepts_the_value():
    assert typed.convert("3", int | float) == 3 and typed.convert("2.5", int | float) == 2.5
    assert typed.convert("abc", int | str) == "abc"
    with pytest.raises(typed.ParamError):
        typed.convert("abc", int | float)


def test_a_literal_takes_its_own_values_parsed_or_written():
    assert typed.convert(2, Literal[1, 2]) == 2
    two = typed.convert("2", Literal[1, 2])
    assert two == 2 and type(two) is int
    for bad in (True, "3", 3):   # True == 1, yet it is no choice of an integer literal
        with pytest.raises(typed.ParamError):
            typed.convert(bad, Literal[1, 2])


def test_list_items_take_the_item_type_whatever_road():
    assert typed.convert("3,4", list[int]) == [3, 4] == typed.convert(["3", 4], list[int])
    assert typed.convert("[1,2]", tuple[int, ...]) == (1, 2)
    for bad in ("3,x", ["3", 2.5], 5):
        with pytest.raises(typed.ParamError):
            typed.convert(bad, list[int])
    # bracketed items stay whole, the outer brackets of `[a,b],[c]` are two lists' own
    assert typed.convert("[a,b],[c]", list[str]) == ["[a,b]", "[c]"]


def test_brackets_nest_and_an_unbalanced_one_is_named():
    from imprint_core.novelty.config import parse_assignment
    assert typed.split_top("[[a,b],c],d") == ["[[a,b],c]", "d"]
    for values, why in (("1],3", "closes a bracket it never opened"), ("[1,3", "leaves a bracket open")):
        with pytest.raises(typed.ParamError):
            typed.split_top(values)
        with pytest.raises(UserInputError) as info:
            parse_assignment(f"min_new_shingles={values}")
        assert info.value.describe() == f"--grid: {values!r} {why} (expected balanced [ and ])"


@pytest.mark.parametrize("words, value", [(typed.TRUE_WORDS, True), (typed.FALSE_WORDS, False)])
def test_a_yes_or_no_word_reads_in_any_case(words, value):
    for w in words:
        assert typed.convert(w, bool) is value and typed.convert(f" {w.upper()} ", bool) is value


def test_a_number_parameter_takes_no_yes_no_or_nothing():
    for bad in (True, None, "abc", [1.0]):
        with pytest.raises(typed.ParamError):
            typed.convert(bad, float)


class Unit(enum.Enum):
    PARAGRAPH = "paragraph"
    LINE = "line"


def test_an_enum_reads_by_name_or_value_and_a_refusal_lists_the_names():
    for v in ("LINE", "line", " line ", Unit.LINE):
        assert typed.convert(v, Unit) is Unit.LINE
    with pytest.raises(typed.ParamError) as info:
        typed.convert("page", Unit)
    assert info.value.message == "'page' is not one of PARAGRAPH, LINE"
    with pytest.raises(typed.ParamError):
        typed.convert(1, Unit)


def test_a_structured_value_may_be_written_as_json():
    assert typed.convert('{"a": [1, 2]}', dict) == {"a": [1, 2]} == typed.convert({"a": [1, 2]}, dict)
    for bad in ("[1, 2]", "{", 3):
        with pytest.raises(typed.ParamError):
            typed.convert(bad, dict)
