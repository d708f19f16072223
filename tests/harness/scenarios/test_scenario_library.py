"""The scenario library covers every behaviour the issue lists.

Each scenario is run (and its `expect` judged) by the pytest plugin and by
`imprint run`; this file checks the library itself: enough files, one per
required behaviour, every file loadable, described and with a tight `expect`,
and the pairs that only mean something together (02/03, 18/19) really differ
where they should and agree where they should.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.scenarios.runner import run_scenario
from harness.scenarios import load_scenario
from harness.scenarios.model import StubProviderSpec

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
FILES = sorted(SCENARIOS.glob("*.yaml"))
NAME = re.compile(r"^(\d\d)-([a-z0-9]+(?:-[a-z0-9]+)*)\.yaml$")

# Behaviour the issue requires -> the file that pins it down.
REQUIRED = {
    "an answer at round 1": "01-answer-at-round-1.yaml",
    "research past 12 rounds": "02-past-12-rounds.yaml",
    "chat.max_tool_iters ignored": "03-max-tool-iters-ignored.yaml",
    "identical evidence": "04-identical-evidence.yaml",
    "A B A B": "05-cycle-abab.yaml",
    "A B C A B C": "06-cycle-abcabc.yaml",
    "results reordered": "07-results-reordered.yaml",
    "scores changed": "08-scores-changed.yaml",
    "timestamps changed": "09-timestamps-changed.yaml",
    "new queries returning old evidence": "10-new-queries-old-evidence.yaml",
    "empty reads between rounds of new evidence": "11-empty-reads-between-progress.yaml",
    "changing error texts": "12-changing-errors.yaml",
    "errors interleaved with progress": "13-errors-interleaved-with-progress.yaml",
    "write rounds inside a stagnating run": "14-write-rounds-in-stagnation.yaml",
    "repeated identical writes all executed": "15-identical-writes-all-executed.yaml",
    "token exhaustion with the byte estimate": "16-token-budget-byte-estimate.yaml",
    "token exhaustion with exact counts": "17-token-budget-exact-counts.yaml",
    "reserve policy": "18-policy-reserve.yaml",
    "prefix-refund policy": "19-policy-prefix-refund.yaml",
    "section workers, every request charged": "20-section-workers-charged.yaml",
    "time budget reached during a stream": "21-time-budget-during-stream.yaml",
    "deadline before a tool, pending calls not executed": "22-deadline-pending-not-executed.yaml",
    "a blocking tool overrunning the deadline": "23-blocking-tool-overruns-deadline.yaml",
    "a background write finishing after the deadline": "24-background-write-after-deadline.yaml",
    "cancellation during a stream": "25-cancel-during-stream.yaml",
    "cancellation during a tool": "26-cancel-during-background-read.yaml",
    "cancellation during the final request": "27-cancel-during-final-request.yaml",
    "an ask pausing the clock": "28-ask-pauses-clock.yaml",
    "an ask whose answer resets patience": "29-ask-answer-resets-patience.yaml",
    "final synthesis": "30-final-synthesis.yaml",
    "the labelled fallback": "31-fallback-final-context-too-big.yaml",
    "context_full": "32-context-full.yaml",
    "patience at 2": "33-patience-min-2.yaml",
    "patience at 20": "34-patience-max-20.yaml",
    "provider error with retry": "35-provider-429-retry.yaml",
    "a failed request counts as a no-progress round": "36-failed-request-no-progress.yaml",
    "unknown tool and invalid arguments": "37-unknown-tool-and-invalid-arguments.yaml",
    "a tool that raises": "38-tool-raises.yaml",
}


def _load(name: str):
    return load_scenario(SCENARIOS / name)


def test_library_size_and_names():
    assert len(FILES) >= 33, f"the library needs at least 33 scenarios, found {len(FILES)}"
    numbers = []
    for f in FILES:
        m = NAME.match(f.name)
        assert m, f"{f.name}: scenario files are named NN-short-name.yaml"
        numbers.append(m.group(1))
    assert len(numbers) == len(set(numbers)), "two scenario files share a number"


@pytest.mark.parametrize("behaviour", sorted(REQUIRED))
def test_required_behaviour_has_its_file(behaviour):
    assert (SCENARIOS / REQUIRED[behaviour]).is_file(), f"{behaviour}: {REQUIRED[behaviour]} is missing"


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_every_scenario_is_described_and_tight(path):
    scn = load_scenario(path)
    assert scn.name == NAME.match(path.name).group(2), "the scenario's name is its file name without number"
    assert len(scn.description.split()) >= 25, "say what behaviour is pinned and why the numbers are what they are"
    e = scn.expect
    assert e.stop_reason is not None and e.final_mode is not None, "expect a stop reason and a final mode"
    assert e.rounds is not None and e.requests is not None, "expect rounds and requests"
    assert e.events or e.answer_contains, "expect some trace events (or answer text)"


def test_required_settings_are_what_the_names_say():
    assert _load("03-max-tool-iters-ignored.yaml").settings["chat.max_tool_iters"] == 3
    assert _load("16-token-budget-byte-estimate.yaml").provider.counter == "bytes"
    assert _load("17-token-budget-exact-counts.yaml").provider.counter == "exact"
    assert _load("18-policy-reserve.yaml").policy == "reserve"
    assert _load("19-policy-prefix-refund.yaml").policy == "prefix-refund"
    assert _load("20-section-workers-charged.yaml").loop.section_workers is True
    assert _load("33-patience-min-2.yaml").settings["chat.research_no_progress_rounds"] == 2
    assert _load("34-patience-max-20.yaml").settings["chat.research_no_progress_rounds"] == 20
    assert any(t.kind == "ask" for t in _load("28-ask-pauses-clock.yaml").tools)
    assert _load("27-cancel-during-final-request.yaml").cancel.on_event == "final_request"
    chunks = _load("21-time-budget-during-stream.yaml").provider.script
    assert any(t.chunk_delay > 0 or t.chunks for t in chunks)


def _same_input(a, b, differing: set[str]) -> None:
    da, db = a.model_dump(), b.model_dump()
    for key in {"name", "description", "expect"} | differing:
        da.pop(key, None)
        db.pop(key, None)
    assert da == db


def test_old_round_cap_is_ignored_pair():
    """02 and 03 differ only in the legacy key, and run identically."""
    a, b = _load("02-past-12-rounds.yaml"), _load("03-max-tool-iters-ignored.yaml")
    _same_input(a, b, {"settings"})
    assert b.settings == {**a.settings, "chat.max_tool_iters": 3}
    ra, rb = run_scenario(a).row(), run_scenario(b).row()
    for key in ("stop_reason", "final_mode", "rounds", "requests", "reserved", "charged", "refunded"):
        assert ra[key] == rb[key], key
    assert ra["rounds"] > 12


def test_policies_pair_reaches_different_round_counts():
    """18 and 19 differ only in the policy, and stop on the token budget at
    different rounds."""
    a, b = _load("18-policy-reserve.yaml"), _load("19-policy-prefix-refund.yaml")
    _same_input(a, b, {"policy"})
    assert isinstance(a.provider, StubProviderSpec)
    ra, rb = run_scenario(a).row(), run_scenario(b).row()
    assert ra["stop_reason"] == rb["stop_reason"] == "token_budget"
    assert ra["rounds"] < rb["rounds"]
    assert ra["refunded"] == 0 and rb["refunded"] > 0
