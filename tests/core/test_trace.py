"""Trace files: typed events, versioned header, whole lines with type/t/wall,
tolerant and strict reading, a writer that holds nothing."""
from __future__ import annotations

from imprint_core.events import call_verdicts
import dataclasses
import io
import json

import pytest
from hypothesis import given, strategies as st

from imprint_core import (EVENT_TYPES, TRACE_FORMAT, EventLog, TraceWriter, UserInputError, VirtualClock,
                          event_from_line, read_trace)
from imprint_core.budget import RequestRecord
from imprint_core.events import Answer, EmptyReply, Fallback, Header, RequestSettled, RoundEnd

from helpers import make_run, read_tool, searches


def _write(path, *events, clock=None, meta=None):
    with TraceWriter(path, clock or VirtualClock(), meta=meta) as tw:
        for e in events:
            tw.write(e)


def test_header_and_every_line_has_type_t_wall(tmp_path):
    clock = VirtualClock(5.0)
    path = tmp_path / "runs" / "a.jsonl"
    with TraceWriter(path, clock, meta={"scenario": "x"}) as tw:
        tw.write(EmptyReply(round=1, chars=0))
        clock.advance(2.5)
        tw.write(Fallback(reason="why", evidence=2))
    lines = path.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["type"] == "header" and events[0]["format"] == TRACE_FORMAT and events[0]["scenario"] == "x"
    for e in events:
        assert {"type", "t", "wall"} <= set(e)
    assert [e["t"] for e in events] == [5.0, 5.0, 7.5]
    tr = read_trace(path)
    assert tr.header.format == TRACE_FORMAT and tr.header.meta == {"scenario": "x"} and tr.warnings == []
    assert [type(e) for e in tr.events] == [EmptyReply, Fallback]
    assert tr.of_type(Fallback)[0].evidence == 2 and tr.of_type("fallback")[0].t == 7.5


def test_the_writer_keeps_no_events_and_a_log_collects_them():
    tw = TraceWriter(None, VirtualClock())
    assert not hasattr(tw, "events")
    log = EventLog(tw)
    tw.write(Answer(mode="answered", text="x"))
    assert [e.TYPE for e in log.events] == ["header", "answer"] and log.of_type(Answer)[0].text == "x"


def test_a_real_run_traces_whole_lines_with_required_fields(tmp_path):
    path = tmp_path / "run.jsonl"
    r = make_run([searches("a"), searches("b"), "the answer"], [read_tool()], trace_target=path)
    r.run()
    r.trace.close()
    tr = read_trace(path)
    types = [e.TYPE for e in tr.events]
    for needed in ("run_start", "request_reserved", "request_settled", "tool_call", "tool_result", "round_end",
                   "stop", "answer"):
        assert needed in types, needed
    for e in [tr.header, *tr.events]:
        assert isinstance(e.t, (int, float)) and isinstance(e.wall, str)
    # What was read back equals what the run wrote, event for event.
    assert [e.to_dict() for e in tr.events] == [e.to_dict() for e in r.log.events[1:]]
    start = tr.of_type("run_start")[0]
    assert start.policy == "prefix-refund" and start.provider == "stub"
    assert start.settings["chat.research_timeout_sec"] == 300
    settled = tr.of_type(RequestSettled)[0]
    line = settled.to_dict()
    for k in ("estimated_prompt", "reserved", "charged", "refunded", "measured_prompt", "measured_output", "round"):
        assert k in line
    assert settled.charged == settled.record.charged == line["charged"]
    rounds = tr.of_type(RoundEnd)
    assert [e.progress for e in rounds] == [True, True]
    result = tr.of_type("tool_result")[0]
    assert result.status == "ok" and call_verdicts(tr.events)[result.call_id]["new_paragraphs"] == 1


_plain = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=20))


@given(st.sampled_from(sorted(EVENT_TYPES)), st.data())
def test_every_event_type_round_trips_through_its_line(name, data):
    cls = EVENT_TYPES[name]
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in ("t", "wall"):
            continue
        if f.name == "record":
            kwargs["record"] = RequestRecord(id=1, role="coordinator", context_id="c", policy="reserve", outcome="ok",
                                             estimated_prompt=3, max_output=4, reserved=7, charged=7, refunded=0)
        elif f.name == "meta":
            kwargs["meta"] = data.draw(st.dictionaries(st.sampled_from(["scenario", "server"]), st.text(max_size=5)))
        else:
            kwargs[f.name] = data.draw(_plain)
    event = cls(**kwargs).stamped(1.5, "w")
    line = json.loads(json.dumps(event.to_dict()))
    assert line["type"] == name and event_from_line(line) == event


