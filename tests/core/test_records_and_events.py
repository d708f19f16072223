"""Behaviour the rest of the core suite left unchecked, found by mutation
testing (`make mutate`, reports/mutation.md): each test here fails for a
wrong implementation of budget.py, requests.py or loop.py that the other
tests let through. They check what callers and readers of the trace rely on
(records, trace fields, replies, prompts), not the wording of messages.

Nothing here sleeps: time is a VirtualClock.
"""
from __future__ import annotations

from imprint_core.events import RequestReserved, RequestSettled, call_verdicts
import dataclasses
import re

import pytest

from imprint_core import (ByteEstimateCounter, CancelToken, Chunk, Done, EventLog, FinalMode, FunctionTool,
                          LoopConfig, Message, ModelCaller, ModelRequest, NoveltyConfig, ProviderError,
                          ResearchSettings, ScriptedProvider, StopReason, TextDelta, TimeBudget, TokenLedger,
                          ToolOutput, ToolSpec, TraceWriter, Turn, Usage, VirtualClock, call, collect,
                          read_trace)
from imprint_core.errors import ImprintError
from imprint_core.workers import WORKER_SYSTEM

from helpers import doc, endless, make_run, read_tool, searches, settings


class Ids:
    """A counter whose units are token ids: to_tokens is the identity."""
    name = "ids"

    def to_tokens(self, units: int) -> int:
        return units


IDS = Ids()
DEFAULT_CONTEXT = next(f.default for f in dataclasses.fields(ModelRequest) if f.name == "context_id")


# ---- budget.py: the time budget -------------------------------------------------------------
def test_paused_time_adds_up_over_several_pauses():
    c = VirtualClock()
    tb = TimeBudget(c, 60)
    tb.start()
    for wait in (30, 45):
        c.advance(5)
        tb.pause()
        c.advance(wait)
        tb.resume()
    assert tb.paused_total == 75
    assert tb.deadline == 60 + 75 and tb.remaining() == 60 + 75 - c.now()


# ---- budget.py: the ledger ------------------------------------------------------------------
def test_unknown_policy_error_names_the_value_and_the_allowed_policies():
    with pytest.raises(ValueError) as info:
        TokenLedger(1000, "free")  # type: ignore[arg-type]
    words = re.findall(r"[\w-]+", str(info.value))
    assert "free" in words and "reserve" in words and "prefix-refund" in words


def test_default_reservation_is_the_coordinators_context():
    """reserve() without role or context is a coordinator request: the next
    coordinator request on the named context continues its prefix."""
    led = TokenLedger(10_000)
    r = led.reserve(100, 10)
    first = led.settle(r, counter=IDS, prompt_units=tuple(range(100)), output_units=(7,) * 10, outcome="ok")
    assert (first.role, first.context_id) == ("coordinator", DEFAULT_CONTEXT)
    prompt = tuple(range(100)) + (7,) * 10 + (1, 2, 3)
    r = led.reserve(len(prompt), 10, role="coordinator", context_id=DEFAULT_CONTEXT)
    second = led.settle(r, counter=IDS, prompt_units=prompt, output_units=(), outcome="ok")
    assert second.prefix_reused == 110 and second.charged == 3


def test_settled_record_keeps_policy_and_allowance():
    for policy in ("reserve", "prefix-refund"):
        led = TokenLedger(10_000, policy)
        r = led.reserve(40, 25, role="worker", context_id="w1-0")
        rec = led.settle(r, counter=IDS, prompt_units=(1,) * 40, output_units=(2,) * 5, outcome="ok")
        assert (rec.policy, rec.estimated_prompt, rec.max_output, rec.reserved) == (policy, 40, 25, 65)
        assert (rec.role, rec.context_id) == ("worker", "w1-0")


def test_unsent_request_is_refunded_whole_even_after_context_history_and_streamed_text():
    """Never sent: nothing reused, nothing charged, whatever the context saw
    before and whatever text arrived with the failure."""
    led = TokenLedger(10_000, "prefix-refund")
    prompt = tuple(range(100))
    r = led.reserve(100, 50)
    led.settle(r, counter=IDS, prompt_units=prompt, output_units=(9,) * 10, outcome="ok")
    r = led.reserve(120, 50)
    rec = led.settle(r, counter=IDS, prompt_units=prompt + (9,) * 10 + (5,) * 10, output_units=(4,) * 30,
                     outcome="error", sent=False)
    assert (rec.outcome, rec.prefix_reused, rec.charged_prompt, rec.charged_output) == ("unsent", 0, 0, 0)
    assert (rec.charged, rec.refunded) == (0, 170)
    # ...and an unsent request on a fresh context reuses nothing either
    r = led.reserve(10, 5, context_id="fresh")
    rec = led.settle(r, counter=IDS, prompt_units=(1,) * 10, output_units=(), outcome="error", sent=False)
    assert rec.prefix_reused == 0 and rec.charged == 0


def test_final_record_keeps_what_was_estimated_and_measured():
    led = TokenLedger(10_000, "reserve")
    r = led.reserve(10, 10)
    research = led.settle(r, counter=IDS, prompt_units=(1,) * 10, output_units=(), outcome="ok")
    rec = led.record_final(counter=IDS, estimated_prompt=5000, max_output=2048, output_units=(1,) * 300,
                           outcome="cut", usage=Usage(prompt_tokens=4999, cached_tokens=4000, output_tokens=301))
    assert isinstance(rec.id, int) and rec.id > research.id
    assert (rec.role, rec.policy, rec.outcome) == ("final", "reserve", "cut")
    assert (rec.estimated_prompt, rec.max_output, rec.output_tokens) == (5000, 2048, 300)
    assert (rec.measured_prompt, rec.measured_cached, rec.measured_output) == (4999, 4000, 301)
    assert rec.context_id not in (research.context_id, None)
    unmeasured = led.record_final(counter=IDS, estimated_prompt=1, max_output=1, output_units=(), outcome="ok",
                                  usage=None)
    assert (unmeasured.measured_prompt, unmeasured.measured_cached, unmeasured.measured_output) == (None,) * 3
    assert unmeasured.id > rec.id


