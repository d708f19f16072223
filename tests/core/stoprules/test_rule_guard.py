"""The boundary around a user's stop rule (stoprules/guard.py): whatever it
raises, in its factory, `observe`, `reset` or `notes`, at whatever round,
becomes a RuleFailed naming the rule, the call, the round and its own line;
KeyboardInterrupt passes through; built-ins are not wrapped; the error
survives a trip to a worker process and back."""
from __future__ import annotations

import copy
import pickle
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from imprint_core.errors import UserInputError
from imprint_core.stoprules import CallView, RoundView, build
from imprint_core.stoprules.guard import Guarded, RuleFailed

# `part` chooses which call fails, `what` what it raises.
RULE = textwrap.dedent('''\
    import operator
    import sys

    from imprint_core.stoprules import Rule

    class Boom(Exception):
        pass

    ERRORS = {"value": lambda: ValueError("v"), "key": lambda: KeyError("k"), "boom": lambda: Boom("b"),
              "bare": lambda: Boom(), "exit": lambda: SystemExit(3), "interrupt": lambda: KeyboardInterrupt()}

    class R(Rule):
        def __init__(self, at, what, part):
            self.at, self.what, self.part = at, what, part
        def observe(self, round):
            if self.part == "observe" and round.index == self.at:
                raise ERRORS[self.what]()
        def reset(self):
            if self.part == "reset":
                raise ERRORS[self.what]()
        def notes(self):
            if self.part == "notes":
                raise ERRORS[self.what]()
            return {"at": self.at}

    def make(at=1, what="value", part="observe"):
        if part == "factory":
            raise ERRORS[what]()
        return R(at, what, part)

    class Subscript(Rule):
        observe = operator.itemgetter("x")     # a built-in: no frame of the rule's own in the traceback

    def make_subscript():
        return Subscript()

    # A rule compiled from a string: its frames name a file with no source to show.
    exec(compile("class Generated:\\n    def observe(self, round):\\n        raise ValueError('g')\\n"
                 "    def reset(self):\\n        pass\\n", "<generated>", "exec"))

    def make_generated():
        return Generated()
''')
RAISING = "raise ERRORS[self.what]()"
OBSERVE_LINE, RESET_LINE, NOTES_LINE, FACTORY_LINE = 17, 20, 23, 28
ERROR = {"value": "ValueError: v", "key": "KeyError: 'k'", "boom": "Boom: b", "bare": "Boom", "exit": "SystemExit(3)"}


@pytest.fixture(scope="module")
def rule_file(tmp_path_factory) -> str:
    lines = RULE.splitlines()    # the lines the tests expect named are the raising ones
    assert [lines[n - 1].strip() for n in (OBSERVE_LINE, RESET_LINE, NOTES_LINE)] == [RAISING] * 3
    assert lines[FACTORY_LINE - 1].strip() == "raise ERRORS[what]()"
    path = tmp_path_factory.mktemp("rules") / "boom.py"
    path.write_text(RULE)
    return str(path)


def rounds(n: int) -> list[RoundView]:
    return [RoundView.of(i, [CallView("search", {"q": str(i)}, "read", "ok", f"r{i}")]) for i in range(1, n + 1)]


def failure(call, *args) -> RuleFailed:
    with pytest.raises(RuleFailed) as info:
        call(*args)
    return info.value


@settings(max_examples=30, deadline=None)
@given(at=st.integers(1, 12), what=st.sampled_from(sorted(ERROR)))
def test_any_failure_at_any_round_is_named(rule_file, at, what) -> None:
    spec = f"{rule_file}:make"
    rule = build(spec, {"at": at, "what": what})
    assert isinstance(rule, Guarded)
    for r in rounds(at - 1):
        assert rule.observe(r) is None               # the rule's own answers pass through unchanged
    err = failure(rule.observe, rounds(at)[-1])
    assert isinstance(err, UserInputError)
    assert (err.round, err.call, err.line, err.file, err.rule, err.run) == (at, "observe", OBSERVE_LINE, rule_file,
                                                                           spec, None)
    assert str(err) == (f"{rule_file}:{OBSERVE_LINE}: stop rule {spec} raised {ERROR[what]} in observe "
                        f"(round {at}): observe: {RAISING}")
    named = err.in_run("logs/x.jsonl").in_run("another")   # the innermost run is the one named
    assert named.run == "logs/x.jsonl"
    assert named.describe() == (f"{rule_file}:{OBSERVE_LINE}: stop rule {spec} raised {ERROR[what]} in observe "
                                f"(run logs/x.jsonl, round {at}): observe: {RAISING}")
    back = pickle.loads(pickle.dumps(named))
    assert isinstance(back, RuleFailed) and back.describe() == named.describe() and back.round == at


