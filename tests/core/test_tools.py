"""The tool executor and the scripted provider on their own."""
from __future__ import annotations

import pytest

from imprint_core import (CancelToken, Chunk, Done, FunctionTool, ModelRequest, Message, ProviderError,
                          ScriptedProvider, ScriptExhausted, TextDelta, TimeBudget, ToolCallEvent, ToolExecutor,
                          ToolOutput, ToolSpec, TraceWriter, Turn, UsageEvent, VirtualClock, call)

from imprint_core.events import ToolResultRecorded

from helpers import read_tool, write_tool


def executor(tools, timeout=10.0, cancel=None, clock=None):
    clock = clock or VirtualClock()
    budget = TimeBudget(clock, timeout)
    budget.start()
    trace = TraceWriter(None, clock)
    seen: list = []
    trace.subscribe(seen.append)
    ex = ToolExecutor(tools, clock, budget, cancel or CancelToken(clock), trace=trace)
    return ex, clock, budget, seen


def test_every_call_gets_exactly_one_result_in_order():
    ex, clock, _, seen = executor([read_tool(work=6), write_tool()])
    calls = [call("search", q="a"), call("save_note", text="x"), call("search", q="b"), call("search", q="c")]
    results = ex.run_batch(calls, 1)
    recorded = [e for e in seen if isinstance(e, ToolResultRecorded)]
    assert [r.call_id for r in results] == [c.id for c in calls] == [r.call_id for r in recorded]
    assert [r.status for r in results] == ["ok", "ok", "ok", "not_executed"]
    assert results[2].after_deadline and results[2].finished_at == 12
    assert "not executed" in results[3].text and "deadline" in results[3].text
    assert results[1].kind == "write" and results[0].kind == "read"


def test_deadline_exactly_reached_means_not_executed():
    ex, clock, _, _ = executor([read_tool()])
    clock.advance(10)
    (r,) = ex.run_batch([call("search", q="a")], 1)
    assert r.status == "not_executed"


def test_cancel_means_not_executed():
    clock = VirtualClock()
    cancel = CancelToken(clock)
    ex, _, _, _ = executor([read_tool()], cancel=cancel)
    cancel.cancel()
    (r,) = ex.run_batch([call("search", q="a")], 1)
    assert r.status == "not_executed" and "cancelled" in r.text


def test_exceptions_bytes_and_status_derivation():
    def weird(arguments, ctx):
        kind = arguments["k"]
        if kind == "raise":
            raise KeyError("missing")
        if kind == "bytes":
            return ToolOutput(b"caf\xe9 \xff ok")  # type: ignore[arg-type]
        if kind == "blank":
            return "   \n"
        if kind == "nohits":
            return "[]"
        if kind == "segs":
            return ToolOutput("ignored", segments=("hit one", "hit two"))
        return 42

    tool = FunctionTool(ToolSpec("weird", kind="read"), weird)
    ex, _, _, _ = executor([tool])
    rs = ex.run_batch([call("weird", k=k) for k in ("raise", "bytes", "blank", "nohits", "segs", "int")], 1)
    assert [r.status for r in rs] == ["error", "ok", "empty", "empty", "ok", "ok"]
    assert "KeyError" in rs[0].text and "missing" in rs[0].text
    assert "caf\ufffd" in rs[1].text
    assert rs[4].segments == ("hit one", "hit two") and rs[5].text == "42"


def test_background_read_abandoned_but_blocking_read_and_write_run_on():
    bg = read_tool("bg", work=50, blocking=False)
    fg = read_tool("fg", work=50)
    ex, clock, _, _ = executor([bg, fg])
    (r,) = ex.run_batch([call("bg", q="a")], 1)
    assert r.status == "error" and "not completed" in r.text and clock.now() == 10
    ex2, clock2, _, _ = executor([fg, write_tool(work=50)])
    rs = ex2.run_batch([call("fg", q="a"), call("save_note", text="n")], 1)
    assert [r.status for r in rs] == ["ok", "not_executed"] and clock2.now() == 50


def test_ask_pauses_the_budget_while_it_waits():
    def ask(arguments, ctx):
        ctx.work(100)
        return "yes"

    ex, clock, budget, _ = executor([FunctionTool(ToolSpec("ask", kind="ask"), ask)])
    (r,) = ex.run_batch([call("ask", question="?")], 1)
    assert r.status == "ok" and not r.after_deadline
    assert budget.deadline == 110 and budget.paused_total == 100 and not budget.expired()


