"""`sweep.stops.rules_stops`: rules that judge rounds alike and differ only in
their patiences are replayed together, and each stops where it stops alone."""
from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from harness.analysis.sweep.stops import RuleChoice, rules_stops
from harness.realruns.roundlogs import Round, RoundCall, RoundLog, round_view
from imprint_core.stoprules import build

from reportdata import fact

# a call: a fact read (page or plain), an error, a write, an empty read
_call = st.one_of(
    st.builds(lambda n, page: RoundCall("browse" if page else "search", {"q": f"q{n % 2}"}, "read", "ok",
                                        (f"https://x.org/{n} " if page else "") + fact(n)),
              st.integers(0, 3), st.booleans()),
    st.builds(lambda n: RoundCall("run", {"cmd": f"c{n}"}, "read", "error", f"Error: {n} failed"), st.integers(0, 1)),
    st.builds(lambda n: RoundCall("edit", {"path": f"p{n}"}, "write", "ok", "ok"), st.integers(0, 1)),
    st.just(RoundCall("search", {"q": "none"}, "read", "ok", "No results found")),
)
_reply = st.lists(st.lists(_call, min_size=1, max_size=2), min_size=1, max_size=8)


def _run(replies: list[list[list[RoundCall]]]) -> SimpleNamespace:
    full, n = [], 0
    for reply in replies:
        rounds = []
        for calls in reply:
            n += 1
            rounds.append(Round(n, calls))
        full.append(RoundLog("r.jsonl", "test", {}, rounds))
    return SimpleNamespace(full=full, name="r", origin="r.jsonl")


CHOICES = [RuleChoice("outcome-repeat", "outcome-repeat", {}),
           RuleChoice("or2", "outcome-repeat", {"error_repeats": 2, "page_repeats": 3}),
           RuleChoice("or-actions", "outcome-repeat", {"action_repeats": 2}),
           RuleChoice("or-contain", "outcome-repeat", {"measure": "containment"}),
           RuleChoice("any", "any", {"rules": ["outcome-repeat", "round-cap"], "round-cap.max_rounds": 6}),
           # a member of `any` with its own patience, as repeat-aware's repeat half is (its record half goes
           # through the tuner's progress, as `record` alone does)
           RuleChoice("any-or3", "any", {"rules": ["gemini-cli", "outcome-repeat"], "outcome-repeat.error_repeats": 3})]


def _alone(choice: RuleChoice, run) -> int | None:
    """The rule itself (`any` whole), observing every round of the run, reset at each reply, as the loop runs it."""
    rule = build(choice.spec, choice.params)
    for i, reply in enumerate(run.full):
        if i:
            rule.reset()
        for rnd in reply.rounds:
            if rule.observe(round_view(rnd)):
                return rnd.number
    return None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_reply, min_size=1, max_size=3), min_size=1, max_size=3))
def test_variants_judged_together_stop_where_each_stops_alone(runs):
    runs = [_run(r) for r in runs]
    done = []
    together = rules_stops(CHOICES, runs, progress=done.append)
    for c in CHOICES:
        assert together[c.label] == [_alone(c, run) for run in runs], c.label
    assert sum(done) == len(CHOICES) * len(runs)     # every (rule, run) pair counted once
