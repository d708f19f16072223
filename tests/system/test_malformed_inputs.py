"""Malformed inputs of every kind through the `imprint` CLI: exit code 2,
the file (and line and key, where there are such) named, no traceback, and
nothing written half."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from test_harness_inputs import BAD_LOGS, BAD_SCENARIOS, GOOD

TRACE_HEADER = json.dumps({"type": "header", "t": 0, "wall": "x", "format": "imprint-trace/1"})
TRACE_EVENT = json.dumps({"type": "round_end", "t": 1, "wall": "x", "round": 1})
BAD_TRACES = {
    "trace-empty": (b"", "no trace header"),
    "trace-no-header": ((TRACE_EVENT + "\n").encode(), "no trace header"),
    "trace-wrong-format": ((json.dumps({"type": "header", "format": "imprint-trace/9"}) + "\n").encode(),
                           "unsupported trace format"),
    "trace-bad-middle-line": ((TRACE_HEADER + "\n{not json\n" + TRACE_EVENT + "\n").encode(), ":2:"),
    "trace-line-without-type": ((TRACE_HEADER + "\n" + json.dumps({"t": 1}) + "\n" + TRACE_EVENT + "\n").encode(),
                                ":2:"),
    "trace-long-integer": ((TRACE_HEADER + "\n" + TRACE_EVENT[:-1] + ', "n": ' + "9" * 5000 + "}\n" + TRACE_EVENT
                            + "\n").encode(), ":2: not a trace line: an integer of more than 4,300 digits"),
    "trace-not-utf8": ((TRACE_HEADER + "\n").encode() + b'{"type": "x\xff"}\n' + (TRACE_EVENT + "\n").encode(), ":2:"),
}
BAD_SETTINGS_FILES = {
    "settings-not-toml": ("[chat\nresearch_timeout_sec = 30\n", "not valid TOML"),
    "settings-out-of-bounds": ("[chat]\nresearch_timeout_sec = 5\n", "chat.research_timeout_sec"),
    "settings-not-integer": ("[chat]\nresearch_token_budget = \"lots\"\n", "chat.research_token_budget"),
    "settings-long-integer": ("[chat]\nresearch_token_budget = " + "9" * 5000 + "\n", ":2: not valid TOML: an integer of"),
    "settings-float": ("[chat]\nresearch_no_progress_rounds = 2.5\n", "chat.research_no_progress_rounds"),
}


def _assert_input_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_scenario_file(tmp_path: Path, capsys, case: str) -> None:
    text, line, key, fragment = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["run", str(path), "--traces", str(tmp_path / "runs")])
    where = f"{path}:{line}" if line else str(path)
    _assert_input_error(code, capsys.readouterr().err, where, fragment, *([key] if key else []))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("case", sorted(BAD_LOGS))
def test_round_log(tmp_path: Path, capsys, case: str) -> None:
    text, line, key, fragment = BAD_LOGS[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_text(text, encoding="utf-8")
    code = main(["replay", "--json", str(path)])
    captured = capsys.readouterr()
    _assert_input_error(code, captured.err, f"{path}:{line}", fragment, *([key] if key else []))
    assert captured.out == "", "nothing is printed for a batch with unusable input"


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_trace(tmp_path: Path, capsys, case: str) -> None:
    data, fragment = BAD_TRACES[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(data)
    out = tmp_path / "rounds.jsonl"
    code = main(["export-rounds", str(path), "-o", str(out)])
    _assert_input_error(code, capsys.readouterr().err, str(path), fragment)
    assert not out.exists() and not list(tmp_path.glob(".rounds.jsonl.*"))


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS_FILES))
def test_settings_file(tmp_path: Path, capsys, monkeypatch, case: str) -> None:
    for var in ("IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC", "IMPRINT_CHAT_RESEARCH_TOKEN_BUDGET",
                "IMPRINT_CHAT_RESEARCH_NO_PROGRESS_ROUNDS"):
        monkeypatch.delenv(var, raising=False)
    text, fragment = BAD_SETTINGS_FILES[case]
    cfg = tmp_path / "config.toml"
    cfg.write_text(text, encoding="utf-8")
    code = main(["settings", "list", "--config", str(cfg)])
    _assert_input_error(code, capsys.readouterr().err, str(cfg), fragment)
    assert cfg.read_text(encoding="utf-8") == text, "a bad file is never rewritten"


@pytest.mark.parametrize("value", ["soon", "5", "99999", "1e3", "9" * 5000])
def test_settings_environment(tmp_path: Path, capsys, monkeypatch, value: str) -> None:
    monkeypatch.setenv("IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC", value)
    code = main(["settings", "get", "chat.research_timeout_sec", "--config", str(tmp_path / "c.toml")])
    _assert_input_error(code, capsys.readouterr().err, "IMPRINT_CHAT_RESEARCH_TIMEOUT_SEC", "10–3600")


REMOTE = GOOD.replace("provider:\n  kind: stub\n  script:\n    - calls: [{tool: search, args: {query: a}}]\n"
                      "    - answer: done\n", "provider:\n  kind: remote\n  server: llamacpp\n  cassette: {cassette}\n")


@pytest.mark.parametrize("case,content", [("missing", None), ("not-yaml", "interactions: [\n"),
                                          ("empty", "interactions: []\nversion: 1\n"),
                                          # valid YAML, not a cassette's shape (issue 45, item 14)
                                          ("a-list", "- just\n- a list\n"), ("a-number", "42\n"),
                                          ("interactions-a-number", "interactions: 5\n"),
                                          ("interaction-a-number", "interactions:\n- 5\n"),
                                          ("request-a-number", "interactions:\n- request: 5\n  response: {}\n"),
                                          ("request-without-uri", "interactions:\n- request: {method: POST}\n"
                                                                  "  response: {}\n"),
                                          ("request-unknown-key", "interactions:\n- request: {method: POST, "
                                                                  "uri: 'http://x/v1/chat/completions', verb: 1}\n"
                                                                  "  response: {}\n"),
                                          ("not-chat", "interactions:\n- request: {uri: 'http://127.0.0.1:8099/v1/x', "
                                                       "body: 'nope', method: POST, headers: {}}\n  response: {}\n")])
def test_cassette(tmp_path: Path, capsys, case: str, content: str | None) -> None:
    cas = tmp_path / f"{case}.yaml"
    if content is not None:
        cas.write_text(content, encoding="utf-8")
    scn = tmp_path / "remote.yaml"
    scn.write_text(REMOTE.replace("{cassette}", str(cas)), encoding="utf-8")
    code = main(["run", str(scn), "--traces", str(tmp_path / "runs")])
    _assert_input_error(code, capsys.readouterr().err, str(scn), "provider.cassette", str(cas))


@pytest.mark.parametrize("argv,needle", [
    (["replay", "--patience", "1", "x.jsonl"], "--patience"),
    (["replay", "--patience", "21", "x.jsonl"], "2–20"),
    (["replay", "--normalization", "fancy", "x.jsonl"], "none, basic, default"),
    (["replay", "no/such/dir"], "no/such/dir"),
    (["run", "no/such/file.yaml"], "no/such/file.yaml"),
    (["export-rounds", "no/such/trace.jsonl"], "no/such/trace.jsonl"),
    (["settings", "get"], "needs a KEY"),
    (["settings", "set", "chat.max_tokens"], "needs a VALUE"),
    (["settings", "get", "chat.nope"], "chat.nope"),
    (["settings", "set", "chat.max_tokens", "ten"], "not an integer"),
    (["settings", "set", "chat.max_tokens", "9" * 5000], "chat.max_tokens: an integer of more than 4,300 digits"),
    (["settings", "set", "chat.research_stop_rule", "os:system"], "chat.research_stop_rule: 'os:system' names no "),
    (["settings", "set", "chat.research_stop_rule", "gemini"], "one of record, round-cap"),
    (["check", "--config", "no/such/gate.toml"], "no/such/gate.toml"),
    (["tune", "no/such/logs", "--labels", "no/such/labels.yaml"], "no/such"),
])
def test_cli_arguments(tmp_path: Path, capsys, monkeypatch, argv: list[str], needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IMPRINT_CONFIG", str(tmp_path / "config.toml"))
    code = main(argv)
    _assert_input_error(code, capsys.readouterr().err, needle)


def test_unknown_command_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2 and "invalid choice" in capsys.readouterr().err