def test_forgotten_context_is_charged_in_full_next_time():
    led = TokenLedger(10_000)
    prompt = tuple(range(50))
    for ctx in ("w1-0", "w1-1"):
        r = led.reserve(50, 5, role="worker", context_id=ctx)
        led.settle(r, counter=IDS, prompt_units=prompt, output_units=(), outcome="ok")
    led.forget_context("w1-0")
    led.forget_context("never-seen")  # forgetting an unknown context is not an error
    r = led.reserve(50, 5, role="worker", context_id="w1-0")
    assert led.settle(r, counter=IDS, prompt_units=prompt, output_units=(), outcome="ok").charged == 50
    r = led.reserve(50, 5, role="worker", context_id="w1-1")  # the other context is remembered
    assert led.settle(r, counter=IDS, prompt_units=prompt, output_units=(), outcome="ok").charged == 0


# ---- requests.py: collect -------------------------------------------------------------------
class Stream:
    """A provider stream that knows whether it was closed."""

    def __init__(self, events):
        self.events, self.closed = list(events), False

    def __iter__(self):
        return iter(self.events)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("events", [
    [TextDelta("a"), Done(), TextDelta("never read")],   # stops at Done
    [TextDelta("a"), TextDelta("b")],                     # runs out
    [TextDelta("a"), TextDelta("b"), Done()],
])
def test_collect_closes_the_stream_however_it_ends(events):
    stream = Stream(events)
    got = collect(stream)
    assert stream.closed and got.error is None


def test_collect_closes_a_stream_cut_by_the_deadline_and_joins_text_as_streamed():
    clock = VirtualClock()

    def gen():
        yield TextDelta("Part one. ")
        clock.advance(10)
        yield TextDelta("Part two.")  # arrives at the deadline: kept, then the stream is cut
        yield TextDelta(" Never")

    g = gen()
    got = collect(g, clock=clock, deadline=5)
    assert got.text == "Part one. Part two." and got.interrupted is StopReason.TIME_BUDGET
    assert g.gi_frame is None  # closed: the provider's generator ran its cleanup


def test_collect_of_a_plain_iterable_without_close():
    got = collect(iter([TextDelta("x"), TextDelta("y"), Done()]))
    assert got.text == "xy"


# ---- requests.py: ModelCaller ---------------------------------------------------------------
def make_caller(turns=(), *, final=None, workers=None, budget=100_000, timeout=300, window=1_000_000, cancel=None,
                clock=None, provider=None, **kw):
    clock = clock or VirtualClock()
    provider = provider or ScriptedProvider(list(turns), clock=clock, final=final, workers=workers,
                                             context_window=window)
    trace = TraceWriter(None, clock)
    log = EventLog(trace)
    ledger = TokenLedger(budget)
    time = TimeBudget(clock, timeout)
    time.start()
    caller = ModelCaller(provider, ledger=ledger, time=time, clock=clock, cancel=cancel or CancelToken(clock),
                         trace=trace, **kw)
    return caller, log, provider, clock


MSGS = [Message("system", "s"), Message("user", "What is known?")]
TOOLS = [ToolSpec("search", "find", kind="read")]


def research(caller, max_output=64, **kw):
    return caller.research(list(MSGS), TOOLS, role=kw.pop("role", "coordinator"),
                           context_id=kw.pop("context_id", "coordinator"), max_output=max_output,
                           round=kw.pop("round", 3), **kw)


def test_default_retry_policy_is_two_retries_with_doubling_backoff():
    busy = ProviderError("overloaded", "busy", retryable=True)
    caller, log, provider, clock = make_caller([Turn(error=busy)] * 3)
    reply = research(caller)
    assert [e.wait for e in log.of_type("request_retry")] == [1.0, 2.0]
    assert len(provider.requests) == 3 and reply.error is busy and clock.now() == 3.0


def test_reply_carries_the_settled_record_on_every_outcome():
    busy = ProviderError("bad_request", "nope", retryable=False)
    cases = {
        "ok": [Turn(text="fine")],
        "error": [Turn(chunks=[Chunk("partial")], error=busy)],
        "cut": [Turn(chunks=[Chunk("early "), Chunk("late", 500.0)])],
    }
    for outcome, turns in cases.items():
        caller, log, _, _ = make_caller(turns, timeout=60)
        reply = research(caller)
        assert reply.record is caller.ledger.records[-1] and reply.record.outcome == outcome
        settled = log.of_type("request_settled")[-1]
        assert settled.record is reply.record and settled.round == 3


def test_failed_request_reply_keeps_partial_text_error_and_detail():
    busy = ProviderError("bad_request", "nope", retryable=False)
    caller, log, _, _ = make_caller([Turn(chunks=[Chunk("partial")], error=busy)])
    reply = research(caller)
    assert (reply.text, reply.error, reply.stop) == ("partial", busy, None)
    assert reply.failed and "nope" in reply.detail
    settled = log.of_type("request_settled")[-1]
    assert settled.error is not None and "nope" in settled.error and settled.interrupted is None


