"""Conformance defects of the loop against the record (a worker refused its
reservation, cancellation during a retry wait, duplicate call ids,
unvalidated construction and raw errors), and tests for mutations that the rest of the suite let through. Each test
failed on the code before its fix, or under its mutation."""
from __future__ import annotations

import pytest

from imprint_core import (CancelToken, Chunk, LoopConfig, Message, ProviderError, ResearchLoop, ResearchSettings,
                          Settings, SettingsError, StopReason, TextDelta, ToolCall, Turn, VirtualClock, call)
from imprint_core.types import Done, ModelRequest

from helpers import doc, endless, make_run, read_tool, searches, settings


# ---- 6: a section worker that cannot get its reservation ends research ----------------------
def _notes(request, index):
    section = request.messages[-1].content.split("Section: ")[-1]
    return Turn(chunks=[Chunk(f"Notes on {section}: " + doc(section), 1.0)])


def _fan_out_run():
    fan = Turn(tool_calls=[call("delegate_sections", sections=["history", "prices", "outlook", "risks"])])
    return make_run([fan, searches("never sent"), "never"], [read_tool()],
                    config=LoopConfig(section_workers=True, max_workers=4, research_max_output_tokens=512),
                    st=settings(research_token_budget=2_300), workers=_notes)


def test_a_worker_reservation_that_does_not_fit_ends_research_with_token_budget():
    run = _fan_out_run()
    result = run.run()
    assert result.stop_reason is StopReason.TOKEN_BUDGET and "section worker" in result.detail
    # The coordinator never reserves or sends another request after the batch.
    assert len(run.requests("coordinator")) == 1
    assert [e.role for e in run.events("budget_exhausted")] == ["worker"]
    out = run.events("tool_result")[0].text
    assert "Notes on history" in out and "'risks' not researched" in out


def test_which_sections_are_researched_does_not_depend_on_thread_timing():
    seen = set()
    for _ in range(8):
        run = _fan_out_run()
        run.run()
        seen.add(tuple(sorted(r.messages[-1].content.split("Section: ")[-1] for r in run.requests("worker"))))
    assert len(seen) == 1 and len(next(iter(seen))) in (1, 2, 3)


# ---- 7: cancellation is not held up by a retry's backoff -------------------------------------
class CancelOnSleep(VirtualClock):
    """Stands for another thread calling cancel() at `at` while the loop waits."""

    def __init__(self, at: float):
        super().__init__()
        self.at, self.token = at, CancelToken()

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.now() >= self.at:
            self.token.cancel()


def test_cancel_during_the_retry_wait_returns_at_once():
    clock = CancelOnSleep(0.5)
    err = ProviderError("rate_limited", "slow down", retryable=True, retry_after=3, processed=False, status=429)
    run = make_run([Turn(error=err), "never"], [], clock=clock, cancel=clock.token)
    result = run.run()
    assert result.stop_reason is StopReason.CANCELLED
    assert clock.now() <= 0.75 and len(run.requests("coordinator")) == 1


def test_a_cancel_token_due_inside_the_wait_stops_it_there():
    clock = VirtualClock()
    err = ProviderError("rate_limited", "slow down", retryable=True, retry_after=3, processed=False, status=429)
    run = make_run([Turn(error=err), "never"], [], clock=clock, cancel=CancelToken(clock, at=1.3))
    assert run.run().stop_reason is StopReason.CANCELLED and clock.now() == pytest.approx(1.3)


# ---- 8: duplicate or empty call ids in one batch lose no evidence ----------------------------
@pytest.mark.parametrize("ids", [("dup", "dup"), ("", "")])
def test_calls_sharing_an_id_are_judged_and_answered_separately(ids):
    old, new = doc("old"), doc("new")
    tool = read_tool(responder={"old": old, "new": new})
    batch = Turn(tool_calls=[ToolCall(ids[0], "search", {"q": "new"}), ToolCall(ids[1], "search", {"q": "old"})])
    run = make_run([searches("old"), batch, "done"], [tool])
    result = run.run()
    assert [e.progress for e in run.events("round_end")] == [True, True]
    assert any(ev.text == new for ev in result.evidence)
    tool_ids = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert len(set(tool_ids)) == len(tool_ids) == 3


# ---- 9: settings are validated wherever they are built ---------------------------------------
@pytest.mark.parametrize("kw", [{"research_no_progress_rounds": 0}, {"research_timeout_sec": 5},
                                {"research_token_budget": 10**9}, {"max_tokens": "many"}])
def test_research_settings_reject_out_of_bounds_values_in_code(kw):
    with pytest.raises(SettingsError) as info:
        ResearchSettings(**kw)
    assert info.value.key == "chat." + next(iter(kw))


def test_a_settings_file_whose_section_is_not_a_table_is_named_not_a_type_error(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("chat = 5\n", encoding="utf-8")
    for action in (lambda s: s.set("chat.max_tokens", 100), lambda s: s.list(), lambda s: s.reset()):
        with pytest.raises(SettingsError) as info:
            action(Settings(path, environ={}))
        assert info.value.key == "chat" and info.value.file == str(path)
    assert path.read_text(encoding="utf-8") == "chat = 5\n"


# ---- mutations the suite used to miss --------------------------------------------------------
def test_the_time_budget_starts_at_run_not_at_construction():
    clock = VirtualClock(1000)
    run = make_run(["done"], [], clock=clock, st=settings(research_timeout_sec=10))
    clock.advance(50)  # provider setup after the loop was built
    run.run()
    assert run.events("run_start")[0].deadline == 1060


class DeadlineDeaf:
    """A provider that ignores deadlines and cancellation: the loop's own
    per-event check is all that stops its stream."""
    name = "deaf"
    context_window = 100_000
    counting_modes = None

    def __init__(self, clock):
        from imprint_core import RegexTokenCounter
        self.clock, self.counter, self.requests = clock, RegexTokenCounter(), []

    def generate(self, req: ModelRequest):
        self.requests.append(req)
        if req.role == "final":
            yield TextDelta("final")
            yield Done()
            return
        for _ in range(100):
            self.clock.advance(1.0)
            yield TextDelta("word ")
        yield Done()


def test_the_loop_cuts_a_stream_at_the_deadline_itself():
    clock = VirtualClock()
    provider = DeadlineDeaf(clock)
    loop = ResearchLoop(provider, [], settings(research_timeout_sec=10), clock=clock)
    result = loop.run("q")
    assert result.stop_reason is StopReason.TIME_BUDGET
    assert 10 <= clock.now() <= 12 and len(provider.requests) == 2  # research cut at 10 s, then the final


def test_a_cancel_after_the_stop_decision_sends_no_final_request():
    # Cancelled while the stop is traced: research has ended, the final request must not go out.
    run = make_run(endless(lambda i: searches("same")), [read_tool()], st=settings(research_no_progress_rounds=2))
    run.trace.subscribe(lambda e: run.loop.cancel.cancel() if e.TYPE == "stop" else None)
    result = run.run()
    assert run.requests("final") == [] and result.answer == "" and result.final_mode.value == "cancelled"


def test_a_backoff_that_would_pass_the_deadline_is_not_waited_for():
    err = ProviderError("overloaded", "try later", retryable=True, processed=False, status=503)
    run = make_run(endless(lambda i: Turn(error=err)), [], st=settings(research_timeout_sec=60),
                   config=LoopConfig(retry_backoff_sec=100))
    result = run.run()
    assert run.events("request_retry") == [] and run.clock.now() < 60
    assert result.stop_reason is StopReason.NO_PROGRESS
