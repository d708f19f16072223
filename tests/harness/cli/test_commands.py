"""The harness commands end to end: run, replay, export-rounds, schema, settings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.realruns.roundlogs import read_round_log, replay, trace_to_round_log
from harness.scenarios.runner import run_scenario
from harness.scenarios import json_schema_text, parse_scenario

ROOT = Path(__file__).resolve().parents[3]
TAU = ROOT.parent / "shared" / "data" / "roundlogs" / "tau-bench-airline"

STAGNANT = """\
name: stagnant
question: q
settings:
  chat.research_no_progress_rounds: 4
provider:
  kind: stub
  script:
    - repeat: 10
      calls: [{tool: search, args: {query: "q${i}"}}]
tools:
  - name: search
    results:
      - {text: "alpha evidence one two three four five six"}
      - {text: "beta evidence seven eight nine ten eleven twelve"}
    cycle: true
expect:
  stop_reason: no_progress
  rounds: 6
"""


def test_schema_file_is_current() -> None:
    assert (ROOT / "scenarios" / "schema.json").read_text(encoding="utf-8") == json_schema_text(), \
        "scenarios/schema.json is stale: run `imprint schema`"


def test_run_json_and_exit_codes(tmp_path: Path, capsys) -> None:
    good = tmp_path / "stagnant.yaml"
    good.write_text(STAGNANT, encoding="utf-8")
    assert main(["run", str(good), "--json", "--traces", str(tmp_path / "runs")]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["scenarios"][0]
    assert row["stop_reason"] == "no_progress" and row["rounds"] == 6 and row["passed"]
    trace = Path(row["trace"])
    assert trace.exists() and json.loads(trace.read_text().splitlines()[0])["format"] == "imprint-trace/1"
    assert json.loads((trace.parent / "summary.json").read_text())["passed"] == 1
    bad = tmp_path / "wrong.yaml"
    bad.write_text(STAGNANT.replace("rounds: 6", "rounds: 7"), encoding="utf-8")
    assert main(["run", str(bad), "--traces", str(tmp_path / "runs")]) == 1
    table = capsys.readouterr().out
    assert "FAIL" in table and "rounds: expected 7, got 6" in table


def test_script_running_out_fails_loudly(tmp_path: Path) -> None:
    scn = parse_scenario(STAGNANT.replace("repeat: 10", "repeat: 2"), "short.yaml")
    run = run_scenario(scn, tmp_path / "t.jsonl")
    assert not run.passed and "ScriptExhausted" in run.error and "turn 3" in run.error


def test_export_rounds_round_trip(tmp_path: Path, capsys) -> None:
    scn = parse_scenario(STAGNANT, "stagnant.yaml")
    run = run_scenario(scn, tmp_path / "t.jsonl")
    out = tmp_path / "rounds.jsonl"
    assert main(["export-rounds", str(tmp_path / "t.jsonl"), "-o", str(out)]) == 0
    log = read_round_log(out)
    assert len(log.rounds) == run.result.rounds == 6
    assert log.rounds[1].calls[0].result.startswith("beta")
    # Our run and its exported log take the same path through the rule.
    assert replay(log, patience=4).stop_round == 6
    assert trace_to_round_log(tmp_path / "t.jsonl") == out.read_text()
    # `imprint replay` takes the trace itself (and a folder holding both) just the same
    capsys.readouterr()
    assert main(["replay", "--json", "--patience", "4", str(tmp_path / "t.jsonl"), str(out)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in rows] == ["trace", "roundlog"]
    assert [r["stop_round"] for r in rows] == [6, 6] and rows[0]["progress_rounds"] == rows[1]["progress_rounds"]


def test_replay_tau_bench_json(capsys) -> None:
    if not TAU.is_dir():
        pytest.skip("shared round logs not present")
    assert main(["replay", "--json", "--patience", "4", str(TAU)]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert len(lines) == 200
    assert set(lines[0]) == {"file", "kind", "rounds", "stop_round", "stop_reason", "progress_rounds"}
    assert {row["kind"] for row in lines} == {"roundlog"}
    for row in lines:
        if row["stop_round"] is not None:
            assert row["stop_reason"] == "no_progress"
            assert row["stop_round"] <= row["rounds"]
            # patience 4: the last 4 rounds before the stop made no progress
            assert not set(row["progress_rounds"]) & set(range(row["stop_round"] - 3, row["stop_round"] + 1))
        assert all(1 <= r <= row["rounds"] for r in row["progress_rounds"])
    assert any(r["stop_round"] for r in lines) and any(r["stop_round"] is None for r in lines)


def test_replay_patience_changes_stops() -> None:
    if not TAU.is_dir():
        pytest.skip("shared round logs not present")
    logs = [read_round_log(p) for p in sorted(TAU.glob("*.jsonl"))[:60]]
    stops2 = sum(replay(l, patience=2).stop_round is not None for l in logs)
    stops20 = sum(replay(l, patience=20).stop_round is not None for l in logs)
    assert stops2 > stops20


def test_settings_cli(tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("# my settings\n[chat]\nmax_tool_iters = 12  # old cap\n", encoding="utf-8")
    monkeypatch.delenv("IMPRINT_CHAT_RESEARCH_NO_PROGRESS_ROUNDS", raising=False)
    assert main(["settings", "set", "chat.research_no_progress_rounds", "6", "--config", str(cfg)]) == 0
    assert main(["settings", "get", "chat.research_no_progress_rounds", "--config", str(cfg), "--json"]) == 0
    out = capsys.readouterr().out.splitlines()[-1]
    assert json.loads(out)["value"] == 6 and json.loads(out)["source"] == "file"
    text = cfg.read_text()
    assert "# my settings" in text and "max_tool_iters = 12  # old cap" in text
    assert main(["settings", "set", "chat.research_no_progress_rounds", "21", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "chat.research_no_progress_rounds" in err and "21" in err and "2–20" in err
    assert main(["settings", "reset", "chat.research_no_progress_rounds", "--config", str(cfg)]) == 0
    assert main(["settings", "list", "--config", str(cfg), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert {r["key"]: r["value"] for r in rows}["chat.research_no_progress_rounds"] == 9
    assert "max_tool_iters = 12" in cfg.read_text()
    assert main(["settings", "get", "chat.nope", "--config", str(cfg)]) == 2


def test_settings_options_go_before_or_after_the_action(tmp_path: Path, capsys, monkeypatch) -> None:
    cfg = str(tmp_path / "config.toml")
    key = "chat.research_no_progress_rounds"
    monkeypatch.delenv("IMPRINT_CHAT_RESEARCH_NO_PROGRESS_ROUNDS", raising=False)
    for argv in (["settings", "--config", cfg, "--json", "get", key],
                 ["settings", "get", key, "--json", "--config", cfg],
                 ["settings", "--json", "get", "--config", cfg, key]):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["key"] == key
    assert main(["settings", "--config", cfg, "set", key, "7"]) == 0
    assert main(["settings", "get", key, "--config", cfg]) == 0 and capsys.readouterr().out.splitlines()[-1] == "7"
    assert main(["settings", "get", "--config", cfg]) == 2
    assert "`settings get` needs a KEY" in capsys.readouterr().err


def test_settings_list_shows_every_setting_as_a_table(tmp_path: Path, capsys) -> None:
    assert main(["settings", "list", "--config", str(tmp_path / "config.toml")]) == 0
    out = capsys.readouterr().out
    assert "chat.research_stop_rule" in out and "FILE.py:FACTORY" in out and "chat.token_counting" in out

def test_model_build_force_goes_before_or_after_the_action(monkeypatch, capsys) -> None:
    from harness.live import model_folder
    forced = []
    monkeypatch.setattr(model_folder, "build_model_dir", lambda force=False, progress=None: forced.append(force))
    for argv in (["model", "build"], ["model", "build", "--force"], ["model", "--force", "build"]):
        assert main(argv) == 0
    assert forced == [False, True, True]