def test_cut_response_reply_keeps_the_text_so_far_and_says_why():
    caller, log, _, clock = make_caller(workers=[Turn(chunks=[Chunk("early "), Chunk("late", 500.0)])], timeout=60)
    reply = research(caller, role="worker", context_id="w1-0")
    assert reply.stop.reason is StopReason.TIME_BUDGET and reply.text == "early " and reply.record is not None
    assert "deadline" in reply.detail and "worker" in reply.detail and "cancel" not in reply.detail
    settled = log.of_type("request_settled")[-1]
    assert settled.interrupted == "time_budget" and settled.error is None
    assert settled.duration == 60 == clock.now()


def test_cancelled_during_a_response_says_cancelled():
    clock = VirtualClock()
    cancel = CancelToken(clock, at=5)
    caller, log, _, _ = make_caller([Turn(chunks=[Chunk("a"), Chunk("b", 10.0)])], clock=clock, cancel=cancel)
    reply = research(caller)
    assert reply.stop.reason is StopReason.CANCELLED and reply.text == "a"
    assert "cancelled" in reply.detail and "deadline" not in reply.detail
    assert log.of_type("request_settled")[-1].interrupted == "cancelled"


def test_settled_duration_is_the_time_the_request_took():
    clock = VirtualClock(1000)
    caller, log, _, _ = make_caller([Turn(chunks=[Chunk("a", 2.0), Chunk("b", 3.0)])], clock=clock)
    research(caller)
    assert log.of_type("request_settled")[-1].duration == 5.0


def test_refusals_before_a_request_say_why():
    clock = VirtualClock()
    cancel = CancelToken(clock)
    cancel.cancel()
    caller, _, provider, _ = make_caller([], clock=clock, cancel=cancel)
    reply = research(caller)
    assert reply.stop.reason is StopReason.CANCELLED and "cancelled" in reply.detail and not provider.requests

    caller, _, provider, clock = make_caller([], timeout=10)
    clock.advance(10)
    reply = research(caller)
    assert reply.stop.reason is StopReason.TIME_BUDGET and "10 s" in reply.detail and not provider.requests

    caller, log, provider, _ = make_caller([], budget=50)
    reply = research(caller, role="worker", context_id="w2-1")
    assert reply.stop.reason is StopReason.TOKEN_BUDGET and "50" in reply.detail and not provider.requests
    (ex,) = log.of_type("budget_exhausted")
    assert (ex.role, ex.context_id, ex.limit, ex.used) == ("worker", "w2-1", 50, 0)
    assert ex.message == reply.detail and ex.requested > 50


def test_prompt_that_exactly_fills_the_window_is_sent():
    caller, _, provider, _ = make_caller(["fine"])
    estimate = caller.estimate(MSGS, TOOLS)
    caller.provider.context_window = estimate + 64
    assert research(caller).text == "fine" and len(provider.requests) == 1
    caller.provider.context_window = estimate + 63
    assert research(caller).stop.reason is StopReason.CONTEXT_FULL and len(provider.requests) == 1


def test_reserved_event_describes_the_reservation():
    caller, log, provider, _ = make_caller(["fine"], budget=10_000)
    research(caller, role="worker", context_id="w4-2", max_output=77)
    (ev,) = log.of_type("request_reserved")
    estimate = caller.estimate(MSGS, TOOLS)
    rec = caller.ledger.records[0]
    assert (ev.id, ev.role, ev.context_id, ev.attempt) == (rec.id, "worker", "w4-2", 0)
    assert (ev.estimated_prompt, ev.max_output, ev.reserved) == (estimate, 77, estimate + 77)
    assert ev.budget_left == 10_000 - estimate - 77
    assert provider.requests[0].context_id == "w4-2" and provider.requests[0].role == "worker"


def test_retry_events_count_attempts_and_name_the_request():
    busy = ProviderError("overloaded", "busy", retryable=True)
    caller, log, _, _ = make_caller([Turn(error=busy), Turn(error=busy), "fine"], max_retries=2,
                                    retry_backoff_sec=1.0)
    reply = research(caller)
    assert reply.text == "fine"
    retries = log.of_type("request_retry")
    reserved = log.of_type("request_reserved")
    assert [e.attempt for e in retries] == [1, 2] and [e.attempt for e in reserved] == [0, 1, 2]
    assert [e.id for e in retries] == [e.id for e in reserved[:2]]
    assert all("busy" in e.error for e in retries)


def test_usage_output_units_are_what_is_charged():
    """A provider that reports the exact units it appended is charged for those."""
    usage = Usage(prompt_tokens=10, output_tokens=3, output_units=(1, 2, 3))
    caller, _, _, _ = make_caller([Turn(text="a long answer " * 20, usage=usage)])
    reply = research(caller)
    assert reply.record.output_tokens == caller.counter.to_tokens(3)
    caller, _, _, _ = make_caller([], final=[Turn(text="a long answer " * 20, usage=usage)])
    assert caller.final(list(MSGS), max_tokens=500, deadline_sec=120).record.output_tokens == \
        caller.counter.to_tokens(3)


def test_output_without_reported_units_counts_the_text():
    caller, _, _, _ = make_caller([Turn(text="x" * 400, usage=None), Turn(text="y", usage=None)])
    long, short = research(caller, max_output=1000), research(caller, max_output=1000)
    assert long.record.output_tokens >= 100 > short.record.output_tokens > 0


def test_retry_after_reaching_exactly_the_deadline_is_not_waited_for():
    busy = ProviderError("http_429", "slow down", processed=False, retryable=True, retry_after=60)
    caller, log, provider, _ = make_caller([Turn(error=busy), "fine"], timeout=60)
    reply = research(caller)
    assert reply.stop.reason is StopReason.TIME_BUDGET and len(provider.requests) == 1
    assert reply.record is caller.ledger.records[0] and not log.of_type("request_retry")
    assert "60 s of research time left" in reply.detail


