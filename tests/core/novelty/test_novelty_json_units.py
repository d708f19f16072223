"""A JSON array's units on the compiled path (compiled.json_units): the
same units as the pure path's json.loads and json.dumps(item,
ensure_ascii=False, sort_keys=True), and the same empty-read answer
(echo.evidence_free reads what json_units saw of the leaves instead of a
parse), whatever the spacing, key order, escapes and numbers' spelling;
text it does not read exactly (not JSON, NaN, an overflowing float, a
duplicate key, a lone surrogate, a huge int, deep nesting) goes to the
Python path, which decides. Any other text's paragraphs
(compiled.paragraphs) are the pure path's too.
"""
from __future__ import annotations

import json
import math
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from imprint_core.novelty import segment
from imprint_core.novelty._fast import accel
from imprint_core.novelty.echo import Echoes, evidence_free

from test_novelty_compiled import PATHS, needs_compiled, on_path

_STR = st.text(max_size=12) | st.sampled_from(
    ["", "no results", "None", "N/A", "\x00", "\x1f\x7f", '"\\/', "\b\f\n\r\t", "\U0001f600", "\u2028", "é",
     "capital of spain", "Capital of  Spain", "\ud800"])
_FLOAT = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.0, 1e300, 5e-324, 1e16, 1e22, 0.1])
_INT = st.integers() | st.sampled_from([0, 7, 10**30, -(10**639), 10**640])
_LEAF = st.none() | st.booleans() | _INT | _FLOAT | _STR
# An object is a list of pairs: keys from a small alphabet repeat (json.loads keeps a key's last value).
_VALUE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=4).map(lambda v: ("list", v))
                      | st.lists(st.tuples(st.text("abc\\\"é\U0001f600\x01", max_size=3) | _STR, inner), max_size=4)
                      .map(lambda v: ("dict", v)), max_leaves=12)


def _spelled(value, rnd: random.Random) -> str:
    """JSON text of `value`, spelled one of the ways (spacing, escapes, a
    float's form) that json.loads reads alike, as rnd picks."""
    ws = "".join(rnd.choice(" \t\n\r") for _ in range(rnd.choice((0, 0, 1, 2))))
    if isinstance(value, tuple) and value[0] == "list":
        return ws + "[" + ",".join(_spelled(v, rnd) + ws for v in value[1]) + ws + "]"
    if isinstance(value, tuple):
        return ws + "{" + ",".join(_spelled(k, rnd) + ws + ":" + _spelled(v, rnd) for k, v in value[1]) + ws + "}"
    if isinstance(value, str):
        return ws + '"' + "".join(rnd.choice(_forms(c)) for c in value) + '"'
    if isinstance(value, float):
        return ws + rnd.choice([repr(value), f"{value:.17g}", f"{value:E}", f"{value:.3e}"])
    return ws + json.dumps(value)


def _forms(c: str) -> list[str]:
    """c as a JSON string may hold it: raw where it may be, or escaped."""
    if ord(c) > 0xFFFF:      # a surrogate pair
        hi, lo = divmod(ord(c) - 0x10000, 0x400)
        forms = [f"\\u{0xD800 + hi:04x}\\u{0xDC00 + lo:04X}"]
    else:
        forms = [f"\\u{ord(c):04x}", f"\\u{ord(c):04X}"]
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if c in short:
        forms.append(short[c])
    if c >= " " and c not in '"\\':
        forms += [c] * 3
    return forms


def _both(text: str, args: dict | None) -> dict:
    """What each path gives: the units, and the empty-read answer right after segment()."""
    got = {}
    for path in PATHS:
        with on_path(path):
            units = segment(text)
            echoes = Echoes(args, "default") if args else None
            got[path] = (units, evidence_free(text, echoes))
    return got


