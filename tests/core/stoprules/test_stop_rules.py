"""The built-in stop rules on small hand-made rounds: each documented
threshold exactly (no stop one round before it, a stop at it), reset at a
new reply, parameters checked, and a user's rule from a file or module."""
from __future__ import annotations

import json
import re
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from imprint_core.errors import UserInputError
from imprint_core.stoprules import CallView, RoundView, available, build, parse_params, resolve


def call(tool="search", status="ok", result="r", kind="read", **args) -> CallView:
    return CallView(tool, args, kind, status, result)


def rnd(i: int, *calls: CallView, kind: str | None = None) -> RoundView:
    return RoundView.of(i, calls, kind)


def first_stop(rule, rounds) -> int | None:
    for r in rounds:
        if rule.observe(r):
            return r.index
    return None


def distinct(n: int) -> list[RoundView]:
    return [rnd(i, call(q=f"query {i}", result=f"fresh fact number {i} about topic {i * 7}")) for i in range(1, n + 1)]


def same(n: int, start: int = 1, **kw) -> list[RoundView]:
    return [rnd(i, call(q="same", **kw)) for i in range(start, start + n)]


# ---- round-cap ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cap", [1, 2, 12, 30])
def test_round_cap_stops_exactly_at_its_cap(cap):
    assert first_stop(build("round-cap", {"max_rounds": cap}), distinct(cap + 5)) == cap
    assert first_stop(build("round-cap", {"max_rounds": cap}), distinct(cap - 1)) is None


def test_round_cap_defaults_to_the_record_s_twelve_and_counts_per_reply():
    rule = build("round-cap")
    assert first_stop(rule, distinct(11)) is None
    rule.reset()
    assert first_stop(rule, distinct(11)) is None   # a new reply starts counting again
    assert "12" in rule.observe(rnd(23, call()))    # the reply's 12th round


# ---- identical-batch ---------------------------------------------------------------------------
def test_identical_batch_stops_at_the_first_repeated_batch_by_default():
    assert first_stop(build("identical-batch"), distinct(3) + same(2, start=4)) == 5
    assert first_stop(build("identical-batch"), distinct(6)) is None


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_identical_batch_counts_consecutive_batches_only(repeats):
    rule = build("identical-batch", {"repeats": repeats})
    assert first_stop(rule, same(repeats - 1)) is None
    assert first_stop(rule, same(1, start=repeats)) == repeats
    # an alternation is never two identical consecutive batches: the record's reason to reject it
    ab = [rnd(i, call(q="a" if i % 2 else "b")) for i in range(1, 20)]
    assert first_stop(build("identical-batch", {"repeats": repeats}), ab) is None


def test_identical_batch_compares_arguments_and_order():
    rule = build("identical-batch")
    r1 = rnd(1, call(q="a"), call("fetch", url="u"))
    assert rule.observe(r1) is None
    assert rule.observe(rnd(2, call("fetch", url="u"), call(q="a"))) is None    # other order: another batch
    assert rule.observe(rnd(3, call("fetch", url="u"), call(q="a"))) is not None
    assert rule.observe(rnd(4, kind="error")) is None                          # no batch ends the streak
    assert rule.observe(rnd(5, call("fetch", url="u"), call(q="a"))) is None


# ---- gemini-cli --------------------------------------------------------------------------------
def test_gemini_cli_stops_at_five_identical_calls_in_a_row():
    assert first_stop(build("gemini-cli"), same(4)) is None
    assert first_stop(build("gemini-cli"), same(5)) == 5


@pytest.mark.parametrize("threshold", [2, 3, 7])
def test_gemini_cli_threshold_is_counted_over_calls_not_rounds(threshold):
    rule = build("gemini-cli", {"threshold": threshold})
    # threshold - 1 identical calls in one round, then one more in the next
    assert rule.observe(rnd(1, *[call(q="x")] * (threshold - 1))) is None
    assert rule.observe(rnd(2, call(q="x"))) is not None


def test_gemini_cli_ignores_results_and_resets_on_another_call():
    rule = build("gemini-cli", {"threshold": 3})
    rounds = [rnd(1, call(q="x", result="1")), rnd(2, call(q="x", result="2")), rnd(3, call(q="y")),
              rnd(4, call(q="x")), rnd(5, call(q="x"))]
    assert first_stop(rule, rounds) is None
    assert rule.observe(rnd(6, call(q="x", result="other"))) is not None   # results do not matter to it
    rule.reset()
    assert rule.observe(rnd(7, call(q="x"))) is None


def test_gemini_cli_keys_arguments_in_their_order_like_json_stringify():
    rule = build("gemini-cli", {"threshold": 2})
    assert rule.observe(rnd(1, CallView("s", {"a": 1, "b": 2}, "read", "ok", ""))) is None
    assert rule.observe(rnd(2, CallView("s", {"b": 2, "a": 1}, "read", "ok", ""))) is None


# ---- openhands ---------------------------------------------------------------------------------
def test_openhands_repeated_action_and_observation_four_times():
    assert first_stop(build("openhands"), same(3)) is None
    assert first_stop(build("openhands"), same(4)) == 4
    # the same action with changing observations is no such loop
    changing = [rnd(i, call(q="same", result=f"output {i}")) for i in range(1, 9)]
    assert first_stop(build("openhands"), changing) is None