def test_rate_limit_stop_reports_the_research_time_left():
    busy = ProviderError("http_429", "slow down", processed=False, retryable=True, retry_after=5)
    caller, _, _, clock = make_caller([Turn(chunks=[Chunk("x", 59.5)], error=busy)], timeout=60)
    reply = research(caller)
    assert reply.stop.reason is StopReason.TIME_BUDGET and clock.now() == 59.5
    assert "0.5 s of research time left" in reply.detail


def test_rate_limit_at_the_last_attempt_is_a_failed_request_not_a_stop():
    busy = ProviderError("http_429", "slow down", processed=False, retryable=True, retry_after=500)
    caller, _, provider, _ = make_caller([Turn(error=busy)], timeout=60, max_retries=0)
    reply = research(caller)
    assert reply.stop is None and reply.error is busy and len(provider.requests) == 1


def test_backoff_that_would_end_exactly_at_the_deadline_is_not_waited_for():
    busy = ProviderError("overloaded", "busy", retryable=True)
    caller, log, provider, _ = make_caller([Turn(error=busy), "fine"], timeout=1, retry_backoff_sec=1.0)
    reply = research(caller)
    assert reply.error is busy and len(provider.requests) == 1 and not log.of_type("request_retry")


def test_cancel_while_waiting_to_retry_stops_with_the_record():
    busy = ProviderError("overloaded", "busy", retryable=True)
    clock = VirtualClock()
    caller, _, provider, _ = make_caller([Turn(error=busy), "fine"], clock=clock, cancel=CancelToken(clock, at=0.5),
                                         retry_backoff_sec=1.0)
    reply = research(caller)
    assert reply.stop.reason is StopReason.CANCELLED and "retry" in reply.detail
    assert reply.record is caller.ledger.records[0] and len(provider.requests) == 1
    assert clock.now() == 0.5  # woken by the cancellation, not at the end of the wait


def test_retry_wait_ends_on_time_without_overshooting():
    busy = ProviderError("overloaded", "busy", retryable=True)
    caller, _, _, clock = make_caller([Turn(error=busy), "fine"], retry_backoff_sec=0.3)
    assert research(caller).text == "fine" and clock.now() == pytest.approx(0.3)


def test_retry_wait_ends_on_time_with_a_later_cancellation_scheduled():
    busy = ProviderError("overloaded", "busy", retryable=True)
    clock = VirtualClock()
    caller, _, _, _ = make_caller([Turn(error=busy), "fine"], clock=clock, cancel=CancelToken(clock, at=100),
                                  retry_backoff_sec=0.3)
    assert research(caller).text == "fine" and clock.now() == pytest.approx(0.3)


def test_reservation_refused_traces_the_refused_request():
    caller, log, _, _ = make_caller([], budget=1000)
    detail = caller.reservation_refused(list(MSGS), 2000, role="worker", context_id="w1-3")
    (ex,) = log.of_type("budget_exhausted")
    assert (ex.role, ex.context_id, ex.limit) == ("worker", "w1-3", 1000)
    assert ex.requested == caller.estimate(MSGS) + 2000 and ex.message == detail and "1000" in detail


class RaisingProvider(ScriptedProvider):
    """Fails when asked, before any stream exists (a refused connection)."""

    def generate(self, request):
        self.requests.append(request)
        raise ProviderError("connect", "connection refused", processed=False)


def test_provider_failing_before_streaming_is_a_failed_request():
    clock = VirtualClock()
    caller, _, _, _ = make_caller(clock=clock, provider=RaisingProvider([], clock=clock))
    reply = research(caller)
    assert reply.error is not None and "refused" in reply.detail and reply.record.outcome == "unsent"
    final = caller.final(list(MSGS), max_tokens=100, deadline_sec=120)
    assert final.error is not None and final.record.outcome == "error"


# ---- requests.py: the final request ---------------------------------------------------------
def test_final_request_is_its_own_context_and_recorded_as_such():
    caller, log, provider, clock = make_caller([], final=["The answer."])
    clock.advance(7)
    reply = caller.final(list(MSGS), max_tokens=300, deadline_sec=120)
    (req,) = provider.requests
    assert req.role == "final" and req.context_id not in (DEFAULT_CONTEXT, None)
    assert reply.record.context_id == req.context_id and req.tools == [] and req.max_output_tokens == 300
    assert (reply.text, reply.stop, reply.error, reply.detail) == ("The answer.", None, None, "")
    assert reply.record is caller.ledger.final_records[-1]
    (fr,) = log.of_type("final_request")
    assert (fr.estimated_prompt, fr.max_tokens, fr.deadline) == (caller.estimate(MSGS), 300, 127)
    assert reply.record.estimated_prompt == caller.estimate(MSGS)
    (fs,) = log.of_type("final_settled")
    assert fs.record is reply.record and fs.error is None and fs.interrupted is None


def test_final_request_uses_the_given_estimate():
    caller, log, _, _ = make_caller([], final=["ok"])
    reply = caller.final(list(MSGS), max_tokens=300, deadline_sec=120, estimate=12345)
    assert log.of_type("final_request")[0].estimated_prompt == 12345 == reply.record.estimated_prompt