def test_truncated_last_line_tolerated_and_reported(tmp_path):
    path = tmp_path / "t.jsonl"
    _write(path, EmptyReply(round=1, chars=0), Answer(mode="fallback", text="x" * 50))
    raw = path.read_bytes()
    path.write_bytes(raw[:-20])  # a crash in the middle of the last line
    tr = read_trace(path)
    assert [e.TYPE for e in tr.events] == ["empty_reply"]
    assert len(tr.warnings) == 1 and f"{path}:3" in tr.warnings[0]


def test_malformed_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    _write(path, *(EmptyReply(round=i, chars=0) for i in range(3)))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = '{"type": "empty_reply", "t": 0, \n'
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        read_trace(path)
    assert f"{path}:3" in str(info.value)
    assert info.value.file == str(path) and info.value.line == 3


@pytest.mark.parametrize("line, key", [
    ('{"t": 1}', None),                                              # no type
    ('{"type": "teleport", "t": 2, "wall": ""}', "type"),           # a type this version does not know
    ('{"type": "round_end", "t": 2, "wall": "", "round": 1}', "kind"),  # a field the reader relies on
])
def test_a_bad_line_is_rejected_naming_line_and_key(tmp_path, line, key):
    path = tmp_path / "bad.jsonl"
    _write(path, EmptyReply(round=1, chars=0))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n" + '{"type": "empty_reply", "t": 2, "wall": "", "round": 2, "chars": 0}\n')
    with pytest.raises(UserInputError) as info:
        read_trace(path)
    assert f"{path}:3" in str(info.value) and info.value.key == key


def test_missing_header_or_wrong_version_rejected(tmp_path):
    p1 = tmp_path / "nohdr.jsonl"
    p1.write_text('{"type": "empty_reply", "t": 0, "wall": "", "round": 1, "chars": 0}\n', encoding="utf-8")
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
    tw.write(Answer(mode="answered", text="multi\nline\ntext"))
    lines = buf.getvalue().split("\n")
    assert lines[-1] == "" and len(lines) == 3  # header, answer, trailing newline
    assert json.loads(lines[1])["text"] == "multi\nline\ntext"
    assert isinstance(tw.header, Header)


def test_values_in_a_rule_s_notes_are_written_by_their_declared_type():
    """The project's records and verdicts write as their dicts, enums as
    their values, tuples and sets as lists, bytes as text; any other object
    as its str, even one with a `to_dict` of its own (nothing is probed)."""
    import enum

    from imprint_core.novelty.rule import EvidenceVerdict
    from imprint_core.types import ToolCall

    class Level(enum.Enum):
        HIGH = 3

    class Foreign:
        def to_dict(self):
            return {"probed": True}

        def __str__(self):
            return "foreign"

    record = RequestRecord(id=1, role="worker", context_id="w1-0", policy="reserve", outcome="ok",
                           estimated_prompt=10, max_output=5, reserved=15, charged=15, refunded=0)
    verdict = EvidenceVerdict(status="new", paragraphs=2, new_paragraphs=1, new_shingles=4)
    call = ToolCall("c1", "search", {"q": "a"})
    notes = {"record": record, "verdict": verdict, "call": call,
             "level": Level.HIGH, "pair": (1, 2), "raw": "é".encode() + b"\xff", "foreign": Foreign()}
    buf = io.StringIO()
    TraceWriter(buf, VirtualClock()).write(RoundEnd(round=1, kind="read", rule="mine", rule_notes=notes))
    line = json.loads(buf.getvalue().splitlines()[1])["rule_notes"]
    assert line["record"] == record.to_dict() and line["verdict"] == verdict.to_dict()
    assert line["call"] == call.to_dict() and line["call"]["arguments"] == {"q": "a"}
    assert (line["level"], line["pair"], line["raw"], line["foreign"]) == (3, [1, 2], "é\ufffd", "foreign")
