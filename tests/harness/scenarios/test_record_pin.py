"""`imprint record --pin`: a scenario's expect block is rewritten to what its
recording did, the rest of the file is left byte for byte, and the offline
replay of the cassette meets what was pinned. Uses a committed recording."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.scenarios.record import pin_expect, recorded_expect
from harness.scenarios.runner import run_scenario
from harness.scenarios import load_scenario
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "scenarios" / "66-remote-transformers-research-stream.yaml"
CASSETTE = "traces/cassettes/transformers/66-remote-transformers-research-stream.yaml"
TRACE = ROOT / "traces" / "cassettes" / "transformers" / "66-remote-transformers-research-stream.trace.jsonl"


def scenario_with(tmp_path: Path, expect_block: str, *, expect_last: bool) -> Path:
    """The committed scenario, pointed at its committed cassette, with
    `expect_block` in place of its expect block (last, or before tools)."""
    text = SOURCE.read_text()
    head, tools = text[:text.index("\ntools:\n")], text[text.index("\ntools:\n"):text.index("\nexpect:\n")]
    head = head.replace("  stream: true\n", f"  stream: true\n  cassette: {CASSETTE}\n")
    body = head + tools + "\n" + expect_block if expect_last else head + "\n" + expect_block + tools.lstrip("\n") + "\n"
    path = tmp_path / "66-pinned.yaml"
    path.write_text(body)
    return path


def test_recorded_expect_is_what_the_trace_did():
    pinned = recorded_expect(TRACE)
    assert pinned == {"stop_reason": "no_progress", "final_mode": "synthesized", "rounds": 4, "requests": 4,
                      # exact counts (the tool preamble included) and charges reconciled with usage
                      "reserved": 1910, "charged": 574, "refunded": 1336,
                      "events": {"request_settled[outcome=error]": 0, "request_settled[outcome=cut]": 0,
                                 "final_settled": 1, "tool_call": 4}}


@pytest.mark.parametrize("expect_last", [True, False])
def test_pin_rewrites_only_the_expect_block_and_the_replay_meets_it(tmp_path, expect_last):
    path = scenario_with(tmp_path, "expect:\n  stop_reason: answered  # stale\n  rounds: 1\n",
                         expect_last=expect_last)
    before = path.read_text()
    assert not run_scenario(load_scenario(path)).passed
    pin_expect(path, recorded_expect(TRACE))
    after = path.read_text()
    outside = lambda t: [ln for ln in t.splitlines() if ln and not ln.startswith((" ", "expect:"))]  # noqa: E731
    assert outside(after) == outside(before)  # every other top-level line kept, in order
    assert "# stale" not in after and yaml.safe_load(after)["tools"][0]["name"] == "search"
    run = run_scenario(load_scenario(path))
    assert run.passed, run.failures
    assert load_scenario(path).expect.rounds == 4


def test_pin_keeps_keys_it_does_not_pin(tmp_path):
    path = scenario_with(tmp_path, "expect:\n  stop_reason: answered\n  answer_contains: [tide]\n"
                                   "  events:\n    tool_result[status=ok]: 4\n", expect_last=True)
    pin_expect(path, recorded_expect(TRACE))
    expect = yaml.safe_load(path.read_text())["expect"]
    assert expect["answer_contains"] == ["tide"] and expect["stop_reason"] == "no_progress"
    assert expect["events"]["tool_result[status=ok]"] == 4 and expect["events"]["tool_call"] == 4


def test_a_scenario_without_expect_gets_one_and_a_broken_result_is_never_written(tmp_path):
    path = scenario_with(tmp_path, "", expect_last=True)
    pin_expect(path, recorded_expect(TRACE))
    assert yaml.safe_load(path.read_text())["expect"]["rounds"] == 4
    before = path.read_text()
    with pytest.raises(UserInputError):
        pin_expect(path, recorded_expect(TRACE) | {"rounds": "many"})
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["66-pinned.yaml"]


def test_a_trace_without_run_end_is_a_clear_error(tmp_path):
    cut = tmp_path / "cut.trace.jsonl"
    cut.write_text("".join(TRACE.read_text().splitlines(keepends=True)[:3]))
    with pytest.raises(UserInputError, match="no run_end"):
        recorded_expect(cut)