def test_openhands_same_action_failing_three_times():
    assert first_stop(build("openhands"), same(2, status="error")) is None
    errors = [rnd(i, call(q="same", status="error", result=f"Traceback line {i}")) for i in range(1, 4)]
    assert first_stop(build("openhands"), errors) == 3
    assert first_stop(build("openhands", {"repeat_errors": 5}), errors) is None


def test_openhands_alternating_pattern_over_six_steps():
    ab = [rnd(i, call(q="a" if i % 2 else "b", result="A" if i % 2 else "B")) for i in range(1, 10)]
    assert first_stop(build("openhands"), ab[:5]) is None
    assert first_stop(build("openhands"), ab) == 6
    assert first_stop(build("openhands", {"alternating_steps": 8}), ab) == 8


def test_openhands_empty_replies_three_in_a_row():
    rule = build("openhands")
    assert first_stop(rule, [rnd(1, kind="error"), rnd(2, kind="error")]) is None
    assert rule.observe(rnd(3, kind="error")) is not None
    rule = build("openhands")
    assert first_stop(rule, [rnd(1, kind="error"), rnd(2, kind="error"), rnd(3, call()), rnd(4, kind="error")]) is None


def test_openhands_checks_after_every_call_of_a_batch():
    rule = build("openhands")
    assert rule.observe(rnd(1, *[call(q="s")] * 4)) is not None


# ---- result-aware-repeat -----------------------------------------------------------------------
def test_result_aware_repeat_needs_the_result_to_repeat_too():
    assert first_stop(build("result-aware-repeat"), same(3)) is None        # round 1 is new
    assert first_stop(build("result-aware-repeat"), same(4)) == 4
    # a verification cycle: the same command re-run with a new result each time is not a repeat
    rerun = [rnd(i, call("bash", result=f"{i} passed, {9 - i} failed", cmd="pytest")) for i in range(1, 9)]
    assert first_stop(build("result-aware-repeat"), rerun) is None


def test_result_aware_repeat_catches_non_consecutive_cycles():
    abc = [rnd(i, call(q="abc"[i % 3], result="ABC"[i % 3])) for i in range(0, 12)]
    abc = [RoundView(i + 1, r.kind, r.calls) for i, r in enumerate(abc)]
    assert first_stop(build("result-aware-repeat", {"repeats": 3}), abc) == 6   # 4, 5, 6 repeat 1, 2, 3


@given(st.integers(1, 6))
@settings(max_examples=20, deadline=None)
def test_result_aware_repeat_threshold_is_exact(repeats):
    rule = build("result-aware-repeat", {"repeats": repeats})
    assert first_stop(rule, same(repeats)) is None
    assert rule.observe(rnd(repeats + 1, call(q="same"))) is not None


def test_result_aware_repeat_memory_is_bounded():
    rule = build("result-aware-repeat", {"memory": 2})
    for r in distinct(3):
        rule.observe(r)
    assert len(rule.seen) == 2
    assert rule.observe(distinct(1)[0]) is None       # forgotten: no longer a repeat


# ---- record ------------------------------------------------------------------------------------
@pytest.mark.parametrize("patience", [2, 4, 9])
def test_record_stops_after_patience_rounds_without_new_evidence(patience):
    rounds = distinct(1) + same(patience + 3, start=2, result="fresh fact number 1 about topic 7")
    assert first_stop(build("record", {"patience": patience}), rounds[:patience]) is None
    assert first_stop(build("record", {"patience": patience}), rounds) == patience + 1


def test_record_leaves_write_rounds_out_and_errors_in():
    rule = build("record", {"patience": 2})
    assert rule.observe(distinct(1)[0]) is None
    writes = [rnd(i, call("save", kind="write", result="saved")) for i in (2, 3, 4)]
    assert first_stop(rule, writes) is None
    assert rule.notes()["patience_counter"] == 0
    assert rule.observe(rnd(5, call(status="error", result="timeout 1"))) is None
    assert rule.observe(rnd(6, call(status="error", result="timeout 2"))) is not None


def test_record_accepts_novelty_fields_as_parameters_and_rejects_the_record_s_bounds():
    rule = build("record", {"patience": "3", "normalization": "none", "min_new_shingles": "1"})
    assert rule.config.normalization == "none" and rule.patience.patience == 3
    for bad in ({"patience": 1}, {"patience": 21}, {"normalization": "nope"}):
        with pytest.raises(UserInputError):
            build("record", bad)


# ---- any ---------------------------------------------------------------------------------------
def test_any_stops_when_its_first_rule_stops_and_names_it():
    rule = build("any", {"rules": "round-cap,gemini-cli", "round-cap.max_rounds": "3", "gemini-cli.threshold": "2"})
    assert rule.observe(rnd(1, call(q="a"))) is None
    why = rule.observe(rnd(2, call(q="a")))
    assert why.startswith("gemini-cli:")
    rule = build("any", {"rules": ["round-cap", "gemini-cli"], "round-cap.max_rounds": 3})
    assert first_stop(rule, distinct(5)) == 3


def test_any_rejects_a_parameter_of_no_member():
    with pytest.raises(UserInputError) as info:
        build("any", {"rules": "round-cap", "gemini-cli.threshold": "2"})
    assert "gemini-cli.threshold" in str(info.value)


