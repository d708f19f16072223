"""inspect_ai logs and OpenTelemetry traces in (`imprint import --format
inspect|otel`), our traces out (`imprint export-otel`), and back.

The fixtures under tests/fixtures/interop/ were written by the real tools
(tests/fixtures/interop/make_inspect.py, make_otel.py); every stop asserted
here is counted by hand from the scripts' plans, with the rule's default
patience (9) unless a test says otherwise.
"""
from __future__ import annotations

import ast
import copy
import gzip
import inspect as pyinspect
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.cli import main
from harness.realruns import otelexport
from harness.realruns.importers import convert, otel, otlp, rawfiles, toolkinds
from harness.realruns.importers import inspect as inspect_importer
from harness.realruns.importers.convert import import_file, render_round_log
from harness.realruns.roundlogs import parse_round_log, replay, trace_to_round_log
from harness.realruns.runfiles import load_runs
from imprint_core.clock import VirtualClock
from imprint_core.events import RoundEnd, Stopped, ToolCallStarted, ToolResultRecorded
from imprint_core.trace import TraceWriter, read_trace

REPO = Path(__file__).resolve().parents[3]
FIX = REPO / "tests" / "fixtures" / "interop"
EVAL = FIX / "inspect" / "research.eval"
GENAI = FIX / "otel" / "genai.otlp.jsonl"
OPENINFERENCE = FIX / "otel" / "openinference.otlp.jsonl"


def _runs(path: Path) -> dict[str, object]:
    runs, warnings = load_runs([path])
    assert not warnings
    return {r.log.labels.get("conversation_id") or Path(r.log.path).stem: r.log for r in runs}


def _shape(log) -> list[list[tuple[str, str, str]]]:
    return [[(c.tool, c.kind, c.status) for c in r.calls] for r in log.rounds]


# ---- the fixtures, and the stops a hand count predicts ----------------------------------------------

def test_the_inspect_log_gives_one_round_log_per_sample_and_epoch_with_its_score():
    logs = {Path(log.path).stem: log for log in import_file(EVAL)}
    assert sorted(logs) == ["loop-1", "loop-2", "steady-1", "steady-2"]
    for epoch in (1, 2):
        loop, steady = logs[f"loop-{epoch}"], logs[f"steady-{epoch}"]
        assert loop.labels["epoch"] == epoch and loop.labels["instance_id"] == "loop"
        # the `includes` scorer: the loop's answer holds its target (42), the steady one's does not (7)
        assert (loop.labels["correct"], loop.labels["reward"], loop.labels["scores"]) == (True, 1.0, {"includes": "C"})
        assert (steady.labels["correct"], steady.labels["reward"]) == (False, 0.0)
        assert loop.labels["model"] == "mockllm/model" and loop.labels["log_status"] == "success"
        assert _shape(loop) == [[("search", "read", "ok")]] * 13
        assert _shape(steady) == [[("read_file", "read", "ok")], [("search", "read", "empty")],
                                  [("read_file", "read", "error")], [("write_note", "write", "ok")],
                                  [("read_file", "read", "ok")], [("read_file", "read", "ok")],
                                  [("read_file", "read", "ok")]]
        # the missing file's ToolError: no text in the tool message, so its type and message stand as the result
        assert "no such file: notes/missing.txt" in steady.rounds[2].calls[0].result
        assert steady.rounds[0].calls[0].args == {"path": "notes/part1.txt"}


@pytest.mark.parametrize("value, correct, reward", [
    ("C", True, 1.0), ("I", False, 0.0), ("P", None, 0.5), ("N", None, 0.0), ("maybe", None, None),
    (True, True, 1.0), (False, False, 0.0), (0.25, None, 0.25), (3, None, 3.0), ({"acc": 1}, None, None),
])
def test_the_first_scorer_gives_correct_and_reward(value, correct, reward):
    from types import SimpleNamespace
    scores = {"first": SimpleNamespace(value=value), "second": SimpleNamespace(value="I")}
    got = inspect_importer._score_labels(scores)
    assert (got["correct"], got["reward"]) == (correct, reward)
    assert got["scores"] == {"first": value, "second": "I"}


@pytest.mark.parametrize("patience, loop_stop, steady_stop", [
    # loop: round 1 finds something, rounds 2.. repeat it: the counter reaches `patience` at round 1 + patience.
    (9, 10, None), (3, 4, None),
    # steady: 1 new, 2 empty (1), 3 error (2), 4 write (neither counts nor resets: 2), 5 new (0),
    # 6 the same file again (1), 7 new (0): never 3 in a row; with patience 2 round 3 stops it.
    (2, 3, 3),
])
def test_inspect_replay_stops_where_the_hand_count_says(patience, loop_stop, steady_stop):
    runs = {Path(r.log.path).stem: r.log for r in load_runs([EVAL])[0]}
    for epoch in (1, 2):
        assert replay(runs[f"loop-{epoch}"], patience=patience).stop_round == loop_stop
        assert replay(runs[f"steady-{epoch}"], patience=patience).stop_round == steady_stop
    assert replay(runs["steady-1"]).progress_rounds == [1, 5, 7]


