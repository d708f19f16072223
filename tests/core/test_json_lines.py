"""JSON Lines read line by line (`files.json_lines`) and the readers built on it:
lines end at "\\n" only, so a string holding U+2028 (which the writers leave
unescaped, `ensure_ascii=False`) neither breaks its line nor moves the line
number that an error names."""
from __future__ import annotations

import json

import jsonlines
import pytest
from hypothesis import given, strategies as st

from harness.realruns.importers.rawfiles import load
from harness.realruns.roundlogs import parse_round_log
from imprint_core import UserInputError, VirtualClock, read_trace
from imprint_core.events import EmptyReply, ToolResultRecorded
from imprint_core.files import NestedTooDeep, json_lines
from imprint_core.trace import TraceWriter

# Every character str.splitlines ends a line at, besides "\n" and "\r".
LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
SEP = "\u2028"
HEADER = json.dumps({"format": "imprint-rounds/1", "source": "test", "labels": {}})


def _round(n: int, result: str) -> str:
    call = {"tool": "search", "args": {"q": "a"}, "kind": "read", "status": "ok", "result": result}
    return json.dumps({"round": n, "calls": [call]}, ensure_ascii=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters() | st.sampled_from(LINE_BREAKS)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8)


@given(st.lists(st.one_of(json_values, st.just(" ")), max_size=6))
def test_every_written_value_comes_back_numbered_by_its_line(items):
    """Values written one a line as the writers write them (blank lines
    between) come back with their own line numbers, whatever line-break
    characters their strings hold."""
    lines = [item if item == " " else json.dumps(item, ensure_ascii=False) for item in items]
    got = list(json_lines("\n".join(lines) + "\n"))
    assert got == [(no, item) for no, item in enumerate(items, start=1) if item != " "]
    assert list(json_lines(("\n".join(lines)).encode("utf-8"))) == got


def test_a_broken_line_is_named_with_the_decoder_s_error_as_its_cause():
    text = json.dumps({"text": f"one{SEP}two"}, ensure_ascii=False) + "\n\n{bad\n"
    with pytest.raises(jsonlines.InvalidLineError) as err:
        list(json_lines(text))
    assert err.value.lineno == 3 and err.value.line == "{bad"
    assert isinstance(err.value.__cause__, json.JSONDecodeError) and err.value.__cause__.colno == 2


def test_a_line_nested_past_the_recursion_limit_is_an_invalid_line_not_a_crash():
    with pytest.raises(jsonlines.InvalidLineError) as err:
        list(json_lines("{}\n" + "[" * 100_000 + "]" * 100_000 + "\n"))
    assert err.value.lineno == 2 and isinstance(err.value.__cause__, NestedTooDeep)


def test_a_round_log_with_u2028_in_a_result_reads_and_names_the_right_broken_line():
    ok = "\n".join([HEADER, _round(1, f"first{SEP}second"), _round(2, "plain")]) + "\n"
    log = parse_round_log(ok, "log.jsonl")
    assert [r.calls[0].result for r in log.rounds] == [f"first{SEP}second", "plain"]
    broken = "\n".join([HEADER, _round(1, f"first{SEP}second"), "{round: 2}"]) + "\n"
    with pytest.raises(UserInputError) as err:
        parse_round_log(broken, "log.jsonl")
    assert err.value.line == 3 and err.value.message == "not valid JSON: Expecting property name enclosed in " \
                                                        "double quotes at column 2"


def test_a_round_log_line_that_is_no_object_is_named_after_a_u2028():
    text = "\n".join([HEADER, _round(1, f"a{SEP}b"), "[1]"]) + "\n"
    with pytest.raises(UserInputError) as err:
        parse_round_log(text, "log.jsonl")
    assert (err.value.line, err.value.message) == (3, "each line must be a JSON object")


def test_a_raw_jsonl_file_with_u2028_reads_and_names_the_right_broken_line(tmp_path):
    good = tmp_path / "run.jsonl"
    good.write_text(json.dumps({"m": f"x{SEP}y"}, ensure_ascii=False) + "\n\n" + json.dumps({"m": 2}) + "\n",
                    encoding="utf-8")
    assert load(good) == [{"m": f"x{SEP}y"}, {"m": 2}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"m": f"x{SEP}y"}, ensure_ascii=False) + "\n{\"m\": \n", encoding="utf-8")
    with pytest.raises(UserInputError) as err:
        load(bad)
    assert err.value.line == 2 and err.value.message.startswith("the JSON ends early")


def test_a_trace_with_u2028_in_a_tool_result_reads_and_names_the_right_broken_line(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, VirtualClock()) as tw:
        tw.write(ToolResultRecorded(round=1, call_id="c1", tool="search", kind="read", status="ok", chars=3,
                                    after_deadline=False, started=0.0, finished=0.0, arguments={"q": "a"},
                                    text=f"a{SEP}b"))
        tw.write(EmptyReply(round=1, chars=0))
    assert SEP in path.read_text(encoding="utf-8")  # written unescaped
    assert read_trace(path).events[0].text == f"a{SEP}b"
    path.write_text(path.read_text(encoding="utf-8") + "{oops\n" + path.read_text(encoding="utf-8").split("\n")[2]
                    + "\n", encoding="utf-8")
    with pytest.raises(UserInputError) as err:
        read_trace(path)
    assert err.value.line == 4 and err.value.message.startswith("not a trace line: Expecting property name")
    cut = tmp_path / "cut.jsonl"
    cut.write_text(path.read_text(encoding="utf-8").split("{oops")[0] + '{"type": "empty_re', encoding="utf-8")
    tr = read_trace(cut)
    assert len(tr.events) == 2 and tr.warnings == [f"{cut}:4: last line is incomplete (the run was interrupted); "
                                                   f"ignored"]
