"""Edges the spec leaves to judgement: Retry-After past the deadline, partial
condensing, a final answer cut by its own deadline."""
from __future__ import annotations

from imprint_core import Chunk, FinalMode, LoopConfig, ProviderError, ResearchSettings, StopReason, Turn

from helpers import doc, make_run, read_tool, searches


def test_retry_after_past_the_deadline_stops_on_time_without_resending() -> None:
    busy = ProviderError("http_429", "slow down", processed=False, retryable=True, retry_after=500)
    run = make_run([Turn(error=busy)], [read_tool()], st=ResearchSettings(research_timeout_sec=60))
    result = run.run()
    assert result.stop_reason is StopReason.TIME_BUDGET
    assert len(run.requests("coordinator")) == 1, "the request must not be re-sent, ignoring Retry-After"
    assert "500" in result.detail and "rate limited" in result.detail
    assert result.records[0].charged == 0  # never processed: refunded whole


def test_retry_after_within_the_deadline_is_honoured() -> None:
    busy = ProviderError("http_429", "slow down", processed=False, retryable=True, retry_after=5)
    run = make_run([Turn(error=busy), Turn(text="fine")], [read_tool()])
    result = run.run()
    assert result.stop_reason is StopReason.ANSWERED and run.clock.now() == 5
    assert [e.wait for e in run.events("request_retry")] == [5]


def test_partial_condensing_keeps_the_rest_of_the_evidence() -> None:
    # One round brings more evidence than the window holds, so condensing
    # needs two chunks; the budget pays for the first only. The final context
    # must not silently drop the second chunk's evidence: with it the context
    # does not fit, so the labelled fallback carries everything.
    texts = {f"t{i}": doc(f"piece {i}", words=150) for i in range(8)}
    cfg = LoopConfig(research_max_output_tokens=64)

    def run_with(budget: int):
        run = make_run([searches(*texts)], [read_tool(responder=texts)], config=cfg, context_window=2_000,
                       st=ResearchSettings(research_token_budget=budget), workers=[Turn(text="short notes")] * 5)
        return run, run.run()

    run, result = run_with(2_500)
    assert [(e.chunk, e.ok) for e in run.events("condense")] == [(0, True), (1, False)]
    assert result.final_mode is FinalMode.FALLBACK and not run.requests("final")
    assert all(t in result.answer for t in texts.values())
    # With budget for both chunks the condensed notes fit and the final answers.
    run, result = run_with(3_500)
    assert [e.ok for e in run.events("condense")] == [True, True]
    assert result.final_mode is FinalMode.SYNTHESIZED and len(run.requests("final")) == 1


def test_final_answer_cut_by_its_deadline_says_so() -> None:
    slow_final = Turn(chunks=[Chunk("Part one. ", 100.0), Chunk("Part two.", 100.0)])
    run = make_run([searches("a")] + [searches("a")] * 4, [read_tool()], final=[slow_final],
                   st=ResearchSettings(research_no_progress_rounds=4))
    result = run.run()
    assert result.stop_reason is StopReason.NO_PROGRESS
    assert result.final_mode is FinalMode.SYNTHESIZED
    assert result.answer.startswith("Part one.") and "Part two" not in result.answer
    assert "cut short" in result.answer and "120-second deadline" in result.answer
