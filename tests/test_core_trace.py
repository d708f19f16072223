"""Trace files: versioned header, whole lines with type/t/wall, tolerant and
strict reading."""
from __future__ import annotations

import io
import json

import pytest

from imprint_core import TRACE_FORMAT, TraceWriter, UserInputError, VirtualClock, read_trace

from helpers import make_run, read_tool, searches


def test_header_and_every_line_has_type_t_wall(tmp_path):
    clock = VirtualClock(5.0)
    path = tmp_path / "runs" / "a.jsonl"
    with TraceWriter(path, clock, meta={"scenario": "x"}) as tw:
        tw.emit("alpha", n=1)
        clock.advance(2.5)
        tw.emit("beta", items={1, 2}, raw=b"bytes")
    lines = path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["type"] == "header" and events[0]["format"] == TRACE_FORMAT and events[0]["scenario"] == "x"
    for e in events:
        assert {"type", "t", "wall"} <= set(e)
    assert [e["t"] for e in events] == [5.0, 5.0, 7.5]
    tr = read_trace(path)
    assert tr.header["format"] == TRACE_FORMAT and tr.warnings == []
    assert [e["type"] for e in tr.events] == ["alpha", "beta"]
    assert sorted(tr.of_type("beta")[0]["items"]) == [1, 2]


def test_a_real_run_traces_whole_lines_with_required_fields(tmp_path):
    path = tmp_path / "run.jsonl"
    r = make_run([searches("a"), searches("b"), "the answer"], [read_tool()], trace_target=path)
    r.run()
    r.trace.close()
    tr = read_trace(path)
    types = [e["type"] for e in tr.events]
    for needed in ("run_start", "request_reserved", "request_settled", "tool_call", "tool_result", "round_end",
                   "stop", "answer"):
        assert needed in types, needed
    for e in [tr.header, *tr.events]:
        assert isinstance(e["type"], str) and isinstance(e["t"], (int, float)) and isinstance(e["wall"], str)
    start = tr.of_type("run_start")[0]
    assert start["policy"] == "prefix-refund" and start["provider"] == "stub"
    assert start["settings"]["chat.research_timeout_sec"] == 300
    settled = tr.of_type("request_settled")[0]
    for k in ("estimated_prompt", "reserved", "charged", "refunded", "measured_prompt", "measured_output"):
        assert k in settled
    rounds = tr.of_type("round_end")
    assert [e["progress"] for e in rounds] == [True, True]
    assert all("patience_counter" in e for e in rounds)
    result = tr.of_type("tool_result")[0]
    assert result["status"] == "ok" and result["novelty"]["new_paragraphs"] == 1


def test_truncated_last_line_tolerated_and_reported(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, VirtualClock()) as tw:
        tw.emit("one")
        tw.emit("two", text="x" * 50)
    raw = path.read_bytes()
    path.write_bytes(raw[:-20])  # a crash in the middle of the last line
    tr = read_trace(path)
    assert [e["type"] for e in tr.events] == ["one"]
    assert len(tr.warnings) == 1 and f"{path}:3" in tr.warnings[0]


def test_malformed_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    with TraceWriter(path, VirtualClock()) as tw:
        tw.emit("one")
        tw.emit("two")
        tw.emit("three")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = '{"type": "two", "t": 0, \n'
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        read_trace(path)
    assert f"{path}:3" in str(info.value)
    assert info.value.file == str(path) and info.value.line == 3


def test_line_without_type_is_rejected(tmp_path):
    path = tmp_path / "notype.jsonl"
    with TraceWriter(path, VirtualClock()) as tw:
        tw.emit("one")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"t": 1}\n{"type": "after", "t": 2, "wall": ""}\n')
    with pytest.raises(UserInputError) as info:
        read_trace(path)
    assert f"{path}:3" in str(info.value)


def test_missing_header_or_wrong_version_rejected(tmp_path):
    p1 = tmp_path / "nohdr.jsonl"
    p1.write_text('{"type": "one", "t": 0, "wall": ""}\n', encoding="utf-8")
    with pytest.raises(UserInputError):
        read_trace(p1)
    p2 = tmp_path / "v9.jsonl"
    p2.write_text('{"type": "header", "format": "imprint-trace/9", "t": 0, "wall": ""}\n', encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        read_trace(p2)
    assert "imprint-trace/9" in str(info.value)


def test_stream_target_gets_one_whole_line_per_event():
    buf = io.StringIO()
    tw = TraceWriter(buf, VirtualClock())
    tw.emit("x", text="multi\nline\ntext")
    lines = buf.getvalue().split("\n")
    assert lines[-1] == "" and len(lines) == 3  # header, x, trailing newline
    assert json.loads(lines[1])["text"] == "multi\nline\ntext"
