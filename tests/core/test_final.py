"""The tools-free final request: reserved synthesis, its own allowance and
deadline, context_full, condensing, the labelled fallback and its
persistence, and cancellation of the final stage."""
from __future__ import annotations

import pytest

from imprint_core import (CancelToken, Chunk, FinalMode, LoopConfig, Message, ProviderError, StopReason, Turn,
                          VirtualClock, call, read_trace)

from helpers import doc, endless, make_run, read_tool, searches, settings

FINAL_TEXT = "Synthesized answer from the evidence."


def test_reserved_synthesis_runs_with_the_research_budget_spent():
    run = make_run(endless(lambda i: searches(f"t{i}")), [read_tool()],
                   st=settings(research_token_budget=1_024, max_tokens=4_096), config=LoopConfig(policy="reserve"),
                   final=[FINAL_TEXT])
    result = run.run()
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    ledger = run.loop.ledger
    stop = run.events("stop")[0]
    assert ledger.totals.left < 4_096  # the final allowance alone would not fit what is left
    (final,) = run.requests("final")
    assert final.tools == [] and final.max_output_tokens == 4_096 and final.role == "final"
    assert final.deadline == run.events("final_request")[0].t + 120
    assert "research token budget ran out" in final.messages[-1].content
    # not reserved against the research budget, but recorded
    assert (ledger.totals.reserved, ledger.totals.charged) == (stop.reserved, stop.charged)
    assert [r.role for r in result.records] == ["coordinator"] * result.research_requests
    (rec,) = result.final_records
    assert rec.reserved == rec.charged == rec.refunded == 0 and rec.measured_output is not None
    assert rec.output_tokens > 0 and rec.outcome == "ok"
    assert result.final_mode is FinalMode.SYNTHESIZED and result.answer == FINAL_TEXT
    assert run.answers == [(FINAL_TEXT, FinalMode.SYNTHESIZED)]
    assert result.messages[-1] == Message("assistant", FINAL_TEXT)
    assert run.events("answer")[0].text == FINAL_TEXT
    (settled,) = run.events("final_settled")
    assert settled.reserved == 0 and settled.outcome == "ok" and settled.measured_output is not None


def test_context_full_stops_before_sending_the_request_that_does_not_fit():
    turns = endless(lambda i: searches(f"t{i}"))
    run = make_run(turns, [read_tool(responder=lambda a: doc(a["q"], 100))], context_window=1_800,
                   st=settings(max_tokens=64), final=[FINAL_TEXT])
    result = run.run()
    assert result.stop_reason is StopReason.CONTEXT_FULL
    assert "context window of 1800" in result.detail
    ctr = run.provider.counter
    for req in run.requests("coordinator"):
        assert ctr.to_tokens(len(ctr.prompt_units(req.messages, req.tools))) + 512 <= 1_800
    research_msgs = result.messages[:-1]
    assert ctr.to_tokens(len(ctr.prompt_units(research_msgs, run.loop.tool_specs))) + 512 > 1_800
    assert len(run.requests("coordinator")) == result.research_requests == result.rounds
    assert result.final_mode is FinalMode.SYNTHESIZED and result.answer == FINAL_TEXT


def _fallback_run(**kw):
    """Time runs out after four rounds of sizeable evidence from two tools;
    the final context cannot fit and nothing is left to condense it with."""
    fetch = read_tool("fetch", responder=lambda a: doc("page " + a["url"], 120), work=3)
    search = read_tool("search", responder=lambda a: doc("hits " + a["q"], 120), work=3)
    plan = [searches("prices"), Turn(tool_calls=[call("fetch", url="https://ex.com/a")]), searches("history"),
            Turn(tool_calls=[call("fetch", url="https://ex.com/b")])]
    return make_run(endless(lambda i: plan[i]), [search, fetch], context_window=4_000,
                    st=settings(research_timeout_sec=10, max_tokens=3_900), final=["never used"], **kw)


def test_fallback_when_the_final_context_cannot_fit_and_its_persistence(tmp_path):
    path = tmp_path / "fallback.jsonl"
    run = _fallback_run(trace_target=path)
    result = run.run()
    run.trace.close()
    assert result.stop_reason is StopReason.TIME_BUDGET and result.final_mode is FinalMode.FALLBACK
    assert run.requests("final") == [] and run.requests("worker") == []
    text = result.answer
    first = text.splitlines()[0]
    assert first.startswith("Research stopped because the research time budget ran out")
    assert len(result.evidence) == 4
    position = 0
    for ev, label in zip(result.evidence, ["search(q='prices'), round 1", "fetch(url='https://ex.com/a'), round 2",
                                           "search(q='history'), round 3", "fetch(url='https://ex.com/b'), round 4"]):
        assert ev.label == label
        at = text.index(label, position)
        assert text.index(ev.text, at) > at  # the text comes under its own label
        position = text.index(ev.text, at)
    # persisted like any answer
    assert run.answers == [(text, FinalMode.FALLBACK)]
    assert result.messages[-1] == Message("assistant", text)
    tr = read_trace(path)
    (answer,) = tr.of_type("answer")
    assert answer.mode == "fallback" and answer.text == text
    assert tr.of_type("fallback")[0].evidence == 4
    assert tr.of_type("run_end")[0].final_mode == "fallback"


