"""Section workers: one tool call that researches several sections at once.

The coordinator may delegate sections of the question; each becomes one
worker request through the same `ModelCaller` (the same ledger, deadline and
cancellation). The tool returns the notes, and the stop a worker met, as its
output: the loop ends research after the batch that carries one.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .budget import MIN_OUTPUT_TOKENS, tokens
from .requests import ModelCaller, Pending, Reply
from .streams import Collected
from .types import Message, Stop, StopReason, ToolContext, ToolOutput, ToolSpec

WORKER_SYSTEM = "You research one section of a question. Reply with concise notes of the facts you find."
WORKER_TOOL = ToolSpec(
    "delegate_sections", "Research several sections of the question concurrently; returns notes per section.",
    {"type": "object", "properties": {"sections": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
     "required": ["sections"]}, kind="read")


class SectionWorkers:
    """The `delegate_sections` tool of one research run (one question)."""
    spec = WORKER_TOOL
    blocking = True

    def __init__(self, caller: ModelCaller, question: str, *, max_output: int, max_workers: int):
        self.caller, self.question = caller, question
        self.max_output, self.max_workers = tokens("max_output", max_output, MIN_OUTPUT_TOKENS), max_workers
        self._fanouts: dict[int, int] = {}

    def __call__(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        sections = [str(s) for s in arguments["sections"]]   # WORKER_TOOL's schema requires it; the executor checks
        # Every worker request is a fresh model context: a second fan-out in
        # the same round must not be charged as if it continued the first.
        fanout = self._fanouts[ctx.round] = self._fanouts.get(ctx.round, 0) + 1
        base = f"w{ctx.round}" if fanout == 1 else f"w{ctx.round}.{fanout}"
        prompts = [[Message("system", WORKER_SYSTEM), Message("user", f"Question: {self.question}\nSection: {s}")]
                   for s in sections]
        admitted = self._admitted(prompts)
        stops: dict[int, Stop] = {}   # by section: the first section's stop is reported
        # Three phases, so that the ledger and the trace never depend on thread
        # timing: every admitted section is reserved in order, the requests
        # are sent at once, and they are settled in order (a retry, rare, then
        # runs on its own).
        begun = [self.caller.begin(prompts[i], [], role="worker", context_id=f"{base}-{i}",
                                   max_output=self.max_output, round=ctx.round) for i in range(admitted)]
        sent = [i for i, b in enumerate(begun) if isinstance(b, Pending)]

        def send(i: int) -> tuple[Collected, float]:
            got = self.caller.send(begun[i])  # type: ignore[arg-type]
            return got, self.caller.clock.now()

        with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(sent) or 1))) as pool:
            responses = dict(zip(sent, pool.map(send, sent)))
        notes = []
        for i, section in enumerate(sections):
            if i >= admitted:
                notes.append(f"[section {section!r} not researched: the token budget cannot reserve it]")
                continue
            b = begun[i]
            reply = b if isinstance(b, Reply) else self.caller.finish(b, *responses[i])
            if reply is None:
                reply = self.caller.research(prompts[i], [], role="worker", context_id=f"{base}-{i}",
                                             max_output=self.max_output, round=ctx.round,
                                             attempt=b.attempt + 1)  # type: ignore[union-attr]
            self.caller.ledger.forget_context(f"{base}-{i}")  # never continued: keep memory flat
            if reply.stop is not None:
                stops[i] = Stop(reply.stop.reason, f"section worker: {reply.detail}")
            notes.append(f"[section {section!r} not researched: {reply.detail}]" if reply.failed else reply.text)
        if admitted < len(sections) and not stops:
            refused = self.caller.reservation_refused(prompts[admitted], self.max_output, role="worker",
                                                      context_id=f"{base}-{admitted}")
            stops[admitted] = Stop(StopReason.TOKEN_BUDGET, f"section worker: {refused}")
        good = [n for n in notes if not n.startswith("[section ")]
        return ToolOutput("\n\n".join(notes), segments=tuple(good), status="ok" if good else "error",
                          stop=stops[min(stops)] if stops else None)

    def _admitted(self, prompts: list[list[Message]]) -> int:
        """How many sections, taken in order, the token budget can reserve
        before any starts, so which ones run never depends on thread timing;
        the first that cannot be reserved ends research with token_budget."""
        wanted = 0
        for i, msgs in enumerate(prompts):
            wanted += self.caller.estimate(msgs) + self.max_output
            if not self.caller.ledger.limit.admits(wanted):
                return i
        return len(prompts)