def test_final_request_failure_is_reported_and_traced():
    err = ProviderError("server_error", "boom", retryable=True)
    caller, log, _, _ = make_caller([], final=[Turn(chunks=[Chunk("half")], error=err)])
    reply = caller.final(list(MSGS), max_tokens=300, deadline_sec=120)
    assert reply.error is err and "boom" in reply.detail and reply.text == "half"
    assert reply.record.outcome == "error" and reply.record is caller.ledger.final_records[-1]
    (fs,) = log.of_type("final_settled")
    assert "boom" in fs.error and fs.interrupted is None


def test_final_request_cut_by_its_deadline_is_traced():
    caller, log, _, _ = make_caller([], final=[Turn(chunks=[Chunk("half"), Chunk("rest", 200.0)])])
    reply = caller.final(list(MSGS), max_tokens=300, deadline_sec=120)
    assert reply.stop.reason is StopReason.TIME_BUDGET and reply.text == "half" and reply.detail == ""
    (fs,) = log.of_type("final_settled")
    assert fs.interrupted == "time_budget" and fs.error is None and fs.outcome == "cut"


def test_final_request_refused_when_cancelled():
    clock = VirtualClock()
    cancel = CancelToken(clock)
    cancel.cancel()
    caller, log, provider, _ = make_caller([], final=["never"], clock=clock, cancel=cancel)
    reply = caller.final(list(MSGS), max_tokens=300, deadline_sec=120)
    assert reply.stop.reason is StopReason.CANCELLED and "cancelled" in reply.detail
    assert not provider.requests and not log.of_type("final_request")


# ---- loop.py: one loop, one question --------------------------------------------------------
def test_a_loop_refuses_a_second_question():
    run = make_run(["First answer."], [])
    assert run.run("one?").answer == "First answer."
    with pytest.raises(ImprintError) as info:
        run.run("two?")
    assert "new loop" in str(info.value)
    assert len(run.requests("coordinator")) == 1  # nothing was asked for the second question


def test_run_start_describes_the_run():
    cfg = LoopConfig(novelty=NoveltyConfig(normalization="basic"))
    run = make_run(["done"], [read_tool()], config=cfg, context_window=50_000, counter=ByteEstimateCounter(3))
    run.run("Why is the sky blue?")
    (start,) = run.events("run_start")
    assert start.question == "Why is the sky blue?" and start.counter == "utf8-bytes/3"
    assert start.context_window == 50_000 and start.normalization == "basic"
    assert start.tools == [{"name": "search", "description": "search the sources",
                            "parameters": {"type": "object", "properties": {}}, "kind": "read"}]


def test_the_model_gets_the_system_prompt_the_question_and_the_transcript():
    cfg = LoopConfig(system_prompt="Be brief.")
    first = Turn(text="Let me look.", tool_calls=[call("search", q="a")])
    run = make_run([first, "done"], [read_tool()], config=cfg)
    run.run("What is known?")
    req1, req2 = run.requests("coordinator")
    assert [(m.role, m.content) for m in req1.messages] == [("system", "Be brief."), ("user", "What is known?")]
    assistant, tool = req2.messages[2], req2.messages[3]
    assert (assistant.role, assistant.content) == ("assistant", "Let me look.")
    assert (tool.role, tool.name, tool.tool_call_id) == ("tool", "search", assistant.tool_calls[0].id)
    assert tool.content == doc("a")


def test_duplicate_call_ids_are_made_distinct_keeping_the_providers_id():
    batch = Turn(tool_calls=[call("search", q="a"), call("search", q="b"), call("search", q="c")])
    batch.tool_calls = [dataclasses.replace(c, id="dup") for c in batch.tool_calls[:2]] + \
        [dataclasses.replace(batch.tool_calls[2], id="")]
    run = make_run([batch, "done"], [read_tool()])
    result = run.run()
    ids = [e.call_id for e in run.events("tool_result")]
    assert len(set(ids)) == 3 and ids[0] == "dup" and ids[1].startswith("dup") and ids[2]
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ids


def test_cancel_during_the_tool_batch_says_so():
    clock = VirtualClock()
    run = make_run([Turn(tool_calls=[call("search", q="a")])], [read_tool(work=10)], clock=clock,
                   cancel=CancelToken(clock, at=5))
    result = run.run()
    assert result.stop_reason is StopReason.CANCELLED and "cancelled" in result.detail and "tool" in result.detail


def test_coordinator_requests_share_the_default_context_and_count_rounds():
    run = make_run([searches("a"), searches("b"), "done"], [read_tool()])
    result = run.run()
    assert {r.context_id for r in run.requests("coordinator")} == {DEFAULT_CONTEXT}
    assert {r.context_id for r in result.records} == {DEFAULT_CONTEXT}
    assert [e.round for e in run.events("request_settled")] == [1, 2, 3]
    assert [r.prefix_reused > 0 for r in result.records] == [False, True, True]


def test_an_answer_has_no_stop_detail():
    run = make_run(["The answer."], [])
    assert run.run().detail == "" and run.events("stop")[0].detail == ""


def test_an_answer_after_tool_and_empty_rounds_has_no_stop_detail():
    run = make_run([searches("a"), Turn(text="   "), "The answer."], [read_tool()])
    result = run.run()
    assert result.stop_reason is StopReason.ANSWERED and result.detail == ""
    assert run.events("stop")[0].detail == ""
    (empty,) = run.events("empty_reply")
    assert (empty.round, empty.chars) == (2, 3)
    error_round = run.events("round_end")[1]
    assert (error_round.kind, error_round.progress, error_round.new_paragraphs, error_round.new_shingles) == \
        ("error", False, 0, 0)


def test_failed_requests_are_rounds_without_evidence():
    err = ProviderError("bad_request", "nope", retryable=False)
    run = make_run([Turn(error=err), "done"], [])
    run.run()
    (ev,) = run.events("round_end")
    assert ev.progress is False and (ev.new_paragraphs, ev.new_shingles) == (0, 0)