def test_genai_spans_become_rounds_and_the_blind_run_says_what_is_lost():
    runs = _runs(GENAI)
    assert sorted(runs) == ["conv-blind", "conv-loop", "conv-steady"]
    loop, steady, blind = runs["conv-loop"], runs["conv-steady"], runs["conv-blind"]
    assert _shape(loop) == [[("search", "read", "ok")]] * 13
    assert _shape(steady) == [[("read_file", "read", "ok")], [("search", "read", "empty")],
                              [("read_file", "read", "error")], [("write_note", "write", "ok")],
                              [("read_file", "read", "ok")], [("read_file", "read", "ok")]]
    assert steady.rounds[3].calls[0].args == {"text": "part 1 read"}
    assert loop.labels["results_missing"] == 0 and "results_note" not in loop.labels
    # the failed call carries no result either, but a failure is no evidence with or without its text
    assert steady.labels["results_missing"] == 0
    # content capture off: tool spans without arguments or results; nothing is made up
    assert _shape(blind) == [[("search", "read", "empty")]] * 10
    assert all(c.args == {} and c.result == "" for r in blind.rounds for c in r.calls)
    assert blind.labels["results_missing"] == 10
    assert blind.labels["results_note"].startswith("10 of 10 calls carry no result text")
    assert loop.labels["dialect"] == "gen_ai" and loop.labels["model"] == "scripted-agent-1"
    assert loop.labels["service"] == "notes-agent" and loop.labels["agent"] == "notes-agent"


def test_genai_and_openinference_replay_stops_where_the_hand_count_says():
    runs = _runs(GENAI)
    assert replay(runs["conv-loop"]).stop_round == 10          # 1 new, then 9 repeats
    assert replay(runs["conv-steady"]).stop_round is None      # 6 rounds, never 9 without news
    assert replay(runs["conv-steady"]).progress_rounds == [1, 5, 6]
    assert replay(runs["conv-blind"]).stop_round == 9          # every round empty: 9 in a row
    (oi,) = _runs(OPENINFERENCE).values()
    assert oi.labels["dialect"] == "openinference" and oi.labels["conversation_id"] == "session-oi-loop"
    assert _shape(oi) == [[("read_file", "read", "ok")]] * 13
    assert replay(oi).stop_round == 12                         # 3 new files, then 9 re-reads
    assert replay(oi).progress_rounds == [1, 2, 3]


def _strip(data: dict, keys: set[str]) -> dict:
    data = copy.deepcopy(data)
    for s in data["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        s["attributes"] = [a for a in s["attributes"] if a["key"] not in keys]
    return data


def test_a_call_is_taken_once_whether_or_not_its_tool_span_names_its_id(tmp_path):
    f = tmp_path / "noids.otlp.jsonl"
    f.write_text(json.dumps(_strip(_otlp(), {"gen_ai.tool.call.id"})) + "\n")
    assert sorted(map(_shape, import_file(f))) == sorted(map(_shape, import_file(GENAI)))


def test_calls_without_tool_spans_take_their_results_from_the_next_request(tmp_path):
    data = _otlp()
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if not any(a["key"] == "gen_ai.tool.name" for a in s["attributes"])]
    f = tmp_path / "models-only.otlp.jsonl"
    f.write_text(json.dumps(data) + "\n")
    runs = {log.labels["conversation_id"]: log for log in import_file(f)}
    # each call's result is in the next request's input messages (the last one's in the answering request)
    assert _shape(runs["conv-loop"]) == [[("search", "read", "ok")]] * 13
    assert runs["conv-loop"].labels["results_missing"] == 0
    assert replay(runs["conv-loop"]).stop_round == 10
    # without its span the failed read's ERROR is lost: its result text ("Error: ...") says it
    assert _shape(runs["conv-steady"])[:3] == [[("read_file", "read", "ok")], [("search", "read", "empty")],
                                               [("read_file", "read", "error")]]
    assert "conv-blind" not in runs or runs["conv-blind"].rounds == []
    # without the answering request, the trace ends on the 13th call: it never ran, as far as the trace shows
    loop_trace = runs["conv-loop"].labels["trace_id"]
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    last = max((s for s in spans if s["traceId"] == loop_trace and s["name"].startswith("chat")),
               key=lambda s: int(s["startTimeUnixNano"]))
    spans.remove(last)
    f.write_text(json.dumps(data) + "\n")
    runs = {log.labels["conversation_id"]: log for log in import_file(f)}
    assert _shape(runs["conv-loop"]) == [[("search", "read", "ok")]] * 12


def test_the_replay_command_prints_those_stops(capsys):
    assert main(["replay", str(FIX), "--rule", "record", "--json"]) == 0   # the stops above are the record's
    got = sorted((json.loads(line)["rounds"], json.loads(line)["stop_round"])
                 for line in capsys.readouterr().out.splitlines())
    assert got == sorted([(13, 10), (13, 10), (7, None), (7, None),          # inspect
                          (13, 10), (6, None), (10, 9), (13, 12)])            # otel


