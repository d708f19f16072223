"""Scenario typos are load-time errors naming file, line, key and what is
allowed; scenario files outside `scenarios/` can still be run with pytest;
every scenario file points an editor at the schema, which describes every key."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.scenarios import json_schema, load_scenario
from harness.scenarios.selectors import parse_selector
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = """\
name: typo
question: What is it?
provider:
  kind: stub
  script:
    - calls: [{tool: search, args: {q: it}}]
    - answer: It is this.
tools:
  - name: search
    default: {text: "It is this, says the only source."}
expect:
  stop_reason: answered
  events:
    round_end[progress=true]: 1
"""


def run_file(tmp_path: Path, text: str, capsys) -> tuple[int, str]:
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    code = main(["run", str(path), "--traces", str(tmp_path / "runs")])
    return code, capsys.readouterr().err


def test_the_valid_file_passes(tmp_path: Path, capsys) -> None:
    assert run_file(tmp_path, SCENARIO, capsys)[0] == 0


@pytest.mark.parametrize("selector, message, allowed", [
    ("round_end[progres=true]: 0", "unknown key 'progres' of round_end events", "patience_counter, progress"),
    ("round_endd: 0", "unknown event type 'round_endd'", "request_settled, round_end, run_end"),
    ("tool_resullt[status=ok,kind=write]: 0", "unknown event type 'tool_resullt'", "tool_call, tool_result"),
    ("request_settled[outcme=ok]: 2", "unknown key 'outcme' of request_settled events", "measured_prompt, outcome"),
])
def test_an_unknown_event_type_or_key_is_a_load_time_error(tmp_path: Path, capsys, selector, message,
                                                            allowed) -> None:
    code, err = run_file(tmp_path, SCENARIO + f"    {selector}\n", capsys)
    assert code == 2
    key = selector.rsplit(":", 1)[0]
    assert f"typo.yaml:15: expect.events.{key}: {message} (expected one of " in err
    assert allowed in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()         # nothing ran, nothing written


def test_the_fields_of_a_settled_request_record_are_keys() -> None:
    # request_settled lines carry the ledger's record flat: its fields filter like the event's own
    assert parse_selector("request_settled[outcome=ok,charged=0,interrupted=cancelled]").filters[0] == ("outcome", "ok")
    assert parse_selector("header[scenario=x]").type == "header"       # the header's meta is the caller's


def test_a_call_to_an_undefined_tool_is_a_load_time_error(tmp_path: Path, capsys) -> None:
    code, err = run_file(tmp_path, SCENARIO.replace("{tool: search, args", "{tool: serach, args"), capsys)
    assert code == 2
    assert ("typo.yaml:6: provider.script[0].calls[0].tool: call to undefined tool 'serach'; did you mean 'search'? (expected one of "
            "search, or `undefined: true` for a deliberate call to a missing tool)") in err
    deliberate = SCENARIO.replace("{tool: search, args", "{tool: serach, undefined: true, args")
    assert run_file(tmp_path, deliberate.replace("round_end[progress=true]: 1", "tool_result[status=error]: 1"),
                    capsys)[0] == 0


def test_an_unknown_cancel_event_is_a_load_time_error(tmp_path: Path, capsys) -> None:
    code, err = run_file(tmp_path, SCENARIO + "cancel: {on_event: tool_cal}\n", capsys)
    assert code == 2 and "typo.yaml:15: cancel.on_event: unknown event type 'tool_cal'" in err
    code, err = run_file(tmp_path, SCENARIO + "cancel: {on_event: tool_call, where: {tol: search}}\n", capsys)
    assert code == 2 and "cancel.where.tol: unknown key 'tol' of tool_call events" in err


def test_an_unknown_local_dtype_is_a_load_time_error_naming_every_dtype(tmp_path: Path, capsys) -> None:
    local = SCENARIO.replace("  kind: stub\n  script:\n    - calls: [{tool: search, args: {q: it}}]\n"
                             "    - answer: It is this.\n", "  kind: local\n  dtype: int4\n")
    assert "dtype: int4" in local
    code, err = run_file(tmp_path, local, capsys)
    assert code == 2 and "Traceback" not in err
    assert "typo.yaml:5: provider.dtype: Input should be 'bfloat16', 'float32' or 'int8' (got 'int4')" in err
    assert not (tmp_path / "runs").exists()         # refused before a model loads


def _pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}      # this checkout's plugin, whatever is installed
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def test_pytest_runs_a_scenario_file_named_on_the_command_line(tmp_path: Path) -> None:
    mine = tmp_path / "myscn"
    mine.mkdir()
    (mine / "abab.yaml").write_text(SCENARIO)
    named = _pytest(str(mine / "abab.yaml"), cwd=tmp_path)
    assert named.returncode == 0 and "1 passed" in named.stdout, named.stdout + named.stderr
    folder = _pytest(str(mine), cwd=tmp_path)     # a folder not named scenarios: left out, and said why
    assert "1 *.yaml file(s) in" in folder.stdout and "not collected" in folder.stdout
    assert "named on the command line" in folder.stdout


def test_every_scenario_file_points_an_editor_at_the_schema() -> None:
    files = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert files and all(f.read_text().splitlines()[0] == "# yaml-language-server: $schema=schema.json" for f in files)


def test_the_schema_describes_every_key() -> None:
    schema = json_schema()
    models = {"Scenario": schema, **schema["$defs"]}
    missing = [f"{name}.{key}" for name, m in models.items() for key, p in m.get("properties", {}).items()
               if not p.get("description")] + [name for name, m in models.items() if not m.get("description")]
    assert missing == []
    assert json.loads((ROOT / "scenarios" / "schema.json").read_text()) == schema


FOUR_TYPOS = (SCENARIO.replace("question:", "questoin:")                       # line 2
              .replace("    - answer: It is this.", "    - answr: It is this.")    # line 7
              .replace("    default: {text", "    defualt: {text")             # line 10
              .replace("round_end[progress=true]", "round_endd"))               # line 14


def test_every_problem_of_a_scenario_is_named_at_once_with_its_line_and_key(tmp_path: Path, capsys) -> None:
    # issue 44 item 5: four typos took five runs ("and 3 more problem(s)")
    code, err = run_file(tmp_path, FOUR_TYPOS, capsys)
    assert code == 2 and "more problem" not in err and "Traceback" not in err
    path = tmp_path / "typo.yaml"
    assert f"error: 4 problems in {path}:" in err
    named = [line.strip() for line in err.splitlines()[1:]]
    assert [line.split(": ")[:2] for line in named] == [
        [f"{path}:2", "questoin"], [f"{path}:7", "provider.script[1].answr"], [f"{path}:10", "tools[0].defualt"],
        [f"{path}:14", "expect.events.round_endd"]]
    assert "unknown key 'answr'; did you mean 'answer'?" in named[1]
    assert "unknown key 'defualt'; did you mean 'default'?" in named[2]
    assert "unknown event type 'round_endd'" in named[3]
    assert not (tmp_path / "runs").exists()


def test_a_misspelled_required_key_is_reported_as_unknown_not_as_missing(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(SCENARIO.replace("question:", "questoin:"))
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    err = info.value
    assert (err.line, err.key) == (2, "questoin")
    assert err.message == "unknown key 'questoin'; did you mean 'question'?"
    assert "required key is missing" not in str(err) and "question, settings" in err.expected
    path.write_text(SCENARIO.replace("question:", "asked:"))     # nothing near: the consequence is said too
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    assert [(p.key, p.message) for p in info.value.problems] == [
        ("question", "required key is missing"), ("asked", "unknown key 'asked'")]


def test_a_misspelled_key_inside_a_plain_union_is_suggested_too(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(SCENARIO.replace("  stop_reason: answered", "  rounds: {mn: 1}\n  stop_reason: answerd"))
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    problems = [(p.line, p.key, p.message) for p in info.value.problems]
    assert problems[0] == (12, "expect.rounds.mn", "unknown key 'mn'; did you mean 'min'?")   # not "no valid integer"
    assert problems[1][:2] == (13, "expect.stop_reason") and "(got 'answerd')" in problems[1][2]
    assert len(problems) == 2