def test_round_end_reports_the_round_its_novelty_and_the_budget_so_far():
    run = make_run([searches("a"), searches("a"), "done"], [read_tool()], st=settings(research_no_progress_rounds=5))
    result = run.run()
    ends = run.events("round_end")
    results = run.events("tool_result")
    assert [e.round for e in ends] == [1, 2]
    assert [e.patience for e in ends] == [5, 5]
    first = call_verdicts(run.log.events)[results[0].call_id]
    assert (ends[0].new_paragraphs, ends[0].new_shingles) == (first["new_paragraphs"], first["new_shingles"])
    assert ends[0].new_paragraphs == 1 < ends[0].new_shingles and (ends[1].new_paragraphs, ends[1].new_shingles) == (0, 0)
    for end, upto in zip(ends, (1, 2)):
        assert end.reserved == sum(r.reserved for r in result.records[:upto])
        assert end.charged == sum(r.charged for r in result.records[:upto])


def test_max_retries_comes_from_the_loop_config():
    busy = ProviderError("overloaded", "busy", retryable=True)
    for retries in (0, 3):
        run = make_run([Turn(error=busy)] * (retries + 1) + ["done"], [], config=LoopConfig(max_retries=retries))
        run.run()
        assert len(run.events("request_retry")) == retries


def test_novelty_follows_the_loop_config():
    """The same stamped result every round: no progress under the default
    profile (the timestamp is masked), progress every round when the loop's
    config says normalization "none", so that run goes on to its token budget."""
    def stamped(args):
        return f"Page fetched 2026-10-28T10:15:{int(args['q']):02d}Z"

    def outcome(novelty):
        run = make_run(endless(lambda i: searches(str(i))), [read_tool(responder=stamped)],
                       config=LoopConfig(novelty=novelty),
                       st=settings(research_no_progress_rounds=2, research_token_budget=4_000), final=["final"])
        return run.run()

    masked = outcome(NoveltyConfig())
    assert masked.stop_reason is StopReason.NO_PROGRESS and masked.rounds == 3
    raw = outcome(NoveltyConfig(normalization="none"))
    assert raw.stop_reason is StopReason.TOKEN_BUDGET and raw.rounds > 3


# ---- loop.py: what a tool result records ----------------------------------------------------
def test_tool_result_trace_describes_the_call_and_its_result():
    segs = (doc("s1"), doc("s2"), doc("s3"))
    tool = FunctionTool(ToolSpec("search", "find", kind="read"),
                        lambda args, ctx: (ctx.work(2), ToolOutput(" ".join(segs), segments=segs))[1])
    run = make_run([Turn(tool_calls=[call("search", q="x")]), "done"], [tool])
    run.clock.advance(5)
    run.run()
    (res,) = run.events("tool_result")
    assert (res.round, res.kind, res.chars, res.arguments) == (1, "read", len(" ".join(segs)), {"q": "x"})
    assert (res.started, res.finished) == (5, 7)
    assert res.segments == list(segs)
    # each segment is judged as its own unit of evidence
    verdict = call_verdicts(run.log.events)[res.call_id]
    assert verdict["paragraphs"] == 3 and verdict["new_paragraphs"] == 3


def test_results_not_executed_are_never_judged():
    slow = read_tool("fetch", work=12)
    batch = Turn(tool_calls=[call("fetch", q="x"), call("search", q="y")])
    run = make_run([batch], [slow, read_tool()], st=settings(research_timeout_sec=10))
    run.run()
    skipped = [e for e in run.events("tool_result") if e.status == "not_executed"]
    assert len(skipped) == 1 and skipped[0].novelty is None


def test_a_writes_echo_is_not_evidence():
    """A write is never fingerprinted: a read that later returns the same
    text is new evidence."""
    text = doc("shared")
    writer = FunctionTool(ToolSpec("save_note", "save", kind="write"), lambda args, ctx: text)
    reader = read_tool(responder=lambda args: text)
    run = make_run([Turn(tool_calls=[call("save_note", body="n")]), searches("x"), "done"], [writer, reader])
    result = run.run()
    assert [e.progress for e in run.events("round_end")] == [False, True]
    write_result = run.events("tool_result")[0]
    assert write_result.novelty is None and len(result.writes) == 1 and len(result.evidence) == 1


# ---- loop.py: the end of a run --------------------------------------------------------------
def test_stop_and_run_end_events_sum_up_the_run():
    writer = FunctionTool(ToolSpec("save_note", "save", kind="write"), lambda args, ctx: "saved")
    plan = [searches("a"), Turn(tool_calls=[call("save_note", body="n")]), searches("a"), searches("a")]
    run = make_run(plan, [read_tool(), writer], st=settings(research_no_progress_rounds=2), final=["Final."])
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS
    (stop,) = run.events("stop")
    assert (stop.reason, stop.round, stop.overshoot) == ("no_progress", 4, 0)
    assert stop.detail == result.detail and "2" in stop.detail
    assert (stop.reserved, stop.charged, stop.refunded) == (result.reserved, result.charged, result.refunded)
    assert stop.refunded > 0
    (end,) = run.events("run_end")
    assert (end.stop_reason, end.final_mode, end.rounds) == ("no_progress", "synthesized", 4)
    assert (end.requests, end.reserved, end.charged, end.refunded) == \
        (4, result.reserved, result.charged, result.refunded)
    assert (end.writes, end.evidence) == (1, 3)  # every successful read is kept, new or not