def test_a_factory_that_raises_is_named_without_a_round(rule_file) -> None:
    spec = f"{rule_file}:make"
    err = failure(build, spec, {"part": "factory", "what": "boom"})
    assert (err.round, err.call, err.line) == (None, "its factory", FACTORY_LINE)
    assert str(err) == (f"{rule_file}:{FACTORY_LINE}: stop rule {spec} raised Boom: b in its factory: "
                        "make: raise ERRORS[what]()")
    assert err.in_run("r.jsonl").message == (f"stop rule {spec} raised Boom: b in its factory (run r.jsonl): "
                                             "make: raise ERRORS[what]()")


@settings(max_examples=10, deadline=None)
@given(seen=st.integers(0, 5))
def test_reset_and_notes_failures_name_their_call_and_round(rule_file, seen) -> None:
    spec = f"{rule_file}:make"
    for part, line, round_named in (("reset", RESET_LINE, seen + 1), ("notes", NOTES_LINE, seen)):
        rule = build(spec, {"part": part, "what": "boom", "at": 99})
        for r in rounds(seen):
            rule.observe(r)
        err = failure(getattr(rule, part))
        # before any round a reset or notes belongs to no round; a reset after round k starts round k + 1
        expected = None if seen == 0 else round_named
        assert (err.call, err.round, err.line, err.rule) == (part, expected, line, spec)
        where = "" if expected is None else f" (round {expected})"
        assert err.message == f"stop rule {spec} raised Boom: b in {part}{where}: {part}: {RAISING}"


def test_a_failure_with_no_frame_of_the_rules_own_names_no_line(rule_file) -> None:
    view = rounds(1)[0]
    try:
        view["x"]
    except TypeError as exc:
        said = f"TypeError: {exc}"
    err = failure(build(f"{rule_file}:make_subscript").observe, view)
    assert (err.file, err.line) == (None, None)        # not a line of the guard's own
    assert str(err) == f"stop rule {rule_file}:make_subscript raised {said} in observe (round 1)"


def test_a_frame_without_source_is_named_by_its_function(rule_file) -> None:
    err = failure(build(f"{rule_file}:make_generated").observe, rounds(1)[0])
    assert (err.file, err.line) == ("<generated>", 3)
    assert err.message == f"stop rule {rule_file}:make_generated raised ValueError: g in observe (round 1): observe"


CALLS_A_LIBRARY = textwrap.dedent('''\
    import functools
    import json

    class R:
        def observe(self, round):
            return json.loads("not json")
        def reset(self):
            pass

    def make_rule():
        return R()

    make = functools.partial(make_rule)
''')


def test_the_line_named_is_the_rules_own_not_the_librarys_it_called(tmp_path) -> None:
    # The factory is a partial, whose source cannot be read: the rule's file is
    # known from the spec alone, here a path with a colon in it (as on Windows).
    path = tmp_path / "c:rules" / "lib.py"
    path.parent.mkdir()
    path.write_text(CALLS_A_LIBRARY)
    err = failure(build(f"{path}:make").observe, rounds(1)[0])
    assert (err.file, err.line) == (str(path), 6)
    assert err.message.endswith(': observe: return json.loads("not json")')


def test_a_rule_named_by_module_names_the_line_in_that_module(tmp_path, monkeypatch) -> None:
    (tmp_path / "guard_test_rules.py").write_text(CALLS_A_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "guard_test_rules", raising=False)
    err = failure(build("guard_test_rules:make_rule").observe, rounds(1)[0])
    assert (err.file, err.line) == (str(tmp_path / "guard_test_rules.py"), 6)
    assert err.rule == "guard_test_rules:make_rule"


def test_a_guarded_rule_shows_the_rules_own_name_and_attributes(rule_file) -> None:
    rule = build(f"{rule_file}:make", {"at": 4, "what": "key"})
    assert rule.name == f"{rule_file}:make"
    assert (rule.at, rule.what, rule.part) == (4, "key", "observe")
    with pytest.raises(AttributeError):
        rule.no_such_attribute
    twin = copy.deepcopy(rule)                       # copies like any object, the boundary included
    assert isinstance(twin, Guarded) and twin.at == 4 and twin.inner is not rule.inner
    assert failure(twin.observe, rounds(4)[-1]).round == 4


def test_keyboard_interrupt_is_not_the_rules_mistake(rule_file) -> None:
    rule = build(f"{rule_file}:make", {"at": 2, "what": "interrupt"})
    rule.observe(rounds(1)[0])
    with pytest.raises(KeyboardInterrupt):
        rule.observe(rounds(2)[-1])


@pytest.mark.parametrize("name", ["record", "gemini-cli", "round-cap"])
def test_built_in_rules_are_not_wrapped(name) -> None:
    assert not isinstance(build(name), Guarded)
