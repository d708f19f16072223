"""Malformed scenario files and round logs: each gives one clear error that
names the file, the line and the key, exit code 2, and no traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cli import main
from harness.realruns.roundlogs import read_round_log
from harness.scenarios import load_scenario
from imprint_core.errors import UserInputError

GOOD = textwrap.dedent("""\
    name: ok
    question: What is known?
    provider:
      kind: stub
      script:
        - calls: [{tool: search, args: {query: a}}]
        - answer: done
    tools:
      - name: search
        default: {text: "some evidence about ${query}"}
    expect:
      stop_reason: answered
""")

# (file text, expected line, expected key, a fragment of the message)
BAD_SCENARIOS = {
    "unknown-top-key": (GOOD + "expekt: {}\n", 13, "expekt", "unknown key"),
    "unknown-turn-key": (GOOD.replace("- answer: done", "- answr: done"), 7, "provider.script[1].answr", "unknown key"),
    "unknown-provider-kind": (GOOD.replace("kind: stub", "kind: stubb"), 3, "provider", "unknown provider kind"),
    "missing-question": (GOOD.replace("question: What is known?\n", ""), None, "question", "required key is missing"),
    "missing-script": (textwrap.dedent("""\
        name: x
        question: q
        provider:
          kind: stub
        """), 3, "provider.script", "required key is missing"),
    "bad-policy": (GOOD + "policy: refund\n", 13, "policy", "'reserve' or 'prefix-refund'"),
    "setting-out-of-bounds": (GOOD + "settings:\n  chat.research_no_progress_rounds: 30\n", 14,
                              "settings.chat.research_no_progress_rounds", "out of bounds"),
    "setting-not-a-number": (GOOD + "settings:\n  chat.research_timeout_sec: soon\n", 14,
                             "settings.chat.research_timeout_sec", "not an integer"),
    "unknown-setting": (GOOD + "settings:\n  chat.reserch_timeout_sec: 30\n", 14, "settings.chat.reserch_timeout_sec",
                        "unknown setting"),
    "negative-duration": (GOOD.replace("- name: search", "- name: search\n    duration: -1"), 10,
                          "tools[0].duration", "greater than or equal to 0"),
    "two-results-in-one": (GOOD.replace('default: {text: "some evidence about ${query}"}',
                                        'default: {text: "a", error: "b"}'), 10, "tools[0].default", "exactly one of"),
    "bad-tool-kind": (GOOD.replace("- name: search", "- name: search\n    kind: delete"), 10, "tools[0].kind",
                      "'read', 'write' or 'ask'"),
    "bad-stop-reason": (GOOD.replace("stop_reason: answered", "stop_reason: finished"), 12, "expect.stop_reason",
                        "answered"),
    "repeat-zero": (GOOD.replace("- answer: done", "- answer: done\n      repeat: 0"), 8, "provider.script[1].repeat",
                    "greater than or equal to 1"),
    "cancel-both": (GOOD + "cancel: {at: 3, on_event: tool_call}\n", 13, "cancel", "exactly one of"),
    "duplicate-key": (GOOD + "name: again\n", 13, "name", "duplicate key"),
    "yaml-syntax": (GOOD.replace("args: {query: a}}]", "args: {query: a}]"), 6, None, "not valid YAML"),
    "not-a-mapping": ("- just\n- a list\n", 1, None, "must be a mapping"),
    "wrong-type-rounds": (GOOD.replace("stop_reason: answered", "rounds: many"), 12, "expect.rounds", "valid integer"),
    # valid YAML that nothing after it can hold (issue 45, items 11 and 12): named, nothing run or staged
    "lone-surrogate": (GOOD.replace("- answer: done", '- answer: "done \\ud83d"'), 7, "provider.script[1].answer",
                       "lone surrogate"),
    "lone-surrogate-in-a-key": (GOOD.replace("args: {query: a}", 'args: {"q\\udc00": a}'), 6,
                                "provider.script[0].calls[0].args", "lone surrogate"),
    "integer-of-5000-digits": (GOOD.replace("stop_reason: answered", "rounds: " + "9" * 5000), 12, "expect.rounds",
                               "more than 4,300 digits"),
    "setting-of-5000-digits": (GOOD + "settings:\n  chat.research_timeout_sec: -" + "9" * 5000 + "\n", 14,
                               "settings.chat.research_timeout_sec", "more than 4,300 digits"),
    "answer-and-chunks": (GOOD.replace("- answer: done", "- answer: done\n      chunks: [{text: a}]"), 7,
                          "provider.script[1]", "either `answer` or `chunks`"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_malformed_scenario_names_file_line_key(tmp_path: Path, case: str) -> None:
    text, line, key, fragment = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    err = info.value
    assert err.file == str(path)
    assert fragment in str(err), str(err)
    if line is not None:
        assert err.line == line, str(err)
    if key is not None:
        assert err.key == key, str(err)


def test_good_scenario_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(GOOD, encoding="utf-8")
    assert load_scenario(path).name == "ok"


def test_unknown_key_lists_allowed_keys(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(BAD_SCENARIOS["unknown-turn-key"][0], encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    assert "answer" in info.value.expected and "calls" in info.value.expected


def test_non_utf8_scenario(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.encode() + b"description: caf\xe9\n")
    with pytest.raises(UserInputError, match="not UTF-8"):
        load_scenario(path)


HEADER = json.dumps({"format": "imprint-rounds/1", "source": "test", "labels": {}})
CALL = {"tool": "search", "args": {"q": "a"}, "kind": "read", "status": "ok", "result": "text"}


def _round(n: int, **override) -> str:
    return json.dumps({"round": n, "calls": [{**CALL, **override}]})


BAD_LOGS = {
    "empty": ("", 1, "format", "no header"),
    "wrong-format": (json.dumps({"format": "imprint-rounds/2"}) + "\n", 1, "format", "unsupported format"),
    "bad-json": (HEADER + "\n{round: 1}\n", 2, None, "not valid JSON"),
    "not-object": (HEADER + "\n[1, 2]\n", 2, None, "must be a JSON object"),
    "missing-calls": (HEADER + "\n" + json.dumps({"round": 1}) + "\n", 2, "calls", "required key is missing"),
    "round-out-of-order": (HEADER + "\n" + _round(2) + "\n", 2, "round", "out of order"),
    "bad-kind": (HEADER + "\n" + _round(1, kind="delete") + "\n", 2, "calls[0].kind", "unknown kind"),
    "bad-status": (HEADER + "\n" + _round(1, status="fine") + "\n", 2, "calls[0].status", "unknown status"),
    "result-not-string": (HEADER + "\n" + _round(1, result=["a"]) + "\n", 2, "calls[0].result", "must be a string"),
    "args-not-object": (HEADER + "\n" + _round(1, args="q=a") + "\n", 2, "calls[0].args", "must be an object"),
    "unknown-call-key": (HEADER + "\n" + _round(1, reslt="x") + "\n", 2, "calls[0].reslt", "unknown key"),
    "round-not-int": (HEADER + "\n" + json.dumps({"round": "1", "calls": []}) + "\n", 2, "round", "wrong type"),
    "unknown-header-key": (json.dumps({"format": "imprint-rounds/1", "lables": {}}) + "\n", 1, "lables",
                           "unknown header key"),
    "integer-of-5000-digits": (HEADER + "\n" + _round(1) + "\n" + json.dumps({"round": 2, "calls": []})[:-1]
                               + ', "n": ' + "9" * 5000 + "}\n", 3, None, "not readable JSON: an integer of more than"),
    "missing-tool": (HEADER + "\n" + json.dumps({"round": 1, "calls": [{"kind": "read", "status": "ok"}]}) + "\n",
                     2, "calls[0].tool", "required key is missing"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOGS))
def test_malformed_round_log_names_file_line_key(tmp_path: Path, case: str) -> None:
    text, line, key, fragment = BAD_LOGS[case]
    path = tmp_path / f"{case}.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserInputError) as info:
        read_round_log(path)
    err = info.value
    assert err.file == str(path) and err.line == line, str(err)
    assert fragment in str(err), str(err)
    if key is not None:
        assert err.key == key, str(err)


@pytest.mark.parametrize("case", ["unknown-turn-key", "setting-out-of-bounds", "yaml-syntax"])
def test_cli_run_bad_scenario_exits_2_without_traceback(tmp_path: Path, case: str, capsys) -> None:
    path = tmp_path / f"{case}.yaml"
    path.write_text(BAD_SCENARIOS[case][0], encoding="utf-8")
    code = main(["run", str(path), "--traces", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists(), "nothing may be written for unusable input"


@pytest.mark.parametrize("case", ["bad-kind", "round-out-of-order"])
def test_cli_replay_bad_log_exits_2(tmp_path: Path, case: str, capsys) -> None:
    path = tmp_path / f"{case}.jsonl"
    path.write_text(BAD_LOGS[case][0], encoding="utf-8")
    code = main(["replay", str(path)])
    captured = capsys.readouterr()
    assert code == 2 and str(path) in captured.err and captured.out == ""


def test_cli_subprocess_has_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_SCENARIOS["bad-policy"][0], encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--traces", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and f"{path}:13: policy:" in proc.stderr


def test_cli_replay_options_validated(capsys) -> None:
    assert main(["replay", "--patience", "1", "x"]) == 2
    assert "--patience" in capsys.readouterr().err
    assert main(["replay", "--normalization", "fancy", "x"]) == 2
    assert "none, basic, default" in capsys.readouterr().err
