"""How ModelCaller and the loop use a `Counting` (`chat.token_counting`), on the scripted
provider alone: the counter chain and its trace events, every mode's
figure beside the one used, calibration fed from measured prompts,
reconciliation switched by the counting, and the loop's setup note.
Fast enough for the mutation run's test selection (pyproject `[tool.mutmut]`),
which the recorded-server tests of tests/core/test_counting_modes.py are not."""
from __future__ import annotations

import pytest

from imprint_core import (CancelToken, CountingModes, EventLog, Message, ResearchLoop, ScriptedProvider, StopReason,
                          TimeBudget, TokenCounter, TokenLedger, ToolSpec, Usage, VirtualClock)
from imprint_core.counting import Counting
from imprint_core.errors import CountingUnavailable
from imprint_core.providers.scripted import Turn
from imprint_core.requests import ModelCaller
from imprint_core.trace import TraceWriter

from helpers import read_tool, settings

MSGS = [Message("system", "be brief"), Message("user", "what is known about the tower")]
TOOLS = [ToolSpec("search", "find pages", kind="read")]


class WordCounter(TokenCounter):
    """Units: `per_word` ids per word of the messages and tool names; a
    counter that `fails` raises CountingUnavailable naming itself."""

    def __init__(self, name: str, per_word: int = 1, fails: bool = False):
        self.name, self.per_word, self.fails = name, per_word, fails
        self.asked: list[tuple[tuple, tuple]] = []

    def prompt_units(self, messages, tools):
        self.asked.append((tuple(messages), tuple(tools)))
        if self.fails:
            raise CountingUnavailable(f"{self.name} cannot count this")
        words = [w for m in messages for w in m.content.split()] + [t.name for t in tools]
        return tuple(range(len(words) * self.per_word))

    def output_units(self, reply):
        return tuple(range(len(reply.content.split())))

    def to_tokens(self, units: int) -> int:
        return units


class Calibration:
    def __init__(self):
        self.seen: list[tuple[list, list, int]] = []

    def observe(self, messages, tools, measured_prompt):
        self.seen.append((list(messages), list(tools), measured_prompt))


def caller_with(counting: Counting | None, turns=("done",), *, provider_counter=None, final=("the answer",)):
    clock = VirtualClock()
    provider = ScriptedProvider(list(turns), clock=clock, final=list(final), counter=provider_counter)
    trace = TraceWriter(None, clock)
    log = EventLog(trace)
    time = TimeBudget(clock, 300)
    time.start()
    caller = ModelCaller(provider, ledger=TokenLedger(100_000), time=time, clock=clock, cancel=CancelToken(clock),
                         trace=trace, counting=counting)
    return caller, log, provider


def research(caller, role="coordinator", context_id="coordinator"):
    return caller.research(list(MSGS), TOOLS, role=role, context_id=context_id, max_output=32, round=1)


def fallbacks(log):
    return [(e.role, e.context_id, e.wanted, e.used, e.reason) for e in log.of_type("count_fallback")]


# ---- the counter chain ---------------------------------------------------------------------------------
def test_a_counter_that_cannot_count_hands_over_down_the_chain_and_each_hand_over_is_traced():
    tok, cal = WordCounter("tok", fails=True), WordCounter("cal", per_word=2, fails=True)
    byte = WordCounter("byte", per_word=3)
    caller, log, _ = caller_with(Counting("tokenizer", "tokenizer", tok, cal), provider_counter=byte)
    used, units, tokens = caller.count(MSGS, TOOLS, role="worker", context_id="w1")
    assert used is byte and tokens == len(units) == 3 * 9
    assert fallbacks(log) == [("worker", "w1", "tok", "cal", "tok cannot count this"),
                              ("worker", "w1", "tok", "byte", "cal cannot count this")]


def test_the_chain_stops_at_the_first_counter_that_counts():
    tok, cal = WordCounter("tok", fails=True), WordCounter("cal", per_word=2)
    caller, log, _ = caller_with(Counting("auto", "tokenizer", tok, cal), provider_counter=WordCounter("byte", 3))
    used, _, tokens = caller.count(MSGS, TOOLS)
    assert used is cal and tokens == 18
    assert fallbacks(log) == [("coordinator", "coordinator", "tok", "cal", "tok cannot count this")]


def test_when_no_counter_can_count_the_last_one_s_error_is_raised_after_every_hand_over():
    counting = Counting("tokenizer", "tokenizer", WordCounter("tok", fails=True), WordCounter("cal", fails=True))
    caller, log, _ = caller_with(counting, provider_counter=WordCounter("byte", fails=True))
    with pytest.raises(CountingUnavailable, match="byte cannot count"):
        caller.count(MSGS, TOOLS)
    assert [f[3] for f in fallbacks(log)] == ["cal", "byte"]


def test_research_and_final_requests_name_their_role_and_context_in_a_hand_over():
    counting = Counting("tokenizer", "tokenizer", WordCounter("tok", fails=True), WordCounter("cal"))
    caller, log, _ = caller_with(counting)
    assert not research(caller, role="worker", context_id="section-2").failed
    assert not caller.final(list(MSGS), max_tokens=16, deadline_sec=30).failed
    assert [(f[0], f[1]) for f in fallbacks(log)] == [("worker", "section-2"), ("final", "final")]


def test_a_caller_without_a_counting_counts_natively_with_the_provider_s_counter():
    caller, _, provider = caller_with(None)
    assert (caller.counting.mode, caller.counting.used) == ("native", "native")
    assert caller.counter is provider.counter and not caller.counting.reconcile and not caller.counting.side