# ---- the registry ------------------------------------------------------------------------------
def test_every_built_in_is_listed_with_its_source_and_defaults():
    names = {i.name: i for i in available()}
    assert {"record", "round-cap", "identical-batch", "openhands", "gemini-cli", "result-aware-repeat",
            "any"} <= set(names)
    assert names["round-cap"].params == {"max_rounds": 12}
    assert names["gemini-cli"].params == {"threshold": 5}
    assert names["openhands"].params == {"repeat_pairs": 4, "repeat_errors": 3, "alternating_steps": 6,
                                         "empty_replies": 3}
    assert all(i.source for i in names.values())


def test_unknown_rules_and_parameters_name_what_exists():
    with pytest.raises(UserInputError) as info:
        resolve("gemini")
    assert "gemini-cli" in info.value.expected and info.value.key == "--rule"
    with pytest.raises(UserInputError) as info:
        build("gemini-cli", {"treshold": "3"})
    assert "threshold" in info.value.expected
    with pytest.raises(UserInputError) as info:
        build("gemini-cli", {"threshold": "three"})
    assert "int" in info.value.message
    with pytest.raises(UserInputError):
        build("round-cap", {"max_rounds": 0})
    with pytest.raises(UserInputError):
        parse_params(["threshold"])
    assert parse_params(["a=1", "b= x=y"]) == {"a": "1", "b": " x=y"}


USER_RULE = '''
class ThreeSame:
    def __init__(self, n):
        self.n, self.last, self.count = n, None, 0

    def observe(self, round):
        key = [(c.tool, c.args) for c in round.calls]
        self.count = self.count + 1 if key == self.last else 1
        self.last = key
        return f"{self.n} identical rounds" if self.count >= self.n else None

    def reset(self):
        self.last, self.count = None, 0


def make(n=3):
    """Stop after n identical rounds in a row."""
    return ThreeSame(n)
'''


def test_a_rule_in_a_file_outside_the_project_is_built_with_its_parameters(tmp_path):
    f = tmp_path / "myrule.py"
    f.write_text(USER_RULE)
    info = resolve(f"{f}:make")
    assert info.params == {"n": 3} and info.origin == "file" and "identical rounds" in info.summary
    rule = build(f"{f}:make", {"n": "2"})
    assert first_stop(rule, same(5)) == 2
    assert rule.notes() == {}