def test_fallback_when_condensing_has_no_budget_left():
    big = read_tool(responder=lambda a: doc(a["q"], 200))
    run = make_run(endless(lambda i: searches(f"t{i}")), [big], context_window=2_000,
                   st=settings(research_token_budget=1_024, max_tokens=1_500), config=LoopConfig(policy="reserve"))
    result = run.run()
    assert result.stop_reason is StopReason.TOKEN_BUDGET and result.final_mode is FinalMode.FALLBACK
    assert run.requests("final") == [] and run.requests("worker") == []
    assert [e.ok for e in run.events("condense")] == [False]
    assert "search(q='t0'), round 1" in result.answer and result.evidence[0].text in result.answer
    assert run.answers == [(result.answer, FinalMode.FALLBACK)]


def test_condensing_path_when_the_budget_allows():
    notes = ["Condensed: prices rose 4 percent in 2023 according to the sources."]
    run = make_run(endless(lambda i: searches(f"t{i}")), [read_tool(responder=lambda a: doc(a["q"], 60))],
                   context_window=4_000, st=settings(research_no_progress_rounds=2, max_tokens=3_700),
                   workers=notes, final=[FINAL_TEXT])
    plan = [searches("a"), searches("b"), searches("c"), searches("c"), searches("c")]
    run.provider._sources["coordinator"] = endless(lambda i: plan[i])
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert run.events("final_context")[0].fits is False
    (worker,) = run.requests("worker")
    for topic in "abc":
        assert doc(topic, 60) in worker.messages[-1].content  # all evidence went to the condenser
    condense_rec = [r for r in result.records if r.role == "worker"]
    assert len(condense_rec) == 1 and condense_rec[0].charged > 0  # charged to the research budget
    (final,) = run.requests("final")
    assert notes[0] in final.messages[-1].content and final.tools == []
    assert final.max_output_tokens == 3_700
    assert result.final_mode is FinalMode.SYNTHESIZED and result.answer == FINAL_TEXT


def test_final_request_has_its_own_120_second_deadline():
    final = [Turn(chunks=[Chunk("Part one. ", 60), Chunk("Part two. ", 70), Chunk("never", 10)])]
    run = make_run(endless(lambda i: searches("same")), [read_tool()], st=settings(research_no_progress_rounds=2),
                   final=final)
    result = run.run()
    start = run.events("final_request")[0].t
    assert run.requests("final")[0].deadline == start + 120
    # cut at the deadline (a provider that honours it) or at the first chunk past it
    assert start + 120 <= run.clock.now() <= start + 130
    assert result.final_records[0].outcome == "cut"
    assert "never" not in result.answer


def test_final_request_past_its_deadline_without_text_falls_back():
    final = [Turn(chunks=[Chunk("", 150)])]
    run = make_run(endless(lambda i: searches("same")), [read_tool()], st=settings(research_no_progress_rounds=2),
                   final=final)
    result = run.run()
    assert result.final_mode is FinalMode.FALLBACK and "past its deadline" in result.answer
    assert run.answers == [(result.answer, FinalMode.FALLBACK)]


@pytest.mark.parametrize("final", [[Turn(error=ProviderError("server", "500", retryable=True))], [""]])
def test_failed_or_empty_final_request_falls_back_with_the_evidence(final):
    run = make_run(endless(lambda i: searches("same")), [read_tool()], st=settings(research_no_progress_rounds=2),
                   final=final)
    result = run.run()
    assert result.final_mode is FinalMode.FALLBACK
    assert "search(q='same'), round 1" in result.answer and doc("same") in result.answer
    assert "recent rounds found no new evidence" in result.answer.splitlines()[0]


def test_cancel_during_the_final_request():
    clock = VirtualClock()
    final = [Turn(chunks=[Chunk("The answer ", 5), Chunk("is ", 5), Chunk("forty-two.", 5)])]
    run = make_run(endless(lambda i: searches("same")), [read_tool()], clock=clock,
                   st=settings(research_no_progress_rounds=2), final=final, cancel=CancelToken(clock, at=7))
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.final_mode is FinalMode.CANCELLED and result.answer == ""
    assert 7 <= clock.now() <= 10  # stopped at the cancel or the first chunk after it
    assert run.answers == [] and result.messages[-1].role == "tool"
    assert run.events("answer")[0].mode == "cancelled"
    assert result.final_records[0].outcome == "cut"


def test_cancel_while_condensing_cancels_the_final_stage():
    clock = VirtualClock()
    run = make_run(endless(lambda i: searches(["a", "b", "b", "b"][i])),
                   [read_tool(responder=lambda a: doc(a["q"], 60))], clock=clock, context_window=4_000,
                   st=settings(research_no_progress_rounds=2, max_tokens=3_800),
                   workers=[Turn(chunks=[Chunk("condensed ", 5), Chunk("notes", 5)])], final=[FINAL_TEXT],
                   cancel=CancelToken(clock, at=3))
    result = run.run()
    assert run.events("final_context")[0].fits is False
    assert len(run.requests("worker")) == 1
    assert result.final_mode is FinalMode.CANCELLED and result.answer == ""
    assert run.requests("final") == [] and run.answers == []
