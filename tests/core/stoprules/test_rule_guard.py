"""The boundary around a user's stop rule (stoprules/guard.py): whatever it
raises, at whatever round, becomes a RuleFailed naming the rule, the round
and its own line; KeyboardInterrupt passes through; built-ins are not
wrapped; the error survives a trip to a worker process and back."""
from __future__ import annotations

import pickle
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from imprint_core.errors import UserInputError
from imprint_core.stoprules import CallView, RoundView, build
from imprint_core.stoprules.guard import Guarded, RuleFailed

RULE = textwrap.dedent('''\
    import sys

    class Boom(Exception):
        pass

    ERRORS = {"value": lambda: ValueError("v"), "key": lambda: KeyError("k"), "boom": lambda: Boom("b"),
              "exit": lambda: SystemExit(3), "interrupt": lambda: KeyboardInterrupt()}

    class R:
        def __init__(self, at, what):
            self.at, self.what = at, what
        def observe(self, round):
            if round.index == self.at:
                raise ERRORS[self.what]()
        def reset(self):
            pass

    def make(at=1, what="value"):
        return R(at, what)
''')
RAISING_LINE = 14


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("rules") / "boom.py"
    path.write_text(RULE)
    return str(path)


def rounds(n: int) -> list[RoundView]:
    return [RoundView.of(i, [CallView("search", {"q": str(i)}, "read", "ok", f"r{i}")]) for i in range(1, n + 1)]


@settings(max_examples=30, deadline=None)
@given(at=st.integers(1, 12), what=st.sampled_from(["value", "key", "boom", "exit"]))
def test_any_failure_at_any_round_is_named(rule_file, at, what) -> None:
    rule = build(f"{rule_file}:make", {"at": at, "what": what})
    assert isinstance(rule, Guarded)
    for r in rounds(at - 1):
        assert rule.observe(r) is None               # the rule's own answers pass through unchanged
    with pytest.raises(RuleFailed) as info:
        rule.observe(rounds(at)[-1])
    err = info.value
    assert isinstance(err, UserInputError)
    assert (err.round, err.call, err.line) == (at, "observe", RAISING_LINE)
    assert err.file.endswith("boom.py") and err.rule == f"{rule_file}:make"
    assert err.run is None and f"round {at}" in str(err)
    named = err.in_run("logs/x.jsonl").in_run("another")   # the innermost run is the one named
    assert named.run == "logs/x.jsonl" and "run logs/x.jsonl, round" in named.describe()
    back = pickle.loads(pickle.dumps(named))
    assert isinstance(back, RuleFailed) and back.describe() == named.describe() and back.round == at


def test_keyboard_interrupt_is_not_the_rules_mistake(rule_file) -> None:
    rule = build(f"{rule_file}:make", {"at": 2, "what": "interrupt"})
    rule.observe(rounds(1)[0])
    with pytest.raises(KeyboardInterrupt):
        rule.observe(rounds(2)[-1])


@pytest.mark.parametrize("name", ["record", "gemini-cli", "round-cap"])
def test_built_in_rules_are_not_wrapped(name) -> None:
    assert not isinstance(build(name), Guarded)