def test_overshoot_is_how_far_a_running_tool_went_past_the_deadline():
    slow = read_tool("fetch", work=25)
    run = make_run([Turn(tool_calls=[call("fetch", q="big")])], [slow], st=settings(research_timeout_sec=10),
                   final=["Synthesized."])
    run.run()
    assert run.events("stop")[0].overshoot == 15


def test_condensed_final_context_keeps_the_system_prompt_and_the_stopping_round():
    texts = {f"t{i}": doc(f"piece {i}", words=150) for i in range(8)}
    cfg = LoopConfig(research_max_output_tokens=64, system_prompt="Be brief.")
    run = make_run([searches(*texts)], [read_tool(responder=texts)], config=cfg, context_window=2_000,
                   st=ResearchSettings(research_token_budget=3_500), workers=[Turn(text="short notes")] * 5)
    result = run.run()
    assert result.final_mode is FinalMode.SYNTHESIZED and result.rounds == 1
    (final,) = run.requests("final")
    assert (final.messages[0].role, final.messages[0].content) == ("system", "Be brief.")
    condensing = [e for e in run.events("request_settled") if e.role == "worker"]
    assert condensing and {e.round for e in condensing} == {1}


# ---- loop.py: section workers ---------------------------------------------------------------
def notes_for(request, index):
    section = request.messages[-1].content.split("Section: ")[-1]
    return Turn(text=f"Notes on {section}: " + doc(section))


def fan(*sections):
    return Turn(tool_calls=[call("delegate_sections", sections=list(sections))])


def test_worker_prompts_give_each_worker_its_section_of_the_question():
    run = make_run([fan("history", "prices"), "done"], [], config=LoopConfig(section_workers=True),
                   workers=notes_for)
    run.run("Tell me about tea.")
    prompts = sorted((r.messages for r in run.requests("worker")), key=lambda m: m[-1].content)
    for msgs, section in zip(prompts, ("history", "prices")):
        assert [m.role for m in msgs] == ["system", "user"] and msgs[0].content.strip()
        assert "Tell me about tea." in msgs[1].content and msgs[1].content.endswith(section)
    (start,) = run.events("tool_call")
    assert start.tool == "delegate_sections" and start.blocking is True  # workers run inside the call
    settled = [e for e in run.events("request_settled") if e.role == "worker"]
    assert [e.round for e in settled] == [1, 1]


def test_the_stop_a_fan_out_reports_is_its_first_section_s():
    """Sections 0 and 1 both meet a full context: the batch reports section
    0's stop, and neither is sent."""
    run = make_run([fan("zero " * 500, "one " * 450), "done"], [], config=LoopConfig(section_workers=True),
                   context_window=1_000)
    result = run.run()
    assert result.stop_reason is StopReason.CONTEXT_FULL
    prompts = {s: run.loop.caller.estimate([Message("system", WORKER_SYSTEM),
                                            Message("user", f"Question: What is known?\nSection: {s}")])
               for s in ("zero " * 500, "one " * 450)}
    assert result.detail == (f"section worker: prompt of {prompts['zero ' * 500]} tokens plus 512 output tokens "
                             f"exceeds the context window of 1000")
    assert run.requests("worker") == []


def test_a_fan_out_reserves_in_order_then_settles_in_order_whatever_thread_finishes_first():
    """Section 1's response ends before section 0's (section 0's worker waits
    for it), yet the ledger and the trace read as if the threads had run in
    turn: both reserved, in order, then both settled, in order."""
    import threading

    one_done = threading.Event()

    def zero_waits(request, index):
        section = request.messages[-1].content.split("Section: ")[-1]
        if section == "zero":
            assert one_done.wait(10)
        turn = notes_for(request, index)
        if section == "one":
            one_done.set()
        return turn

    run = make_run([fan("zero", "one"), "done"], [], config=LoopConfig(section_workers=True), workers=zero_waits)
    run.run()
    assert one_done.is_set()
    order = [(type(e).__name__, e.context_id) for e in run.log.events
             if isinstance(e, (RequestReserved, RequestSettled)) and e.role == "worker"]
    assert order == [("RequestReserved", "w1-0"), ("RequestReserved", "w1-1"),
                     ("RequestSettled", "w1-0"), ("RequestSettled", "w1-1")]
    first, second = [e for e in run.events(RequestReserved) if e.role == "worker"]
    assert second.budget_left == first.budget_left - second.reserved   # nothing settled in between


def test_worker_notes_are_the_evidence_and_failures_are_not():
    def some_fail(request, index):
        section = request.messages[-1].content.split("Section: ")[-1]
        if section == "bad":
            return Turn(error=ProviderError("bad_request", "nope", retryable=False))
        return notes_for(request, index)

    run = make_run([fan("good", "bad", "fine"), "done"], [], config=LoopConfig(section_workers=True),
                   workers=some_fail)
    run.run()
    (res,) = run.events("tool_result")
    good = [f"Notes on good: {doc('good')}", f"Notes on fine: {doc('fine')}"]
    assert res.status == "ok" and res.segments == good
    parts = res.text.split("\n\n")
    assert parts[0] == good[0] and parts[2] == good[1] and "bad" in parts[1] and len(parts) == 3


def test_a_fan_out_where_every_section_fails_is_an_error_result():
    err = ProviderError("bad_request", "nope", retryable=False)
    run = make_run([fan("a", "b"), "done"], [], config=LoopConfig(section_workers=True),
                   workers=lambda request, index: Turn(error=err))
    result = run.run()
    (res,) = run.events("tool_result")
    assert res.status == "error" and not result.evidence
    assert run.events("round_end")[0].progress is False