def test_a_broken_rule_file_is_a_clear_error(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("def make(:\n")
    with pytest.raises(UserInputError) as info:
        resolve(f"{f}:make")
    assert info.value.file == str(f) and info.value.line == 1
    f.write_text("def other():\n    return 1\n")
    with pytest.raises(UserInputError) as info:
        resolve(f"{f}:make")
    assert "other" in info.value.expected
    with pytest.raises(UserInputError):
        build(f"{f}:other")            # returns no rule
    with pytest.raises(UserInputError):
        resolve(str(tmp_path / "missing.py") + ":make")


def test_a_rule_from_an_importable_module(tmp_path, monkeypatch):
    (tmp_path / "team_rules.py").write_text(USER_RULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert first_stop(build("team_rules:make"), same(3)) == 3
    with pytest.raises(UserInputError):
        resolve("no_such_module_anywhere:make")


# ---- the candidate: outcome-repeat and repeat-aware --------------------------------------------
PAGE = ("I clicked 'Select Year:'. Here is a screenshot of [Fubo - News](https://ir.fubo.tv/news/). The viewport "
        "shows 14% of the webpage. Automatic OCR of the page screenshot has detected the following text: Overview "
        "News Events Presentations Financials Governance press release list for 2024 quarterly results")


def page(i: int, noise: str = "") -> RoundView:
    return rnd(i, call("WebSurfer", result=PAGE + noise, instruction=f"please try again, attempt {i}"))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_outcome_repeat_page_revisits_stop_at_page_repeats(n):
    rule = build("outcome-repeat", {"page_repeats": n})
    rounds = [page(1)] + [page(i, noise=f" ocr{'l' * i}") for i in range(2, n + 5)]
    assert first_stop(build("outcome-repeat", {"page_repeats": n}), rounds[:n]) is None
    assert first_stop(rule, rounds) == n + 1


def test_outcome_repeat_a_page_with_new_content_is_new():
    rule = build("outcome-repeat", {"page_repeats": 1})
    assert rule.observe(page(1)) is None
    other = PAGE.replace("press release list for 2024 quarterly results",
                         "Fubo announces its 2020 leadership: a new chief financial officer and a new head of "
                         "content join the company, with biographies and start dates for each of them")
    assert rule.observe(rnd(2, call("WebSurfer", result=other))) is None
    assert rule.notes()["calls"] == "new"


@pytest.mark.parametrize("n", [1, 2, 4])
def test_outcome_repeat_the_same_action_failing_the_same_way_stops_at_error_repeats(n):
    fail = [rnd(i, call("book", kind="write", status="error", result="Error: total price is 1203, paid 833",
                        user="u1", amount=833)) for i in range(1, n + 4)]
    assert first_stop(build("outcome-repeat", {"error_repeats": n}), fail[:n]) is None   # the first error is new
    assert first_stop(build("outcome-repeat", {"error_repeats": n}), fail) == n + 1


def test_outcome_repeat_the_same_error_after_another_action_weighs_as_an_action_repeat():
    tries = [rnd(i, call("click", status="error", result="Invalid action!", element=f"item {i}")) for i in range(1, 9)]
    rule = build("outcome-repeat", {"error_repeats": 1, "action_repeats": 3})
    assert first_stop(rule, tries) == 4       # rounds 2, 3, 4 each add a third
    assert first_stop(build("outcome-repeat", {"error_repeats": 1, "action_repeats": 8}), tries) is None


@pytest.mark.parametrize("n", [2, 3, 6])
def test_outcome_repeat_actions_repeated_with_near_duplicate_results_stop_at_action_repeats(n):
    rounds = [rnd(i, call("bash", result="FAILED test_x.py::test_a - AssertionError: 3 != 4", cmd="pytest -x"))
              for i in range(1, n + 4)]
    assert first_stop(build("outcome-repeat", {"action_repeats": n}), rounds[:n]) is None
    assert first_stop(build("outcome-repeat", {"action_repeats": n}), rounds) == n + 1


def test_outcome_repeat_a_write_resets_and_the_same_write_again_is_a_repeat():
    test = lambda i: rnd(i, call("bash", result="FAILED test_a", cmd="pytest"))   # noqa: E731
    edit = lambda i, s: rnd(i, call("bash", kind="write", result="", cmd=f"sed -i {s} f.py"))   # noqa: E731
    rule = build("outcome-repeat", {"action_repeats": 2, "write_repeats": 2})
    # test, edit, test, edit, test: each edit is new, so the failing re-runs never add up
    assert first_stop(rule, [test(1), edit(2, "a"), test(3), edit(4, "b"), test(5), edit(6, "c"), test(7)]) is None
    # restore-and-reapply: the same two edits again are repeats of their own kind
    rule = build("outcome-repeat", {"action_repeats": 2, "write_repeats": 2})
    rounds = [test(1), edit(2, "a"), test(3), edit(4, "undo"), test(5), edit(6, "a"), test(7), edit(8, "undo")]
    assert first_stop(rule, rounds) == 6      # 5 (the failing test again: 1/2) + 6 (edit a again: 1/2)
    neutral = build("outcome-repeat", {"action_repeats": 2, "writes": "neutral"})
    assert first_stop(neutral, [test(1), test(2), edit(3, "a"), test(4)]) == 4   # writes left out, as the record does
    reset = build("outcome-repeat", {"action_repeats": 2})
    assert first_stop(reset, [test(1), test(2), edit(3, "a"), test(4)]) is None


def test_outcome_repeat_empty_results_and_failed_requests_never_reset_nor_count():
    rule = build("outcome-repeat", {"page_repeats": 2})
    assert rule.observe(page(1)) is None and rule.observe(page(2)) is None
    assert rule.observe(rnd(3, call(status="empty", result=""))) is None
    assert rule.observe(rnd(4, kind="error")) is None
    assert rule.notes()["repeat_evidence"] == 0.5
    assert rule.observe(page(5)) is not None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.lists(st.sampled_from(["alone", "with", "none"]), min_size=8, max_size=22),
       st.sampled_from(["bash", "search", "book"]), st.booleans())
def test_property_changing_errors_never_reset_outcome_repeat(n, errors, error_tool, write):
    """research-loop.md: errors, including errors whose text changes, do not
    reset patience; the candidate's docstring says the same. The same read
    repeated with a new error text beside it or between (never the same
    error twice) stops exactly when the repeated reads reach action_repeats."""
    rule = build("outcome-repeat", {"action_repeats": n})
    read = lambda: call("bash", result="FAILED test_x.py::test_a - AssertionError: 3 != 4", cmd="pytest -x")  # noqa
    rounds, reads, expected, e = [], 0, None, 0

    def error():
        nonlocal e
        e += 1
        return call(error_tool, kind="write" if write else "read", status="error",
                    result=f"Error: attempt {e} failed: {'xyz' * e} code {e * 37}", cmd=f"try {e}")
    for what in errors:
        calls = [read()] if what != "alone" else []
        calls += [error()] if what != "none" else []
        rounds.append(rnd(len(rounds) + 1, *calls))
        reads += what != "alone"
        if expected is None and reads == n + 1:     # the first read is new, the next n repeat it
            expected = len(rounds)
    assert first_stop(rule, rounds) == expected


def test_outcome_repeat_judges_a_round_against_what_came_before_it():
    """Two identical results in one round are not repeats of each other."""
    rule = build("outcome-repeat", {"action_repeats": 1})
    assert rule.observe(rnd(1, call(result="same", q="a"), call(result="same", q="a"))) is None
    assert rule.observe(rnd(2, call(result="same", q="a"))) is not None


def test_outcome_repeat_an_answered_ask_is_new():
    rule = build("outcome-repeat", {"page_repeats": 2})
    rule.observe(page(1))
    rule.observe(page(2))
    assert rule.observe(rnd(3, call("ask_user", kind="ask", result="yes, 2020"))) is None
    assert rule.notes()["repeat_evidence"] == 0


def test_outcome_repeat_parameters_are_checked_and_memory_is_bounded():
    for bad in ({"page_repeats": 0}, {"similarity": 0}, {"similarity": 1.5}, {"measure": "cosine"},
                {"writes": "skip"}, {"normalization": "nope"}, {"memory": 1}, {"action_repeats": True}):
        with pytest.raises(UserInputError):
            build("outcome-repeat", bad)
    rule = build("outcome-repeat", {"memory": 4})
    for i in range(1, 40):
        rule.observe(rnd(i, call("bash", status="error", result=f"error {i}", cmd=f"c{i}")))
    assert len(rule.errors) <= 4


def test_outcome_repeat_remembers_every_result_of_a_key_and_forgets_the_oldest_key(monkeypatch):
    """A key (tool and arguments) keeps every result it gave, not only the
    last; past MAX_KEYS keys the least recently seen is forgotten, and only it."""
    from imprint_core.stoprules import candidate
    a = "FAILED test_x.py::test_a - AssertionError: 3 != 4 in the first module of the suite"
    b = "collected 12 items; all passed in 0.31 seconds with no warnings from the plugin manager"
    run = lambda i, text, cmd="pytest": rnd(i, call("bash", result=text, cmd=cmd))   # noqa: E731
    rule = build("outcome-repeat", {"action_repeats": 3})
    verdicts = []
    for i, text in enumerate([a, b, a], start=1):
        rule.observe(run(i, text))
        verdicts.append(rule.notes()["calls"])
    assert verdicts == ["new", "new", "action"]     # a, then b, then a again: a is still remembered
    assert rule.notes()["repeat_evidence"] == 0.3333   # one round of a third, to four places
    monkeypatch.setattr(candidate, "MAX_KEYS", 2)
    rule = build("outcome-repeat", {"action_repeats": 3})
    for i, cmd in enumerate(["x", "y", "z"], start=1):
        rule.observe(run(i, a, cmd))
    assert len(rule.sketches) == 2
    rule.observe(run(4, a, "y"))
    assert rule.notes()["calls"] == "action"       # y and z kept
    rule.observe(run(5, a, "x"))
    assert rule.notes()["calls"] == "new"          # x, the oldest, forgotten


def test_outcome_repeat_alone_reads_a_result_of_its_own_arguments_as_empty():
    """Judging for itself (no record half), outcome-repeat asks evidence_free
    with the call's arguments: a result that only gives the query back is an
    empty read, neutral, as the record judges it."""
    rule = build("outcome-repeat")
    rule.observe(rnd(1, call(result='{"query": "zebra crossing"}', q="zebra crossing")))
    assert rule.notes()["calls"] == "neutral"
    rule.observe(rnd(2, call(result='{"query": "zebra crossing"}', q="another query")))
    assert rule.notes()["calls"] == "new"


def test_outcome_repeat_judges_the_evidence_units_a_tool_gave_not_its_wrapper():
    """Where the tool gave evidence units (segments), those are the read's
    text: the same units in another wrapper repeat, and units with no text
    are an empty read whatever the wrapper says."""
    unit = "Fubo announces its 2020 leadership: a new chief financial officer and a new head of content"
    rule = build("outcome-repeat", {"action_repeats": 3})
    wrappers = ["page one of the listing, served at noon by the mirror in Oslo",
                "a wholly other banner: sponsored links, weather for Lima, cookie settings and a footer"]
    for i, wrapper in enumerate(wrappers, start=1):
        rule.observe(rnd(i, CallView("search", {"q": "fubo"}, "read", "ok", wrapper, (unit,))))
    assert rule.notes()["calls"] == "action"
    rule.observe(rnd(3, CallView("search", {"q": "other"}, "read", "ok", wrappers[1], ("", " "))))
    assert rule.notes()["calls"] == "neutral"


@pytest.mark.parametrize("bad, words", [
    ({"error_repeats": 0}, "error_repeats must be an integer of at least 1; got 0"),
    ({"page_repeats": 0}, "page_repeats must be an integer of at least 1; got 0"),
    ({"action_repeats": 0}, "action_repeats must be an integer of at least 1; got 0"),
    ({"write_repeats": 0}, "write_repeats must be an integer of at least 1; got 0"),
    ({"similarity": 0}, "similarity must be in (0, 1]; got 0"),
    ({"measure": "cosine"}, "measure must be one of jaccard, containment; got 'cosine'"),
    ({"memory": 1}, "memory must be at least 2; got 1"),
    ({"writes": "skip"}, "writes must be one of reset, neutral; got 'skip'")])
def test_outcome_repeat_names_the_parameter_it_refuses_and_takes_its_bounds(bad, words):
    with pytest.raises(UserInputError, match=re.escape(words)):
        build("outcome-repeat", bad)
    # the bounds themselves are allowed
    assert build("outcome-repeat", {"similarity": 1, "memory": 2, "error_repeats": 1}).memory == 2


def test_outcome_repeat_built_directly_refuses_a_boolean_count():
    """Built without the parameter converter (a library user's own code), the
    class checks its counts itself: True is not a count."""
    from imprint_core.stoprules.candidate import OutcomeRepeat
    with pytest.raises(ValueError, match="page_repeats must be an integer of at least 1; got True"):
        OutcomeRepeat(1, True, 6, 3, 0.8, "jaccard", "ocr", 1024, "reset")


def test_outcome_repeat_s_verdict_per_call_kind_and_its_notes():
    """Each kind of call gets its verdict's own word in the notes: a call the
    deadline suppressed is neutral whatever its text, a write that ran (ok or
    empty) is new then a write repeat, or neutral with writes=neutral; the
    same action with its arguments in another order is the same action, and
    arguments JSON cannot spell are spelled as text. A fresh rule's notes are zeros."""
    import datetime
    rule = build("outcome-repeat", {"error_repeats": 2})
    assert rule.notes() == {"repeat_evidence": 0, "repeat_rounds": 0, "calls": ""}
    fail = [rnd(i, call("book", status="error", result="Error: total price is 1203, paid 833", user="u1"))
            for i in (1, 2, 3)]
    assert [rule.observe(r) for r in fail] == [
        None, None, "2 consecutive rounds that only repeat earlier outcomes (error)"]

    def calls_of(rule, *calls, i=1):
        rule.observe(rnd(i, *calls))
        return rule.notes()["calls"]
    rule = build("outcome-repeat")
    skipped = call(status="not_executed", result="skipped: the research deadline passed", q="x")
    assert calls_of(rule, skipped) == "neutral"
    assert calls_of(rule, call("bash", kind="write", status="empty", result="", cmd="touch f")) == "new"
    assert calls_of(rule, call("bash", kind="write", status="empty", result="", cmd="touch f"), i=2) == "write"
    rule = build("outcome-repeat", {"writes": "neutral"})
    assert calls_of(rule, call("bash", kind="write", result="done", cmd="touch g")) == "neutral"
    rule = build("outcome-repeat")
    text = "FAILED test_x.py::test_a - AssertionError: 3 != 4 in the first module of the suite"
    assert calls_of(rule, CallView("bash", {"cmd": "pytest", "cwd": "/src"}, "read", "ok", text)) == "new"
    assert calls_of(rule, CallView("bash", {"cwd": "/src", "cmd": "pytest"}, "read", "ok", text), i=2) == "action"
    when = datetime.date(2024, 5, 1)
    assert calls_of(rule, CallView("cal", {"day": when}, "read", "ok", text), i=3) == "new"
    assert calls_of(rule, CallView("cal", {"day": when}, "read", "ok", text), i=4) == "action"


def test_outcome_repeat_s_neutral_calls_measures_and_memories():
    """The neutral calls by name (an empty status, an empty read, a first
    error, an unanswered ask, a read whose text the profile masks whole, which
    does not end the round's judging); an answered ask is new each time; an
    error judged in the profile's own base (logs masks durations); the
    configured measure and an exact similarity; the newest writes and errors
    kept, the oldest forgotten, `memory` of each."""
    def calls_of(rule, *calls, i=1):
        rule.observe(rnd(i, *calls))
        return rule.notes()["calls"]
    rule = build("outcome-repeat")
    assert calls_of(rule, call(status="empty", result="", q="a"), call(result='{"results": []}', q="b"),
                    call(status="error", result="Error: no such index", q="c"),
                    call("ask_user", kind="ask", status="error", result="no answer came")) == \
        "neutral,neutral,neutral,neutral"
    assert calls_of(rule, call("ask_user", kind="ask", result="yes, 2020"), i=2) == "new"
    assert calls_of(rule, call("ask_user", kind="ask", result="yes, 2020"), i=3) == "new"
    assert calls_of(rule, call(result="| ~ •", q="a"), call(result="fresh fact number one about topic seven", q="b"),
                    i=4) == "neutral,new"
    rule = build("outcome-repeat", {"normalization": "logs"})
    calls_of(rule, call(status="error", result="Error: timed out after 1.52s", q="a"))
    assert calls_of(rule, call(status="error", result="Error: timed out after 3.07s", q="a"), i=2) == "error"
    a = "the quarterly results of fubo for 2024 with revenue and subscriber counts by region"
    b = a + " and then a great deal of other text about leadership changes, new offices, hiring plans, and the outlook"
    for measure, second in (("containment", "action"), ("jaccard", "new")):
        rule = build("outcome-repeat", {"measure": measure})
        calls_of(rule, call(result=b, q="x"))
        assert calls_of(rule, call(result=a, q="x"), i=2) == second, measure
    rule = build("outcome-repeat", {"similarity": 1})
    calls_of(rule, call(result=a, q="x"))
    assert calls_of(rule, call(result=a, q="x"), i=2) == "action"
    # two errors in one round are both remembered
    rule = build("outcome-repeat")
    calls_of(rule, call(status="error", result="Error: disk full", q="a"),
             call(status="error", result="Error: bad id", q="b"))
    assert calls_of(rule, call(status="error", result="Error: disk full", q="a"), i=2) == "error"
    write = lambda w: call("bash", kind="write", result="done", cmd=w)   # noqa: E731
    rule = build("outcome-repeat", {"memory": 2})
    assert [calls_of(rule, write(w), i=i) for i, w in enumerate(["w1", "w2", "w1", "w3", "w3", "w2"], 1)] == \
        ["new", "new", "write", "new", "write", "new"]     # w2 forgotten when w3 came: the oldest of two
    error = lambda e: call(status="error", result=f"Error: {e} failed", q=e)   # noqa: E731
    rule = build("outcome-repeat", {"memory": 2})      # each error is remembered twice (action, and tool)
    assert [calls_of(rule, error(e), i=i) for i, e in enumerate(["e1", "e1", "e2", "e2", "e1"], 1)] == \
        ["neutral", "error", "neutral", "error", "neutral"]


def test_outcome_repeat_counts_its_repeating_rounds_one_by_one_and_resets_on_new():
    rule = build("outcome-repeat", {"page_repeats": 4})
    other = rnd(4, call("WebSurfer", result="Fubo announces its 2020 leadership: a new chief financial officer"))
    counts = []
    for r in [page(1), page(2, " x"), page(3, " y"), other, page(5, " z")]:
        rule.observe(r)
        counts.append(rule.notes()["repeat_rounds"])
    assert counts == [0, 1, 2, 0, 1]


def test_outcome_repeat_masks_its_profile_s_own_noise_and_only_that():
    """The ocr profile (the default) masks OCR noise that the record's
    profile keeps: a page read again with stray letters and symbol tokens
    repeats; with normalization=default it is new text."""
    words = ("Overview News Events Presentations Financials Governance press release list for 2024 quarterly "
             "results annual report proxy statement investor day webcast replay dividend history").split()
    noisy = " ".join(w + " " + "xqzjkvw|~"[i % 9] for i, w in enumerate(words))
    for profile, second in (("ocr", "page"), ("default", "new")):
        rule = build("outcome-repeat", {"normalization": profile})
        for i, text in enumerate([" ".join(words), noisy], start=1):
            rule.observe(rnd(i, call("WebSurfer", result="https://ir.fubo.tv/news/ " + text, q="news")))
        assert rule.notes()["calls"] == second, profile


def test_repeat_aware_is_the_record_or_outcome_repeat_whichever_stops_first():
    rule = build("repeat-aware", {"patience": 3, "page_repeats": 5})
    # changing error texts: the record's patience runs out at 3 errors, the repeat half sees only new errors
    errors = [rnd(i, call(status="error", result=f"timeout after {i * 7} attempts on shard {i}")) for i in (1, 2, 3)]
    assert first_stop(rule, errors) == 3
    rule = build("repeat-aware", {"patience": 9, "page_repeats": 2})
    assert [rule.observe(r) for r in [page(1), page(2, " x"), page(3, " y")]] == [
        None, None, "outcome-repeat: 2 consecutive rounds that only repeat earlier outcomes (page)"]
    assert build("repeat-aware").specs[1][1]["page_repeats"] == 2


# ---- the loop under a stop rule: what it writes beside each round --------------------------------
def test_the_loop_writes_the_rule_and_its_notes_beside_each_round_and_names_it_in_the_stop():
    from imprint_core import LoopConfig, StopReason
    from helpers import make_run, read_tool, searches, settings
    run = make_run([searches(f"q{i}") for i in range(1, 9)] + ["done"], [read_tool()],
                   st=settings(research_stop_rule="round-cap"), config=LoopConfig(stop_rule_params={"max_rounds": 3}),
                   final=["final"])
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS and result.rounds == 3
    assert result.detail == "round-cap: round cap of 3 reached"
    ends = run.events("round_end")
    assert [(e.rule, e.rule_notes, e.progress, e.patience, e.verdicts) for e in ends] == \
        [("round-cap", {"rounds": i}, None, None, None) for i in (1, 2, 3)]
    assert run.events("run_start")[0].stop_rule == "round-cap"


def test_the_record_rule_in_the_loop_keys_its_verdicts_by_call_id_and_keeps_its_own_detail():
    from imprint_core import StopReason
    from helpers import make_run, read_tool, searches, settings
    run = make_run([searches("a", "b"), searches("a"), searches("a"), "done"], [read_tool()],
                   st=settings(research_no_progress_rounds=2, research_stop_rule="record"), final=["final"])
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS and result.detail == "2 consecutive rounds without new evidence"
    first = run.events("round_end")[0]
    ids = [e.call_id for e in run.events("tool_result") if e.round == 1]
    assert first.rule == "record" and sorted(first.verdicts) == sorted(ids) and first.rule_notes == {}
    assert all(set(v) >= {"paragraphs", "new_paragraphs", "new_shingles"} for v in first.verdicts.values())


def test_the_shipped_rule_in_the_loop_writes_the_record_half_s_figures_and_its_repeat_notes():
    """Under the default (repeat-aware) a round's line still carries the
    record's novelty, patience and per-call verdicts, which the report's
    timelines read, and the repeat half's state beside them."""
    from imprint_core import StopReason
    from imprint_core.settings import SPECS
    from helpers import make_run, read_tool, searches, settings
    assert SPECS["chat.research_stop_rule"].default == "repeat-aware"
    run = make_run([searches("a", "b"), searches("a"), searches("a"), "done"], [read_tool()],
                   st=settings(research_no_progress_rounds=2), final=["final"])
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.detail == "repeat-aware: record: 2 consecutive rounds without new evidence"
    ends = run.events("round_end")
    ids = [e.call_id for e in run.events("tool_result") if e.round == 1]
    assert [e.rule for e in ends] == ["repeat-aware"] * 3 and sorted(ends[0].verdicts) == sorted(ids)
    assert [e.patience_counter for e in ends] == [0, 1, 2]
    assert set(ends[-1].rule_notes) == {"repeat_evidence", "repeat_rounds", "calls"}


def test_a_bad_stop_rule_parameter_in_the_loop_config_is_named_by_its_key():
    from imprint_core import LoopConfig
    from helpers import make_run, read_tool, settings
    with pytest.raises(UserInputError) as info:
        make_run(["done"], [read_tool()], st=settings(research_stop_rule="round-cap"),
                 config=LoopConfig(stop_rule_params={"max_round": 3}))
    assert info.value.key == "stop_rule_params max_round"


# ---- repeat-aware reads the record's normalized text instead of making it again ----------------
_WORDS = st.sampled_from(["overview", "news", "2024", "results", "|", "~", "•", "q", "a", "id=7f3a9c01",
                          "https://x.org/p?id=42", "score: 0.93", "12:03:44", "--", "no results", "[]", "{}"])
_TEXT = st.lists(_WORDS, max_size=40).map(" ".join) | st.lists(st.lists(_WORDS, max_size=12).map(" ".join),
                                                                   max_size=4).map(json.dumps)


_CALL = st.tuples(st.sampled_from(["search", "WebSurfer", "bash"]),
                  st.sampled_from(["ok", "ok", "ok", "empty", "error", "not_executed"]),
                  st.sampled_from(["read", "read", "read", "write"]), _TEXT, st.sampled_from(["a", "b", "news"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_CALL, min_size=0, max_size=3), min_size=1, max_size=14), st.integers(1, 3))
def test_property_repeat_aware_stops_where_its_members_stop_apart(rounds, error_repeats):
    """RepeatAware hands the record's normalized text to outcome-repeat; the
    stops must be those of the two rules judging apart, each normalizing for
    itself (what `compare` computes), round for round."""
    views = [rnd(i, *(CallView(tool, {"q": q}, kind, status, text) for tool, status, kind, text, q in calls))
             for i, calls in enumerate(rounds, start=1)]
    together = build("repeat-aware", {"patience": 3, "error_repeats": error_repeats, "page_repeats": 2,
                                      "action_repeats": 2})
    record, repeat = build("record", {"patience": 3}), build("outcome-repeat", {
        "error_repeats": error_repeats, "page_repeats": 2, "action_repeats": 2})
    for v in views:
        both = together.observe(v)
        apart = [record.observe(v), repeat.observe(v)]
        assert bool(both) == any(apart)
        assert together.rules[1][1].last == repeat.last     # the same verdict for every call


def test_repeat_aware_normalizes_each_result_once(monkeypatch):
    """The repeat half reads the record's normalized units: it never normalizes a read itself."""
    from imprint_core.stoprules import candidate
    rule = build("repeat-aware", {"page_repeats": 2})
    monkeypatch.setattr(candidate, "normalize_units", lambda *a: pytest.fail("normalized a second time"))
    assert first_stop(rule, [page(1), page(2, " x"), page(3, " y")]) == 3
    # alone, it normalizes for itself
    with pytest.raises(pytest.fail.Exception):
        build("outcome-repeat").observe(page(1))
    # beside a record half that normalizes otherwise, its text is not the one to read: it normalizes for itself
    other = build("repeat-aware", {"record_normalization": "logs"})
    assert other.rules[0][1].config.normalization == "logs"
    with pytest.raises(pytest.fail.Exception):
        other.observe(page(1))


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=4))
def test_property_the_ocr_profile_is_the_default_then_its_own_masks(units):
    """split_profile: masking with the base profile, then with the masks the
    profile adds, is masking with the profile, which lets outcome-repeat start
    from the record's text."""
    from imprint_core.novelty.normalization import normalize_units, split_profile
    for profile in ("ocr", "all"):
        base, rest = split_profile(profile)
        assert base != profile and rest is not None
        assert [rest.apply(u) for u in normalize_units(units, base)] == normalize_units(units, profile)
    assert split_profile("default") == ("default", None)
def test_a_file_rule_without_a_factory_docstring_is_described_by_its_class(tmp_path) -> None:
    # issue 44 item 11: `imprint rules` left a file rule's description empty
    (tmp_path / "twice.py").write_text(textwrap.dedent('''\
        class Twice:
            """Stops at the second call of the same tool in a row.

            More about it."""
            def observe(self, round): return None
            def reset(self): pass

        def make(n: int = 2):
            return Twice()
        '''))
    assert resolve(f"{tmp_path / 'twice.py'}:make").summary == "Stops at the second call of the same tool in a row."
    (tmp_path / "two.py").write_text(textwrap.dedent('''\
        """Two rules of mine."""
        class A:
            """Rule A."""
            def observe(self, round): return None
            def reset(self): pass

        class B(A):
            """Rule B."""

        def make_b() -> B:
            return B()

        def make_a():
            return A()
        '''))
    assert resolve(f"{tmp_path / 'two.py'}:make_b").summary == "Rule B."          # its return annotation
    assert resolve(f"{tmp_path / 'two.py'}:make_a").summary == "Two rules of mine."  # two classes: the module's