@pytest.mark.parametrize("blocking", [True, False])
def test_cancellation_ends_an_asks_wait_blocking_or_not(blocking):
    def ask(arguments, ctx):
        ctx.work(400)      # the user would answer at t = 400
        return "yes"

    clock = VirtualClock()
    ex, clock, budget, _ = executor([FunctionTool(ToolSpec("ask", kind="ask"), ask, blocking=blocking)],
                                    cancel=CancelToken(clock, at=100), clock=clock)
    (r,) = ex.run_batch([call("ask", question="?")], 1)
    assert r.status == "error" and "cancelled" in r.text and clock.now() == 100
    # the wait was not research time, cancelled or not
    assert budget.paused_total == 100


def test_a_blocking_read_still_runs_on_past_a_cancel():
    fg = read_tool("fg", work=50)
    clock = VirtualClock()
    ex, _, _, _ = executor([fg], cancel=CancelToken(clock, at=10), clock=clock)
    (r,) = ex.run_batch([call("fg", q="a")], 1)
    assert r.status == "ok" and clock.now() == 50


def test_identical_calls_in_a_batch_all_execute():
    w = write_tool()
    ex, _, _, _ = executor([w])
    rs = ex.run_batch([call("save_note", text="same") for _ in range(5)], 1)
    assert len(w.recorder.calls) == 5 and [r.text for r in rs] == [f"saved note {i}" for i in range(1, 6)]


# ---- scripted provider ------------------------------------------------------------------
def request(role="coordinator", **kw):
    return ModelRequest([Message("user", "q")], [], 100, deadline=1e9, cancel=CancelToken(), role=role, **kw)


def test_scripted_provider_streams_turns_on_the_virtual_clock():
    clock = VirtualClock()
    p = ScriptedProvider([Turn(chunks=[Chunk("a", 1), Chunk("b", 2)], latency=0.5,
                               tool_calls=[call("search", q="x")])], clock=clock)
    events = list(p.generate(request()))
    assert [type(e) for e in events] == [TextDelta, TextDelta, ToolCallEvent, UsageEvent, Done]
    assert clock.now() == 3.5
    usage = events[3].usage
    assert usage.prompt_tokens > 0 and usage.output_tokens > 0 and usage.cached_tokens is None


def test_scripted_provider_errors_and_exhaustion():
    clock = VirtualClock()
    p = ScriptedProvider([Turn(text="partial", error=ProviderError("cut", "stream broke"))], clock=clock)
    gen = p.generate(request())
    assert next(gen) == TextDelta("partial")
    with pytest.raises(ProviderError):
        next(gen)
    with pytest.raises(ScriptExhausted) as info:
        list(p.generate(request()))
    assert "request 2" in str(info.value) and "1 turn" in str(info.value)
    with pytest.raises(ScriptExhausted):
        list(ScriptedProvider(None, clock=clock).generate(request()))


def test_scripted_provider_roles_and_callables():
    clock = VirtualClock()
    p = ScriptedProvider(lambda req, i: f"turn {i}", clock=clock, workers=["w0"])
    texts = lambda role: "".join(e.text for e in p.generate(request(role)) if isinstance(e, TextDelta))
    assert texts("coordinator") == "turn 0" and texts("coordinator") == "turn 1"
    assert texts("worker") == "w0" and texts("worker").startswith("Notes:")  # default after the script
    assert texts("final")
    assert [r.role for r in p.requests] == ["coordinator", "coordinator", "worker", "worker", "final"]
    none_usage = ScriptedProvider([Turn(text="x", usage=None)], clock=clock)
    assert not any(isinstance(e, UsageEvent) for e in none_usage.generate(request()))


def test_background_write_is_never_abandoned_at_deadline_or_cancel():
    done: list = []

    def slow_write(arguments, ctx):
        ctx.work(50)
        done.append(ctx.clock.now())
        return "written"

    clock = VirtualClock()
    cancel = CancelToken(clock, at=3)
    tool = FunctionTool(ToolSpec("bg_write", kind="write"), slow_write, blocking=False)
    budget = TimeBudget(clock, 10)
    budget.start()
    ex = ToolExecutor([tool], clock, budget, cancel)
    rs = ex.run_batch([call("bg_write", x=1), call("bg_write", x=2)], 1)
    assert done == [50] and [r.status for r in rs] == ["ok", "not_executed"]
    assert rs[0].text == "written" and rs[0].after_deadline