def test_worker_contexts_are_forgotten_after_their_request():
    run = make_run([fan("a", "b", "c"), fan("d"), "done"], [], config=LoopConfig(section_workers=True),
                   workers=notes_for)
    run.run()
    assert len(run.loop.ledger._processed) == 1  # only the coordinator's context is kept


def _worker_budget(sections):
    """What the coordinator has committed when the fan-out starts, and what its workers reserve."""
    run = make_run([fan(*sections), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for)
    result = run.run()
    committed = result.records[0].charged
    return committed, sum(r.reserved for r in result.records if r.role == "worker")


def test_workers_that_exactly_fit_the_budget_are_all_admitted():
    sections = ("alpha", "beta")
    committed, wanted = _worker_budget(sections)
    run = make_run([fan(*sections), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for,
                   st=settings(research_token_budget=committed + wanted))
    result = run.run()
    assert len(run.requests("worker")) == 2 and result.stop_reason is StopReason.TOKEN_BUDGET
    assert "not researched" not in run.events("tool_result")[0].text
    run = make_run([fan(*sections), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for,
                   st=settings(research_token_budget=committed + wanted - 1))
    run.run()
    assert len(run.requests("worker")) == 1
    (refused,) = run.events("budget_exhausted")
    worker_contexts = {r.context_id for r in run.requests("worker")}
    assert refused.role == "worker" and refused.context_id not in worker_contexts | {DEFAULT_CONTEXT, None}


def test_a_worker_that_meets_a_limit_ends_research_after_the_batch():
    long_section = "detail " * 800
    run = make_run([fan("short", long_section), "done"], [], config=LoopConfig(section_workers=True),
                   workers=notes_for, context_window=1_200, final=["Final."])
    result = run.run()
    assert result.stop_reason is StopReason.CONTEXT_FULL and result.rounds == 1
    assert result.detail.startswith("section worker:") and "context window" in result.detail


def test_sections_past_the_budget_each_get_a_note_and_the_first_refusal_is_the_stop():
    # gamma and delta are never reserved: each gets its note, in order, and the refusal quoted is gamma's
    sections = ("alpha", "beta", "gamma", "delta")
    full = make_run([fan(*sections), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for).run()
    committed = full.records[0].charged
    wanted = sum(r.reserved for r in full.records if r.context_id in ("w1-0", "w1-1"))
    run = make_run([fan(*sections), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for,
                   st=settings(research_token_budget=committed + wanted))
    result = run.run()
    text = run.events("tool_result")[0].text
    assert text.count("not researched: the token budget cannot reserve it") == 2
    assert text.index("'gamma' not researched") < text.index("'delta' not researched")
    assert sorted(r.context_id for r in run.requests("worker")) == ["w1-0", "w1-1"]
    (refused,) = run.events("budget_exhausted")
    assert refused.context_id == "w1-2" and result.stop_reason is StopReason.TOKEN_BUDGET
    assert result.detail == f"section worker: {refused.message}"


def test_a_worker_sent_again_after_a_retryable_error_is_the_same_request_one_attempt_on():
    # section b's first response fails and is sent again when its turn to settle comes (before c's): the same prompt,
    # role, context, output limit and round, attempt 1; its notes are the evidence like the others'
    tries = {"b": 0}

    def b_fails_once(request, index):
        section = request.messages[-1].content.split("Section: ")[-1]
        if section == "b" and tries["b"] == 0:
            tries["b"] += 1
            return Turn(error=ProviderError("overloaded", "busy", retryable=True))
        return notes_for(request, index)

    run = make_run([fan("a", "b", "c"), "done"], [],
                   config=LoopConfig(section_workers=True, research_max_output_tokens=300), workers=b_fails_once)
    run.run()
    workers = run.requests("worker")
    assert sorted(r.context_id for r in workers[:3]) == ["w1-0", "w1-1", "w1-2"]   # sent at once: any order
    assert workers[3].context_id == "w1-1"
    again, first = workers[3], next(r for r in workers[:3] if r.context_id == "w1-1")
    assert again.messages == first.messages and again.tools == [] and again.max_output_tokens == 300
    reserved = [(e.context_id, e.attempt) for e in run.events(RequestReserved) if e.role == "worker"]
    assert reserved == [("w1-0", 0), ("w1-1", 0), ("w1-2", 0), ("w1-1", 1)]
    settled = [e for e in run.events(RequestSettled) if e.role == "worker"]
    assert [(e.context_id, e.round) for e in settled] == [("w1-0", 1), ("w1-1", 1), ("w1-1", 1), ("w1-2", 1)]
    assert [e.error is not None for e in settled] == [False, True, False, False]
    text = run.events("tool_result")[0].text
    assert "Notes on b:" in text and "not researched" not in text


def test_a_worker_s_settled_duration_is_its_response_s_not_the_wait_for_the_batch():
    # A clock that ticks at every reading: a single worker's request takes as many ticks as the same
    # response to the coordinator (settled in turn), not more for being settled after the batch.
    import threading

    class Ticking(VirtualClock):
        def __init__(self):
            super().__init__()
            self._tick = threading.Lock()

        def now(self):
            with self._tick:
                self._now += 1.0
                return self._now

    run = make_run([fan("x"), "done"], [], config=LoopConfig(section_workers=True), workers=notes_for,
                   clock=Ticking(), st=settings(research_timeout_sec=3600))
    run.run()
    _, worker, coordinator = run.events(RequestSettled)[:3]     # the fan-out, its worker, the answer
    assert worker.role == "worker" and coordinator.role == "coordinator"
    assert worker.duration == coordinator.duration > 0          # one chunk each, no tool call