def test_compare_judges_the_imported_runs_like_any_other(tmp_path, capsys):
    ids = {log.labels["conversation_id"]: log.labels["trace_id"] for log in import_file(GENAI)}
    (oi,) = import_file(OPENINFERENCE)
    labels = tmp_path / "labels.yaml"
    labels.write_text("format: imprint-labels/1\nruns:\n" + "".join(f"  {name}: {body}\n" for name, body in [
        ("loop-1", "{loops: [[2, 13]]}"), ("loop-2", "{loops: [[2, 13]]}"),
        ("steady-1", "{should_not_stop_before: 7}"), ("steady-2", "{should_not_stop_before: 7}"),
        (ids["conv-loop"], "{loops: [[2, 13]]}"), (ids["conv-steady"], "{should_not_stop_before: 6}"),
        # useful to its end, but recorded without results: the rule cannot see that, and stops it at 9
        (ids["conv-blind"], "{should_not_stop_before: 10}"),
        (oi.labels["trace_id"], "{loops: [[4, 13]]}")]))
    assert main(["compare", "--corpus", str(FIX), "--labels", str(labels), "--rule", "record[patience=9]",
                 "--out", str(tmp_path / "cmp"), "--no-disk-cache"]) == 0
    capsys.readouterr()
    cells = json.loads((tmp_path / "cmp" / "compare.json").read_text())["cells"]
    (cell,) = [c for c in cells if c["part"] == "all" and c["corpus"] != "all" and c["rule"] == "record[patience=9]"]
    assert (cell["runs"], cell["useful"], cell["premature"], cell["loops"], cell["caught"]) == (8, 4, 1, 4, 4)
    # stops at 10, 10, 10 and 12: 8 rounds after each loop's start
    assert sorted(cell["latencies"]) == [8, 8, 8, 8]


def test_import_writes_one_folder_per_multi_run_file_and_the_header_keeps_the_note(tmp_path):
    out = tmp_path / "out"
    assert main(["import", str(FIX), "--out", str(out)]) == 0
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))
    assert [f for f in files if f.startswith("inspect/")] == [
        "inspect/research/loop-1.jsonl", "inspect/research/loop-2.jsonl",
        "inspect/research/steady-1.jsonl", "inspect/research/steady-2.jsonl"]
    assert len([f for f in files if f.startswith("otel/genai/")]) == 3
    assert len([f for f in files if f.startswith("otel/openinference/")]) == 1
    headers = [json.loads(p.read_text().splitlines()[0]) for p in (out / "otel" / "genai").glob("*.jsonl")]
    blind = next(h for h in headers if h["labels"]["conversation_id"] == "conv-blind")
    assert blind["labels"]["results_missing"] == 10 and "results_note" in blind["labels"]


def test_a_tool_kinds_file_beside_the_corpus_overrides_the_name_rule(tmp_path):
    for f in (EVAL, GENAI):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "tool-kinds.yaml").write_text("search: write\n")
    logs = {Path(log.path).stem: log for log in import_file(tmp_path / EVAL.name)}
    assert {c.kind for r in logs["loop-1"].rounds for c in r.calls} == {"write"}
    assert replay(logs["loop-1"]).stop_round is None           # writes neither count nor reset
    assert logs["loop-1"].labels["tool_kinds_file"] == str(tmp_path / "tool-kinds.yaml")
    genai = {log.labels["conversation_id"]: log for log in import_file(tmp_path / GENAI.name)}
    assert replay(genai["conv-loop"]).stop_round is None
    # a blind write is ok, not empty: a write's status does not depend on what it printed
    assert _shape(genai["conv-blind"])[0] == [("search", "write", "ok")]
    assert genai["conv-steady"].rounds[0].calls[0].kind == "read"   # unlisted: the rule's kind


