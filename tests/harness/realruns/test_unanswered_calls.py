"""A tool call the run went on after without its result: the OTel importer
and the openai-chat importer agree that it is `empty` (a read that returned
nothing, as the record calls it; a write `ok`), count such calls in the
header, and so stop at the same round (issue 44 item 11)."""
from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main
from harness.realruns.importers.convert import import_file
from harness.realruns.roundlogs import replay

GENAI = Path(__file__).resolve().parents[2] / "fixtures" / "interop" / "otel" / "genai.otlp.jsonl"


def blind_chat(path: Path) -> Path:
    """`blind` of the GenAI fixture as an OpenAI transcript: ten different searches, no tool message
    with a result, then the answer; and a write without its result."""
    msgs = [{"role": "user", "content": "find the probe"}]
    for i in range(10):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "search",
                                                             "arguments": json.dumps({"query": f"probe {i}"})}}]})
    msgs.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": "w", "type": "function", "function": {"name": "write_note", "arguments": '{"text": "done"}'}}]})
    msgs.append({"role": "assistant", "content": "I could not find it."})
    path.write_text(json.dumps(msgs))
    return path


def test_a_call_without_its_result_is_empty_in_openai_chat_as_in_otel(tmp_path: Path) -> None:
    blind = next(log for log in import_file(GENAI, "otel") if log.labels["results_missing"] == 10)
    chat, = import_file(blind_chat(tmp_path / "blind.json"), "openai-chat")
    otel_statuses = [c.status for r in blind.rounds for c in r.calls]
    chat_statuses = [(c.tool, c.status) for r in chat.rounds for c in r.calls]
    assert otel_statuses == ["empty"] * 10
    assert chat_statuses == [("search", "empty")] * 10 + [("write_note", "ok")]    # was `error` each
    assert chat.labels["results_missing"] == 11 and "11 call(s) have no tool message" in chat.labels["results_note"]
    assert replay(chat).stop_round == replay(blind).stop_round == 9


def test_the_note_is_in_the_converted_header(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["import", str(blind_chat(tmp_path / "blind.json")), "--format", "openai-chat", "--out", str(out)]) == 0
    header = json.loads(next(out.rglob("*.jsonl")).read_text().splitlines()[0])
    assert header["labels"]["results_missing"] == 11