# ---- every mode's figure beside the one used ------------------------------------------------------------
def test_records_carry_every_side_mode_that_can_count_and_the_used_one_s_own_figure():
    used, double = WordCounter("used"), WordCounter("double", per_word=2)
    counting = Counting("auto", "tokenizer", used, side={"tokenizer": used, "broken": WordCounter("x", fails=True),
                                                          "calibrated": double})
    caller, _, _ = caller_with(counting)
    rec = research(caller).record
    n = 9  # 8 words and one tool name
    assert rec.estimated_prompt == n and rec.estimates == {"tokenizer": n, "calibrated": 2 * n}
    assert double.asked == [(tuple(MSGS), tuple(TOOLS))]
    final = caller.final(list(MSGS), max_tokens=16, deadline_sec=30).record
    assert final.estimates == {"tokenizer": 8, "calibrated": 16}  # no tools on the final request
    assert double.asked[-1] == (tuple(MSGS), ())


def test_the_used_counter_is_not_counted_twice_and_its_figure_is_the_estimate():
    used = WordCounter("used")
    other = WordCounter("other", per_word=5)
    caller, _, _ = caller_with(Counting("auto", "tokenizer", used, side={"tokenizer": used, "byte": other}))
    rec = research(caller).record
    assert rec.estimates == {"tokenizer": 9, "byte": 45}
    assert len(used.asked) == 1 and len(other.asked) == 1
    final = caller.final(list(MSGS), max_tokens=16, deadline_sec=30).record
    assert final.estimates == {"tokenizer": 8, "byte": 40}
    assert len(used.asked) == 2 and len(other.asked) == 2


def test_without_side_modes_records_carry_no_estimates():
    caller, _, _ = caller_with(Counting("auto", "byte", WordCounter("used")))
    assert research(caller).record.estimates is None
    assert caller.final(list(MSGS), max_tokens=16, deadline_sec=30).record.estimates is None


# ---- calibration and reconciliation ----------------------------------------------------------------------
def test_measured_prompts_feed_the_calibration_with_the_request_s_messages_and_tools():
    cal = Calibration()
    counting = Counting("calibrated", "calibrated", WordCounter("used"), calibration=cal)
    caller, _, _ = caller_with(counting, turns=[Turn("done", usage=Usage(prompt_tokens=41, output_tokens=1))],
                               final=[Turn("answer", usage=Usage(prompt_tokens=37, output_tokens=1))])
    research(caller)
    caller.final(list(MSGS), max_tokens=16, deadline_sec=30)
    assert cal.seen == [(MSGS, TOOLS, 41), (MSGS, [], 37)]


@pytest.mark.parametrize("usage", [None, Usage(prompt_tokens=0, output_tokens=1), Usage(output_tokens=1)])
def test_a_request_without_a_measured_prompt_teaches_the_calibration_nothing(usage):
    cal = Calibration()
    caller, _, _ = caller_with(Counting("calibrated", "calibrated", WordCounter("used"), calibration=cal),
                               turns=[Turn("done", usage=usage)], final=[Turn("answer", usage=usage)])
    research(caller)
    caller.final(list(MSGS), max_tokens=16, deadline_sec=30)
    assert cal.seen == []


@pytest.mark.parametrize("reconcile", [True, False])
def test_the_counting_decides_whether_usage_settles_the_charge(reconcile):
    caller, _, _ = caller_with(Counting("auto", "byte", WordCounter("used"), reconcile=reconcile),
                               turns=[Turn("done", usage=Usage(prompt_tokens=50, output_tokens=1))])
    rec = research(caller).record
    assert rec.reconciled is reconcile
    assert rec.charged_prompt == (50 if reconcile else 9)


# ---- the loop -----------------------------------------------------------------------------------------------
def remote_like_provider() -> ScriptedProvider:
    """A scripted provider shaped like a remote one that has neither a
    tokenizer nor a calibration, and reports usage."""
    clock = VirtualClock()
    p = ScriptedProvider(["The tower is 330 m tall."], clock=clock, final=["It is 330 m tall."])
    p.counting_modes = CountingModes(reports_usage=True)
    return p


def test_the_loop_traces_the_mode_it_could_not_have_and_hands_its_counting_to_the_caller():
    p = remote_like_provider()
    trace = TraceWriter(None, p.clock)
    log = EventLog(trace)
    loop = ResearchLoop(p, [read_tool()], settings(research_token_budget=4096, token_counting="tokenizer"),
                        clock=p.clock, trace=trace)
    result = loop.run("How tall is the tower?")
    start = log.of_type("run_start")[0]
    assert start.counting == loop.counting.describe()
    assert start.counting["mode"] == "tokenizer" and start.counting["used"] == "byte"
    setup = fallbacks(log)
    assert setup == [("setup", "", "tokenizer", p.counter.name, loop.counting.note)]
    assert "no tokenizer" in loop.counting.note
    rec = result.records[0]
    # The caller counts with the loop's counting: side figures and reconciliation.
    assert rec.reconciled is True
    assert rec.estimates == {"byte": rec.estimated_prompt}


def test_a_mode_the_provider_has_traces_no_setup_note():
    p = remote_like_provider()
    trace = TraceWriter(None, p.clock)
    log = EventLog(trace)
    ResearchLoop(p, [read_tool()], settings(research_token_budget=4096, token_counting="byte"), clock=p.clock,
                 trace=trace).run("How tall is the tower?")
    assert fallbacks(log) == []


def test_a_final_request_after_a_cancel_is_never_sent_and_says_why():
    caller, log, provider = caller_with(None)
    caller.cancel.cancel()
    reply = caller.final(list(MSGS), max_tokens=16, deadline_sec=30)
    assert reply.stop is not None and reply.stop.reason is StopReason.CANCELLED
    assert reply.detail == "cancelled before the final request"
    assert provider.requests == [] and caller.ledger.final_records == [] and log.of_type("final_request") == []