def _script(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, FIX / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # raised inside inspect_ai by its retry library
def test_the_fixture_scripts_make_the_committed_runs_again(tmp_path):
    """The committed files are what the scripts write (ids and times aside)."""
    pytest.importorskip("inspect_ai")
    pytest.importorskip("opentelemetry.exporter.otlp.json.file")
    assert _script("make_otel").main([str(tmp_path / "otel")]) == 0
    assert _script("make_inspect").main([str(tmp_path / "inspect")]) == 0
    for committed in (EVAL, GENAI, OPENINFERENCE):
        fresh = tmp_path / committed.parent.name / committed.name
        assert sorted(map(_shape, import_file(fresh))) == sorted(map(_shape, import_file(committed))), committed
        assert sorted(log.labels.get("conversation_id") or log.name for log in import_file(fresh)) == \
            sorted(log.labels.get("conversation_id") or log.name for log in import_file(committed))


# ---- malformed input: exit 2, file and key named, nothing written ----------------------------------

@pytest.fixture(scope="module")
def json_log(tmp_path_factory) -> dict:
    """The fixture's log as inspect_ai's own JSON log format (written by inspect_ai)."""
    inspect_log = pytest.importorskip("inspect_ai.log")
    path = tmp_path_factory.mktemp("jsonlog") / "research.json"
    inspect_log.write_eval_log(inspect_log.read_eval_log(str(EVAL)), str(path), format="json")
    data = json.loads(path.read_text())
    data["samples"] = data["samples"][:1]       # small enough to copy per case
    return data


def _mutated(data: dict, fn) -> dict:
    data = copy.deepcopy(data)
    fn(data)
    return data


def _set(path: tuple, value):
    def fn(data):
        obj = data
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return fn


def _pop(path: tuple):
    def fn(data):
        obj = data
        for k in path[:-1]:
            obj = obj[k]
        del obj[path[-1]]
    return fn


def _dup_tool_message(data):
    msgs = data["samples"][0]["messages"]
    msgs.insert(3, copy.deepcopy(msgs[2]))


def _dup_sample(data):
    data["samples"].append(copy.deepcopy(data["samples"][0]))


MSG = ("samples", 0, "messages")


def test_a_result_kept_as_an_attachment_is_read_as_its_text(json_log, tmp_path):
    """inspect_ai may pool long content as `attachment://<hash>`; the result is the text it stands for."""
    def attach(data):
        data["samples"][0]["attachments"] = {"f00d": "pooled text\n" * 20}
        data["samples"][0]["messages"][2]["content"] = "attachment://f00d"
    f = tmp_path / "attached.json"
    f.write_text(json.dumps(_mutated(json_log, attach)))
    (log,) = import_file(f)
    assert log.rounds[0].calls[0].result == "pooled text\n" * 20
INSPECT_JSON_CASES = {
    "role": (_set(MSG + (1, "role"), "robot"), "samples[0].messages[1].role", "'assistant'"),
    "task": (_pop(("eval", "task")), "eval.task", "Field required"),
    "arguments": (_set(MSG + (1, "tool_calls", 0, "arguments"), 5), "samples[0].messages[1].tool_calls[0].arguments",
                  "valid dictionary"),
    "no samples": (_set(("samples",), []), "samples", "no samples"),
    "stray result": (_set(MSG + (2, "tool_call_id"), "call_99"), "samples[0].messages[2].tool_call_id", "call_99"),
    "second result": (_dup_tool_message, "samples[0].messages[3]", "a second result"),
    "same sample twice": (_dup_sample, "samples[1].id", "appears twice"),
    "epoch": (_set(("samples", 0, "epoch"), "first"), "samples[0].epoch", "valid integer"),
}


@pytest.mark.parametrize("case", sorted(INSPECT_JSON_CASES))
def test_a_broken_inspect_json_log_names_its_key(case, json_log, tmp_path, capsys):
    fn, key, words = INSPECT_JSON_CASES[case]
    bad = tmp_path / "broken.json"
    bad.write_text(json.dumps(_mutated(json_log, fn)))
    _fails(["import", str(bad), "--out", str(tmp_path / "out")], bad, key, words, tmp_path / "out", capsys)


def _cut_eval(tmp_path: Path) -> Path:
    p = tmp_path / "cut.eval"
    p.write_bytes(EVAL.read_bytes()[: EVAL.stat().st_size * 2 // 3])
    return p


def _text_eval(tmp_path: Path) -> Path:
    p = tmp_path / "notes.eval"
    p.write_text("these are my notes, not a log\n")
    return p


def _empty_zip(tmp_path: Path) -> Path:
    import zipfile
    p = tmp_path / "empty.eval"
    zipfile.ZipFile(p, "w").close()
    return p


def _cut_json(tmp_path: Path, json_log: dict) -> Path:
    p = tmp_path / "cut.json"
    text = json.dumps(json_log, indent=1)
    p.write_text(text[: len(text) // 2])
    return p


def _kinds_file(tmp_path: Path, text: str) -> Path:
    shutil.copy(EVAL, tmp_path / EVAL.name)
    (tmp_path / "tool-kinds.yaml").write_text(text)
    return tmp_path / EVAL.name


INSPECT_FILE_CASES = {
    "cut archive": (_cut_eval, "cut.eval", "(archive)", "cut off"),
    "not an archive": (_text_eval, "notes.eval", "(archive)", "not a readable .eval archive"),
    "empty archive": (_empty_zip, "empty.eval", "_journal/start.json", "lacks this member"),
    "cut json": (None, "cut.json", "line", "ends early"),
    "unknown kind": (lambda tmp: _kinds_file(tmp, "search: maybe\n"), "tool-kinds.yaml", "search",
                     "unknown kind 'maybe'"),
    "kinds not a mapping": (lambda tmp: _kinds_file(tmp, "- search\n"), "tool-kinds.yaml", "(top level)",
                            "read, write or ask"),
}


@pytest.mark.parametrize("case", sorted(INSPECT_FILE_CASES))
def test_a_broken_inspect_file_names_itself(case, json_log, tmp_path, capsys):
    make, name, key, words = INSPECT_FILE_CASES[case]
    bad = _cut_json(tmp_path, json_log) if make is None else make(tmp_path)
    named = next(tmp_path.rglob(name))
    if key == "line":          # a cut JSON text: the line where it stops
        lines = bad.read_text().count("\n") + 1
        key = f"{named}:{lines}:"
    _fails(["import", str(bad), "--out", str(tmp_path / "out")], named, key, words, tmp_path / "out", capsys)


def test_without_inspect_ai_an_inspect_log_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)      # import inspect_ai.log now raises ImportError
    _fails(["import", str(EVAL), "--out", str(tmp_path / "out")], EVAL, "inspect_ai is not installed",
           ".[interop]", tmp_path / "out", capsys)


def test_format_inspect_on_another_format_names_the_missing_key(tmp_path, capsys):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    _fails(["import", str(chat), "--format", "inspect", "--out", str(tmp_path / "out")], chat, "eval",
           "not an inspect_ai log", tmp_path / "out", capsys)


def _otlp() -> dict:
    return json.loads(GENAI.read_text().splitlines()[0])


SPAN = ("resourceSpans", 0, "scopeSpans", 0, "spans", 0)
SPAN_KEY = "resourceSpans[0].scopeSpans[0].spans[0]"


def _tool_span_index(data: dict) -> int:
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return next(i for i, s in enumerate(spans)
                if any(a["key"] == "gen_ai.tool.name" for a in s["attributes"]))


def _drop_tool_name(data):
    i = _tool_span_index(data)
    span = data["resourceSpans"][0]["scopeSpans"][0]["spans"][i]
    span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.name"]
    data["_key"] = f"resourceSpans[0].scopeSpans[0].spans[{i}].attributes.gen_ai.tool.name"


def _dup_span(data):
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(copy.deepcopy(spans[0]))
    data["_key"] = f"resourceSpans[0].scopeSpans[0].spans[{len(spans) - 1}].spanId"


def _only_http(data):
    for s in data["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        s["attributes"] = [{"key": "http.request.method", "value": {"stringValue": "POST"}}]


def _bad_kind(data):
    i = _tool_span_index(data)
    data["resourceSpans"][0]["scopeSpans"][0]["spans"][i]["attributes"].append(
        {"key": "imprint.tool.kind", "value": {"stringValue": "maybe"}})
    data["_key"] = f"resourceSpans[0].scopeSpans[0].spans[{i}].attributes.imprint.tool.kind"


OTEL_CASES = {
    "resourceSpans not a list": (_set(("resourceSpans",), {}), "resourceSpans", "wrong type dict"),
    "base64 trace id": (_set(SPAN + ("traceId",), "D+JvF06Kh6/zc0MJbT82gw=="), SPAN_KEY + ".traceId", "hex"),
    "no span id": (_pop(SPAN + ("spanId",)), SPAN_KEY + ".spanId", "required key is missing"),
    "start time": (_set(SPAN + ("startTimeUnixNano",), "soon"), SPAN_KEY + ".startTimeUnixNano", "nanoseconds"),
    # str.isdigit() takes "²" (then int() refused it: exit 3); only ASCII decimal text is a time (issue 45, item 13)
    "superscript time": (_set(SPAN + ("startTimeUnixNano",), "\u00b2"), SPAN_KEY + ".startTimeUnixNano", "nanoseconds"),
    "arabic-indic end": (_set(SPAN + ("endTimeUnixNano",), "\u0663"), SPAN_KEY + ".endTimeUnixNano", "nanoseconds"),
    "time of 5,000 digits": (_set(SPAN + ("startTimeUnixNano",), "9" * 5000), SPAN_KEY + ".startTimeUnixNano",
                             "not a time: '99999"),
    "negative time": (_set(SPAN + ("startTimeUnixNano",), -1), SPAN_KEY + ".startTimeUnixNano", "nanoseconds"),
    "superscript int": (_set(SPAN + ("attributes", 7, "value"), {"intValue": "\u00b2"}),
                        SPAN_KEY + ".attributes[7].value.intValue", "not an integer"),
    "int past int64": (_set(SPAN + ("attributes", 7, "value"), {"intValue": str(2**63)}),
                       SPAN_KEY + ".attributes[7].value.intValue", "not an integer"),
    "value type": (_set(SPAN + ("attributes", 0, "value"), {"str": "chat"}), SPAN_KEY + ".attributes[0].value",
                   "stringValue"),
    "int value": (_set(SPAN + ("attributes", 7, "value"), {"intValue": "90a"}),
                  SPAN_KEY + ".attributes[7].value.intValue", "not an integer"),
    "attribute without key": (_pop(SPAN + ("attributes", 0, "key")), SPAN_KEY + ".attributes[0].key",
                              "required key is missing"),
    "status code": (_set(SPAN + ("status",), {"code": 7}), SPAN_KEY + ".status.code", "STATUS_CODE_ERROR"),
    "events": (_set(SPAN + ("events",), {"name": "x"}), SPAN_KEY + ".events", "a list of events"),
    "span not an object": (_set(SPAN, "chat"), SPAN_KEY, "a span object"),
    "duplicate span": (_dup_span, None, "appears twice"),
    "tool without name": (_drop_tool_name, None, "without its tool's name"),
    "unknown kind": (_bad_kind, None, "unknown kind 'maybe'"),
    "no spans": (_set(("resourceSpans",), []), "resourceSpans", "no spans"),
    "no agent spans": (_only_http, "attributes.gen_ai.operation.name", "invoke_agent"),
}


@pytest.mark.parametrize("case", sorted(OTEL_CASES))
def test_a_broken_otlp_file_names_its_key(case, tmp_path, capsys):
    fn, key, words = OTEL_CASES[case]
    data = _mutated(_otlp(), fn)
    key = key or data.pop("_key")
    bad = tmp_path / "broken.otlp.jsonl"
    bad.write_text(json.dumps(data) + "\n")
    _fails(["import", str(bad), "--out", str(tmp_path / "out")], bad, key, words, tmp_path / "out", capsys)


def _paths(v, here=()):
    yield here
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, here + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, here + (i,))


SMALL_OTLP = _mutated(json.loads(OPENINFERENCE.read_text().splitlines()[0]),
                      lambda d: d["resourceSpans"][0]["scopeSpans"][0].__setitem__(
                          "spans", d["resourceSpans"][0]["scopeSpans"][0]["spans"][:8]))
SMALL_PATHS = list(_paths(SMALL_OTLP))


@settings(max_examples=150, deadline=None)
@given(where=st.sampled_from(SMALL_PATHS[1:]),
       value=st.sampled_from([None, 1, -1, 1.5, True, "x", "", [], {}, [1], {"x": 1}, {"stringValue": 3}]))
def test_any_broken_node_of_an_otlp_file_is_a_user_error_or_still_reads(where, value):
    from imprint_core.errors import UserInputError
    data = _mutated(SMALL_OTLP, _set(where, value))
    try:
        otel.import_otel(data, "fuzz.otlp.json")
    except UserInputError as exc:
        assert exc.file == "fuzz.otlp.json" and exc.key


def test_a_cut_otlp_line_names_its_line(tmp_path, capsys):
    first = GENAI.read_text().splitlines()[0]
    bad = tmp_path / "cut.otlp.jsonl"
    bad.write_text(first + "\n" + first[: len(first) // 3])
    _fails(["import", str(bad), "--format", "otel", "--out", str(tmp_path / "out")], bad, f"{bad}:2",
           "ends early", tmp_path / "out", capsys)


def _fails(argv: list[str], file: Path, key: str, words: str, out: Path, capsys) -> None:
    """The command exits 2 with one line naming the file, the key and what is wrong;
    the output folder, with a good file imported beside the bad one, gets nothing."""
    out.mkdir(exist_ok=True)
    (out / "keep.txt").write_text("mine")
    good = out.parent / "good" / "chat.json"
    good.parent.mkdir(exist_ok=True)
    good.write_text(json.dumps([{"role": "assistant", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "found"}]))
    first = argv.index("--out")
    argv = argv[:1] + ([str(good)] if "--format" not in argv else []) + argv[1:first] + argv[first:]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert str(file) in err and key in err and words in err, err
    assert sorted(p.name for p in out.rglob("*")) == ["keep.txt"]


def test_a_broken_trace_exports_nothing_and_keeps_the_old_file(tmp_path, capsys):
    good = sorted((REPO / "traces" / "local").glob("*.jsonl"))[0]
    bad = tmp_path / "bad.jsonl"
    lines = good.read_text().splitlines()
    bad.write_text("\n".join(lines[:3] + ['{"type": "round_end", "round": 1}'] + lines[3:]) + "\n")
    out = tmp_path / "spans.otlp.jsonl"
    out.write_text("old\n")
    assert main(["export-otel", str(good), str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4" in err and "lacks a field" in err and err.count("\n") == 1
    assert out.read_text() == "old\n"


def test_a_trace_event_of_the_wrong_type_exports_nothing(tmp_path, capsys):
    good = sorted((REPO / "traces" / "local").glob("*.jsonl"))[0]
    lines = good.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "tool_result")
    event = json.loads(lines[n])
    event["round"] = "first"
    lines[n] = json.dumps(event)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    assert main(["export-otel", str(bad), "-o", str(tmp_path / "x.otlp.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{n + 1}: tool_result: " in err and "does not fit its type" in err
    assert not (tmp_path / "x.otlp.jsonl").exists()


# ---- export-otel, import, replay: the same stop ------------------------------------------------------

# traces/runs/ holds the user's own runs (ignored by git, perhaps half written while a run goes on): not committed
COMMITTED = sorted(p for p in (REPO / "traces").rglob("*.jsonl")
                   if p.relative_to(REPO / "traces").parts[0] != "runs"
                   and json.loads(p.open().readline()).get("format") == "imprint-trace/1")


def test_the_committed_traces_are_found():
    assert len(COMMITTED) >= 20
    assert {p.parent.name for p in COMMITTED} >= {"local", "llamacpp", "transformers"}


def _round_trip(traces: list[Path], out: Path) -> list:
    assert main(["export-otel", *map(str, traces), "-o", str(out)]) == 0
    return import_file(out, "otel")


def _patience(trace: Path) -> int:
    start = next(e for e in read_trace(trace).events if type(e).__name__ == "RunStart")
    return start.settings.get("chat.research_no_progress_rounds", 9)


def test_every_committed_trace_survives_export_import_and_replays_to_the_same_stop(tmp_path):
    logs = _round_trip(COMMITTED, tmp_path / "all.otlp.jsonl")
    assert len(logs) == len(COMMITTED)
    stops = 0
    for trace, back in zip(COMMITTED, logs):
        direct = parse_round_log(trace_to_round_log(trace), str(trace))
        assert back.labels["dialect"] == "imprint"
        assert render_round_log(back).splitlines()[1:] == render_round_log(direct).splitlines()[1:], trace
        for patience in {9, _patience(trace), 2}:
            a, b = replay(direct, patience=patience), replay(back, patience=patience)
            assert (a.stop_round, a.progress_rounds) == (b.stop_round, b.progress_rounds), (trace, patience)
            stops += a.stop_round is not None
        stopped = [e for e in read_trace(trace).events if isinstance(e, Stopped)]
        if stopped:
            assert back.labels["exported_stop"] == {"reason": stopped[-1].reason, "round": stopped[-1].round}
    assert stops > 0       # some of them do stop: the comparison is not of `never` with `never`


def test_every_stop_rule_stops_the_round_tripped_traces_where_it_stops_the_traces(tmp_path):
    from harness.realruns.roundlogs import replay_with
    from imprint_core.stoprules import available, build
    logs = _round_trip(COMMITTED, tmp_path / "all.otlp.jsonl")
    rules = [info for info in available() if info.origin == "built-in"]
    assert len(rules) >= 5
    stopped = set()
    for info in rules:
        for trace, back in zip(COMMITTED, logs):
            direct = parse_round_log(trace_to_round_log(trace), str(trace))
            a, b = replay_with(direct, lambda: build(info)), replay_with(back, lambda: build(info))
            assert (a.stop_round, a.detail) == (b.stop_round, b.detail), (info.name, trace)
            if a.stop_round is not None:
                stopped.add(info.name)
    assert len(stopped) >= 3          # several rules do stop some of them


def test_the_export_is_otlp_json_as_opentelemetry_reads_it(tmp_path):
    codec = pytest.importorskip("opentelemetry.proto_json.collector.trace.v1.trace_service")
    out = tmp_path / "x.otlp.jsonl"
    assert main(["export-otel", *map(str, COMMITTED[:6]), "-o", str(out)]) == 0
    for line in out.read_text().splitlines():
        data = json.loads(line)
        # read into OpenTelemetry's own OTLP model and written back, nothing is lost or renamed
        assert _without_defaults(codec.ExportTraceServiceRequest.from_dict(data).to_dict()) == _without_defaults(data)


def _without_defaults(v):
    """Without fields at their default (an empty status or parent), which OTLP JSON may leave out or keep."""
    if isinstance(v, dict):
        return {k: _without_defaults(x) for k, x in v.items() if x not in ({}, "", [], None)}
    if isinstance(v, list):
        return [_without_defaults(x) for x in v]
    return v


def test_the_export_names_tokens_and_tools_by_the_conventions(tmp_path):
    trace = REPO / "traces" / "local" / "70-local-research.jsonl"
    data = otelexport.trace_spans(trace)
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = [{a["key"]: a["value"] for a in s["attributes"]} for s in spans]
    root, chats, tools = attrs[0], [a for a in attrs if "imprint.tokens.reserved" in a], \
        [a for a in attrs if "gen_ai.tool.name" in a]
    assert root["gen_ai.operation.name"] == {"stringValue": "invoke_agent"}
    settled = [e for e in read_trace(trace).events if type(e).__name__ == "RequestSettled"]
    assert [int(c["imprint.tokens.charged"]["intValue"]) for c in chats[:len(settled)]] == \
        [s.record.charged for s in settled]
    assert [int(c["gen_ai.usage.input_tokens"]["intValue"]) for c in chats[:len(settled)]] == \
        [s.record.measured_prompt for s in settled]
    results = [e for e in read_trace(trace).events if isinstance(e, ToolResultRecorded)]
    assert [t["gen_ai.tool.call.result"]["stringValue"] for t in tools] == [r.text for r in results]
    assert all(t["gen_ai.operation.name"] == {"stringValue": "execute_tool"} for t in tools)
    names = [e["name"] for e in spans[0]["events"]]
    assert "imprint.stop" in names and names.count("imprint.round_end") == \
        sum(isinstance(e, RoundEnd) for e in read_trace(trace).events)
    assert otelexport.trace_spans(trace) == data       # the same file, the same ids


@st.composite
def _trace_events(draw):
    rounds = draw(st.integers(0, 6))
    texts = st.text(alphabet=st.sampled_from("abc xyz\n0123"), max_size=40)
    out = []
    for r in range(1, rounds + 1):
        for i in range(draw(st.integers(0, 3))):
            status = draw(st.sampled_from(["ok", "empty", "error", "not_executed", "timeout"]))
            kind = draw(st.sampled_from(["read", "write", "ask"]))
            args = draw(st.dictionaries(st.sampled_from(["q", "path", "n"]), st.integers(0, 5) | texts, max_size=2))
            segs = draw(st.none() | st.lists(texts, max_size=3))
            cid = f"call_{i}"
            out.append(ToolCallStarted(round=r, index=i, call_id=cid, tool=draw(st.sampled_from(["search", "w"])),
                                       kind=kind, arguments=args, blocking=True))
            if draw(st.booleans()) or status != "not_executed":
                out.append(ToolResultRecorded(round=r, call_id=cid, tool=out[-1].tool, kind=kind, status=status,
                                              chars=0, after_deadline=False, started=None, finished=None,
                                              arguments=args, text=draw(texts), segments=segs))
        if draw(st.booleans()):
            out.append(RoundEnd(round=r, kind="read", progress=False, new_paragraphs=0, new_shingles=0,
                                patience_counter=0, patience=2, reserved=0, charged=0, deadline=None))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_trace_events())
def test_any_trace_round_trips_to_the_same_round_log(events, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rt")
    trace = tmp / "t.jsonl"
    with TraceWriter(trace, VirtualClock(), meta={"scenario": "x"}) as w:
        for e in events:
            w.write(e)
    direct = parse_round_log(trace_to_round_log(trace), str(trace))
    out = tmp / "t.otlp.jsonl"
    otelexport.export_otel([trace], out)
    (back,) = import_file(out, "otel")
    assert render_round_log(back).splitlines()[1:] == render_round_log(direct).splitlines()[1:]


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=8)
                    | st.floats(allow_nan=False, allow_infinity=False), lambda inner: st.lists(inner, max_size=3), max_leaves=6))
def test_attribute_values_read_back_as_written(value):
    src = rawfiles.Source("x.otlp.jsonl", "otel")
    encoded = otelexport.any_value(value)
    back = otlp.any_value(encoded, src, "v") if value is not None else None
    if isinstance(value, list) and not all(isinstance(x, (str, bool, int, float)) for x in value):
        assert back == json.dumps(value, ensure_ascii=False, sort_keys=True)     # nested: kept as JSON text
    else:
        assert back == value


def test_an_otlp_line_longer_than_the_first_line_read_is_still_a_raw_run(tmp_path, monkeypatch):
    from harness.realruns import runfiles
    monkeypatch.setattr(runfiles, "_first_line", lambda path: path.read_bytes()[:200])   # a cut first line
    f = tmp_path / "big.otlp.jsonl"
    shutil.copy(GENAI, f)
    assert runfiles.classify(f, named=False) == "raw"
    assert len(load_runs([tmp_path])[0]) == 3


def test_gzipped_otlp_reads_like_plain(tmp_path):
    gz = tmp_path / "genai.otlp.jsonl.gz"
    gz.write_bytes(gzip.compress(GENAI.read_bytes()))
    assert [_shape(log) for log in import_file(gz)] == [_shape(log) for log in import_file(GENAI)]


def test_a_multi_line_otlp_file_named_json_is_read_as_json_lines(tmp_path):
    lines = GENAI.read_text().splitlines()
    data = json.loads(lines[0])
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    half = len(spans) // 2
    one, two = copy.deepcopy(data), copy.deepcopy(data)
    one["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans[:half]
    two["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans[half:]
    f = tmp_path / "spans.json"
    f.write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    assert convert.detect_format(f) == "otel"
    assert sorted(map(_shape, import_file(f))) == sorted(map(_shape, import_file(GENAI)))


# ---- documentation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("module", [otel, otlp, inspect_importer, toolkinds, otelexport])
def test_the_new_modules_document_their_decisions(module):
    tree = ast.parse(pyinspect.getsource(module))
    undocumented = []
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            vocabulary = {"SCOPE", "STATUS_ERROR", "MODEL_OPERATIONS", "TOOL_OPERATION", "OI_MODEL", "OI_TOOL",
                          "STATUS_CODES", "VALUE_KEYS", "HEX_ID", "ID_EXPECTED", "RESULTS_NOTE", "KINDS_FILE",
                          "LEVELS", "ALLOWED", "Classifier"}
            if name.isupper() and name not in vocabulary:
                nxt = tree.body[i + 1] if i + 1 < len(tree.body) else None
                if not (isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)):
                    undocumented.append(name)
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and not ast.get_docstring(node):
            undocumented.append(node.name)
    assert not undocumented
    assert module.__doc__


def test_the_readme_import_table_names_all_six_formats_with_a_command():
    readme = (REPO / "README.md").read_text()
    for fmt in rawfiles.FORMATS:
        assert f"--format {fmt}" in readme, fmt
    assert "imprint export-otel" in readme and "make_inspect.py" in readme and "make_otel.py" in readme
