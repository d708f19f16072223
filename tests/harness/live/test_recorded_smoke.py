"""The smoke sessions recorded against the live servers (`imprint smoke
record --server KIND`) replay offline, without a server,
and end exactly as they did live: same stop, rounds, answer, errors and
measured usage, as the trace recorded beside each cassette says."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.live.smoke import estimate_figures, replay_smoke
from imprint_core.trace import read_trace

HERE = Path(__file__).resolve().parents[2] / "cassettes"
CASSETTES = sorted(HERE.glob("*/smoke-*.yaml"))


def test_both_servers_have_recorded_smoke_sessions():
    assert {p.parent.name for p in CASSETTES} == {"transformers", "llamacpp"}
    assert {p.stem for p in CASSETTES} >= {"smoke-stream", "smoke-nostream"}


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_smoke_cassette_replays_as_recorded(path: Path):
    live = read_trace(path.with_suffix(".trace.jsonl"))
    result = replay_smoke(path)
    (end,) = live.of_type("run_end")
    (answer,) = live.of_type("answer")
    assert result.stop_reason.value == end.stop_reason and result.rounds == end.rounds
    assert result.answer == answer.text
    settled = live.of_type("request_settled")
    assert [r.measured_prompt for r in result.records] == [e.measured_prompt for e in settled]
    assert [r.outcome for r in result.records] == [e.outcome for e in settled]
    assert [r.measured_prompt for r in result.final_records] == [e.measured_prompt
                                                                 for e in live.of_type("final_settled")]


def test_streams_report_usage_as_each_server_does():
    """transformers serve sends usage in its last chunk; llama.cpp's stream
    ends with [DONE] and none, recorded as "not reported"."""
    for path in CASSETTES:
        trace = read_trace(path.with_suffix(".trace.jsonl"))
        ok = [e for e in trace.of_type("request_settled") + trace.of_type("final_settled") if e.outcome == "ok"]
        assert ok, path
        if path.parent.name == "llamacpp" and path.stem == "smoke-stream":
            assert all(e.measured_prompt is None for e in ok)
        else:
            assert all(e.measured_prompt for e in ok)


def test_estimate_figures_from_the_recorded_traces():
    figures = estimate_figures([p.with_suffix(".trace.jsonl") for p in CASSETTES])
    assert figures["requests"] >= 4
    assert 0 < figures["median"] and figures["median"] <= figures["p95"]
    assert 0 <= figures["under_fraction"] <= 1 and figures["safe_bytes_per_token"] > 0