def _python_reads(text: str) -> bool:
    """Whether json_units must read the text itself: nothing the Python path must decide."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, list):
        return False

    def ok(v, depth):
        if isinstance(v, float):
            return math.isfinite(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return len(str(abs(v))) <= 640
        if isinstance(v, str):
            return not any(0xD800 <= ord(c) <= 0xDFFF for c in v)
        if isinstance(v, list):
            return depth < 100 and all(ok(i, depth + 1) for i in v)
        if isinstance(v, dict):
            return depth < 100 and all(ok(k, depth) and ok(i, depth + 1) for k, i in v.items())
        return True
    return ok(value, 1)


@needs_compiled
@hsettings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_json_arrays_units_and_empty_read_are_the_pure_paths(data):
    items = data.draw(st.lists(_VALUE, max_size=5))
    text = _spelled(("list", items), random.Random(data.draw(st.integers(0, 2**32))))
    leaves = [v for v in items if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    args = data.draw(st.none() | st.fixed_dictionaries({"q": st.sampled_from(leaves or ["capital of spain"]),
                                                        "page": st.sampled_from(leaves or [7])}))
    got = _both(text, args)
    assert got["compiled"] == got["pure"]
    dups = '"' in text and _has_duplicate_keys(text)
    if not dups and _python_reads(text.strip()):
        assert accel.built.json_units(text.strip()) is not None   # read in C, not handed back


def _has_duplicate_keys(text: str) -> bool:
    found = []

    def pairs(ps):
        keys = [k for k, _ in ps]
        found.append(len(keys) != len(set(keys)))
        return dict(ps)
    try:
        json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return False
    return any(found)


EDGES = [
    "[]", "[ ]", "[\n\t\r ]", "[[]]", "[{}]", '[""]', '["", null, [], {}]', "[null]", "[0, 0.0, -0, -0.0, -0e0]",
    "[1e5, 1E5, 1e+5, 1.5e-5, 1e22, 1e16, 123456789012345678901234567890.5, 5e-324, 1e-400, -1e-400]",
    "[9007199254740993, -9223372036854775809, 18446744073709551616]",
    "[0.0001, 0.00001, 0.000123456789012345, 1234567890123456.0, 123456789012345.6, 99999999999999.99, 100.000]",
    "[-0.000, 0.1000000000000000055511151231257827, 0.30000000000000004, 9007199254740993.0, 1.50, -12.5]",
    "[1" + "0" * 639 + "]", "[1" + "0" * 640 + "]", "[-1" + "0" * 639 + "]",
    "[1e309]", "[-1e309]", "[NaN]", "[Infinity]", "[-Infinity]", "[nan]", "[inf]",
    '[{"b": 1, "a": 2}]', '[{"a": 1, "a": 2}]', '[{"a": {"c": 1, "b": [{"z": 0, "y": 1}]}, "A": 2}]',
    '[{"\\u00e9": 1, "e": 2, "\\ud83d\\ude00": 3, "\\uffff": 4}]', '[{"a\\"": 1, "a#": 2, "a\\\\": 3}]',
    '["\\u0000\\u001f\\u007f\\u0008\\b\\f\\n\\r\\t\\/\\"\\\\"]', '[{"k": "\\u0000\\u001F\\u0008\\/"}]',
    '["\\ud83d\\ude00", "\\uD83D\\uDE00"]', '["\\ud83d"]', '["\\ude00"]', '["\\ud83d\\u0041"]', '["\\ud83d x"]',
    '["\\u12"]', '["\\u12G4"]', '["\\x41"]', '["a\tb"]', '["a\nb"]', '["\x7f"]', '["\u2028"]',
    "[1,]", "[,1]", "[1 2]", "[01]", "[1.]", "[.5]", "[1e]", "[1e+]", "[-]", "[+1]", "[- 1]", "[tru]", "[nul]",
    "[true, false, null]", "[truex]", '[{"a" 1}]', '[{"a": 1,}]', '[{1: 2}]', '[{"a": 1} ]', "[1] [2]", "[1]]",
    '["unterminated]', "[\u00a01]", "[1\u3000]", '[{"a":1}\n,\t"b"\r]',
    "[" * 99 + "]" * 99, "[" * 100 + "]" * 100, "[" * 101 + "]" * 101, "[" * 5000 + "]" * 5000,
    '[{"results": [], "took": 12}]', '[{"status": "ok", "items": [], "request_id": "x1"}]',
    '[{"items": ["no results"]}, {"n": 0}]', '[0, 1.5, true, []]', '[0, 1.5, true]', '["no results", ""]',
    '[{"q": "capital of spain", "page": 7, "hits": []}]', '[{"q": "capital of spain"}, "no results", 7, "x"]',
]


@needs_compiled
@pytest.mark.parametrize("text", EDGES)
@pytest.mark.parametrize("args", [None, {"q": "capital of spain", "page": 7}])
def test_edges_read_alike_on_both_paths(text, args):
    got = _both(text, args)
    assert got["compiled"] == got["pure"]


@needs_compiled
def test_what_json_units_reads_and_what_it_hands_back():
    read = accel.built.json_units
    assert read('[{"b": 1.0, "a": [-0, 1e5, "x\\u00e9\\n"]}, "h\\u00e9", 3]') == (
        ['{"a": [0, 100000.0, "xé\\n"], "b": 1.0}', "hé", "3"], 1.0, False, False)
    assert read('[null, "", {"a": []}]') == (["null", "", '{"a": []}'], None, True, True)
    assert read("[0, [true]]")[1:] == (0, True, False)
    for text in ("[NaN]", "[1e400]", '[{"a": 1, "a": 2}]', '["\\ud800"]', "[1" + "0" * 640 + "]",
                 "[" * 101 + "]" * 101, "[1,]", "[1] x", "[\x00]"):
        assert read(text) is None, text


@needs_compiled
@hsettings(max_examples=300, deadline=None)
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,17})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?", fullmatch=True)
       | st.from_regex(r"-?0\.0{0,5}[1-9][0-9]{0,16}0{0,3}", fullmatch=True))
def test_a_number_is_written_as_json_dumps_writes_what_json_loads_reads(text):
    # floats written without an exponent take a short cut (their text, trailing zeros dropped) where
    # they have at most 15 significant digits and repr writes no exponent: both edges are drawn
    got = accel.built.json_units(f"[{text}]")
    value = json.loads(text)
    if isinstance(value, float) and not math.isfinite(value):
        assert got is None
    else:
        assert got == ([json.dumps(value)], value, True, False)


@needs_compiled
@hsettings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("\n\n\n  \t\t\r\x0b\x85\u2028\u3000ab\xe9\U0001f600[]\""), max_size=30)
       | st.text(max_size=30))
def test_a_texts_paragraphs_are_the_pure_paths(text):
    got = {}
    for path in PATHS:
        with on_path(path):
            got[path] = segment(text)
    assert got["compiled"] == got["pure"]
    assert accel.built.paragraphs(text) == [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def test_evidence_free_reads_segments_leaves_not_another_texts():
    """The compiled path leaves evidence_free what it saw of the leaves
    (segmentation.last_parsed gives a Leaves), for that text only."""
    from imprint_core.novelty import segmentation
    full, empty = '[{"title": "a real hit", "items": [1]}]', '[{"title": "", "items": []}]'
    for path in PATHS:
        with on_path(path):
            segment(full)
            assert evidence_free(empty, None) and not evidence_free(full, None)
            seen = segmentation.last_parsed(full, None)
            assert seen == (segmentation.Leaves("a real hit", False, False) if path == "compiled"
                            else json.loads(full))
            assert segmentation.last_parsed(empty, None) is None
