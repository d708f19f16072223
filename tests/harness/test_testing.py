"""`harness.testing`: a team's own assertions about where a stop rule stops
a run, through the one replay road (issue 44, item 12). Its docstring's
examples and the README's are run here, from the root of the checkout."""
from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import harness
from harness import testing
from harness.testing import StopAssertionError, assert_stops, replay_stop, stop_round
from harness.realruns.roundlogs import read_round_log, replay
from imprint_core.errors import UserInputError
from imprint_core.stoprules.choice import choose

ROOT = Path(__file__).resolve().parents[2]
LOOP = "tests/fixtures/testing/loop.jsonl"
USEFUL = "tests/fixtures/testing/useful.jsonl"


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_the_module_s_examples_hold() -> None:
    result = doctest.testmod(testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


def test_the_readme_s_ci_example_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(# test_stops\.py.*?)```", readme, re.S)
    assert block, "README: the CI section's `# test_stops.py` example"
    namespace: dict = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for t in tests:
        t()


def test_the_stop_is_the_one_replay_gives() -> None:
    for rule, params in (("record", {"patience": 4}), ("gemini-cli", {"threshold": 3}), ("round-cap", None)):
        want = replay(read_round_log(LOOP), choose(rule, params or {})).stop_round
        assert stop_round(LOOP, rule, params) == want
    assert replay_stop(LOOP, "gemini-cli", {"threshold": 3}).reason.startswith("the same tool call 3 times")


def test_each_assertion_fails_naming_the_run_the_rule_and_the_stop() -> None:
    assert_stops(USEFUL, "record", {"patience": 4}, never=True)
    assert_stops(LOOP, "record", {"patience": 4}, at_round=7)
    assert_stops(LOOP, "record", {"patience": 4})                          # it stops somewhere
    with pytest.raises(StopAssertionError, match=r"loop\.jsonl under record, patience=4: stopped at round 7 of 16 "
                                                 r".*expected no stop before round 8"):
        assert_stops(LOOP, "record", {"patience": 4}, not_before=8)
    with pytest.raises(StopAssertionError, match="expected a stop at round 6"):
        assert_stops(LOOP, "record", {"patience": 4}, at_round=6)
    with pytest.raises(StopAssertionError, match="never stopped in its 12 round.*expected a stop"):
        assert_stops(USEFUL, "gemini-cli")
    with pytest.raises(StopAssertionError, match="expected no stop"):
        assert_stops(LOOP, "gemini-cli", {"threshold": 3}, never=True)
    assert issubclass(StopAssertionError, AssertionError)


def test_mistakes_are_user_errors_naming_the_key() -> None:
    with pytest.raises(UserInputError, match="threshold"):
        stop_round(LOOP, "gemini-cli", {"threshold": "many"})
    with pytest.raises(UserInputError):
        stop_round("tests/fixtures/testing/none.jsonl")
    with pytest.raises(TypeError):
        assert_stops(LOOP, never=True, at_round=3)


def test_the_pytest_plugin_offers_it_as_a_fixture(request) -> None:
    stops = request.getfixturevalue("imprint_stops")    # the plugin `pip install` registers (pytest11)
    assert stops is testing
    assert stops.assert_stops(LOOP, "gemini-cli", {"threshold": 3}, at_round=5).stop_round == 5
