"""The one loader: traces and round logs into DataFrames."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.frames.load import load_frames
from imprint_core.errors import UserInputError
from imprint_core.trace import read_trace

from reportdata import fact, handmade_trace, round_log, scenario_traces


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("traces")
    scenario_traces(out / "runs")
    handmade_trace(out / "local" / "local.jsonl", provider="local", provider_kind="local", ratios=[1.0] * 6)
    handmade_trace(out / "cassettes" / "llamacpp" / "remote.jsonl", provider="remote", provider_kind="remote",
                   ratios=[0.8, 1.2, 1.1], overrun=12.0, header_extra={"server": "llamacpp"})
    return out


def test_totals_equal_each_traces_run_end(traces: Path) -> None:
    frames = load_frames([traces])
    assert len(frames.runs) == 6
    for run in frames.runs.itertuples(index=False):
        end = read_trace(run.path).of_type("run_end")[0]
        research = frames.requests[(frames.requests["run"] == run.run) & (frames.requests["role"] != "final")]
        for key in ("reserved", "charged", "refunded"):
            assert getattr(run, key) == getattr(end, key)
            assert research[key].sum() == getattr(end, key), (run.name, key)
        assert len(research) == end.requests
        assert (run.stop_reason, run.final_mode, run.rounds) == (end.stop_reason, end.final_mode, end.rounds)


def test_rows_follow_the_events(traces: Path) -> None:
    frames = load_frames([traces / "runs" / "stagnant-writes.jsonl"])
    trace = read_trace(traces / "runs" / "stagnant-writes.jsonl")
    assert len(frames.rounds) == len(trace.of_type("round_end"))
    assert len(frames.tool_calls) == len(trace.of_type("tool_result"))
    r = frames.rounds.set_index("round")
    assert r.loc[3, "kind"] == "write" and r.loc[4, "errors"] == 1
    assert r.loc[6, "stop"] == "no_progress" and r.loc[6, "patience_counter"] == 4
    verdicts = frames.tool_calls.set_index("round")["verdict"]
    assert verdicts.loc[1] == "new" and verdicts.loc[2] == "repeat"
    assert "error" in set(frames.tool_calls.loc[frames.tool_calls["round"] == 4, "verdict"])
    run = frames.runs.iloc[0]
    assert run["stop_round"] == 6 and run["policy"] == "prefix-refund" and run["provider"] == "stub"


def test_providers_from_run_start_and_header(traces: Path) -> None:
    frames = load_frames([traces])
    assert frames.providers == ["local", "remote:llamacpp", "stub"]
    remote = frames.runs[frames.runs["provider"] == "remote:llamacpp"].iloc[0]
    assert remote["provider_kind"] == "remote"
    ratios = frames.requests.loc[frames.requests["provider"] == "remote:llamacpp", "ratio"].round(3).tolist()
    assert ratios == [0.8, 1.2, 1.1]


def test_overruns_against_the_deadline(traces: Path) -> None:
    frames = load_frames([traces])
    late = frames.tool_calls[frames.tool_calls["after_deadline"]]
    assert sorted(late["overrun"].tolist()) == [12.0, 15.0]
    assert set(late["blocking"]) == {True}
    stub = frames.runs[frames.runs["name"] == "overrun"].iloc[0]
    assert stub["overshoot"] == 15.0 and stub["tool_overruns"] == 1 and stub["stop_reason"] == "time_budget"


def test_round_logs_by_their_header_with_user_turns_as_replies(tmp_path: Path) -> None:
    log = round_log(tmp_path / "logs" / "7-1.jsonl",
                    [[{"result": fact(1)}], [{"result": fact(1)}], [{"result": fact(1)}],
                     [{"result": fact(1)}], [{"result": fact(2)}]],
                    labels={"reward": 1.0, "user_turn_before_round": [1, 3]})
    frames = load_frames([tmp_path / "logs"])
    run = frames.runs.iloc[0]
    assert (run["source"], run["name"], run["rounds"], run["reward"]) == ("roundlog", "7-1", 5, 1.0)
    assert frames.rounds["reply"].tolist() == [1, 1, 2, 2, 2]
    # round 3 starts a new reply: fresh store, so fact 1 is new again there
    assert frames.rounds["progress"].tolist() == [True, False, True, False, True]
    assert frames.rounds["patience_counter"].tolist() == [0, 1, 0, 1, 0]
    assert set(frames.tool_calls["source"]) == {"roundlog"}
    ignored = load_frames([log], user_turns="ignore", patience=2)
    assert ignored.rounds["progress"].tolist() == [True, False, False, False, True]
    assert ignored.runs.iloc[0]["stop_round"] == 3


def test_unknown_jsonl_skipped_in_folders_refused_by_name(tmp_path: Path, traces: Path) -> None:
    other = tmp_path / "notes.jsonl"
    other.write_text(json.dumps({"hello": 1}) + "\n")
    (tmp_path / "t.jsonl").write_text((traces / "runs" / "overrun.jsonl").read_text())
    frames = load_frames([tmp_path])
    assert len(frames.runs) == 1 and any("notes.jsonl" in w for w in frames.warnings)
    with pytest.raises(UserInputError) as err:
        load_frames([other])
    assert "notes.jsonl:1: format" in err.value.describe()
    with pytest.raises(UserInputError):
        load_frames([tmp_path / "missing"])


def test_truncated_trace_loads_what_it_has(tmp_path: Path, traces: Path) -> None:
    text = (traces / "runs" / "stagnant-writes.jsonl").read_text()
    lines = text.splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:12]) + lines[12][:20])
    frames = load_frames([cut])
    run = frames.runs.iloc[0]
    assert not run["complete"] and run["warnings"] == 1
    assert run["reserved"] == frames.requests["reserved"].sum()


def test_malformed_trace_names_file_and_line(tmp_path: Path, traces: Path) -> None:
    lines = (traces / "runs" / "overrun.jsonl").read_text().splitlines()
    lines[3] = "{not json"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserInputError) as err:
        load_frames([bad])
    assert f"{bad}:4" in err.value.describe()


def test_round_log_replay_agrees_with_round_progress(tmp_path: Path) -> None:
    from harness.realruns.roundlogs import read_round_log, round_progress
    from imprint_core.novelty import NoveltyConfig
    path = round_log(tmp_path / "w.jsonl", [
        [{"result": fact(1)}], [{"result": fact(1), "kind": "write"}], [{"result": "Error: no", "status": "error"}],
        [{"result": fact(2), "kind": "write"}, {"result": fact(2)}], [{"result": "yes", "kind": "ask"}],
        [{"result": fact(2)}]])
    frames = load_frames([path], user_turns="ignore")
    expected = round_progress(read_round_log(path), NoveltyConfig())
    assert list(zip(frames.rounds["kind"], frames.rounds["progress"])) == expected
    assert frames.tool_calls["verdict"].tolist() == ["new", "not_evidence", "error", "not_evidence", "new",
                                                     "not_evidence", "repeat"]
