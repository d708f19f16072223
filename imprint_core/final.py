"""The tools-free final request, evidence condensing, the labelled fallback.

After a stop other than `answered` and `cancelled`, one final request with
its own output allowance (`chat.max_tokens`) and a 120-second deadline. If
the transcript does not fit the context window, what is left of the research
budget may condense the evidence first; if it still cannot fit (or the final
request fails), the answer is the labelled evidence under a line saying why
research stopped.

Everything here works through a `ModelCaller`, the plan and the transcript it
is handed, never the loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .budget import MIN_OUTPUT_TOKENS, tokens
from .events import Condensed, Fallback, FinalFit
from .requests import ModelCaller
from .trace import TraceWriter
from .types import Evidence, FinalMode, Message, StopReason

REASONS = {
    StopReason.TIME_BUDGET: "the research time budget ran out",
    StopReason.TOKEN_BUDGET: "the research token budget ran out",
    StopReason.NO_PROGRESS: "recent rounds found no new evidence",
    StopReason.CONTEXT_FULL: "the research context is full",
}
FINAL_INSTRUCTION = "Research has stopped because {why}. Answer the question now from the evidence above, without tools."
CONDENSE_SYSTEM = "Condense the evidence below into the facts that bear on the question. Keep sources."


@dataclass(frozen=True)
class FinalPlan:
    """What the final step needs besides the caller and the transcript."""
    question: str
    evidence: Sequence[Evidence]
    system_prompt: str
    max_tokens: int               # chat.max_tokens
    deadline_sec: float           # the final request's own deadline
    condense_max_output: int      # output allowance of a condensing request
    round: int = 0                # the round research stopped in (condensing requests are traced in it)
    context_window: int = 0       # the provider's, in tokens: what the final context must fit

    def __post_init__(self) -> None:
        tokens("max_tokens", self.max_tokens, MIN_OUTPUT_TOKENS)
        tokens("condense_max_output", self.condense_max_output, MIN_OUTPUT_TOKENS)


def final_answer(caller: ModelCaller, plan: FinalPlan, stop: StopReason, messages: list[Message]
                 ) -> tuple[str, FinalMode]:
    """The answer after research stopped with `stop`, and how it was made. The
    trace and the cancel token are the caller's."""
    trace, cancel = caller.trace, caller.cancel
    why = REASONS.get(stop, stop.value)
    final_msgs = messages + [Message("user", FINAL_INSTRUCTION.format(why=why))]
    fits, estimate = _fits(caller, plan, final_msgs)
    if not fits:
        trace.write(FinalFit(fits=False, estimated_prompt=estimate, max_tokens=plan.max_tokens,
                             context_window=plan.context_window))
        condensed = _condensed_messages(caller, plan, why, trace) if plan.evidence else None
        if cancel.cancelled:  # cancelled while condensing: stop, no fallback
            return "", FinalMode.CANCELLED
        if condensed is None:
            return _fallback(trace, plan, stop, "the final context could not fit the model's context window")
        final_msgs = condensed
        fits, estimate = _fits(caller, plan, final_msgs)
        if not fits:
            return _fallback(trace, plan, stop, "even the condensed evidence could not fit the model's context window")
    reply = caller.final(final_msgs, max_tokens=plan.max_tokens, deadline_sec=plan.deadline_sec, estimate=estimate)
    ended = reply.stop.reason if reply.stop is not None else None
    if ended is StopReason.CANCELLED:
        return "", FinalMode.CANCELLED
    if reply.error is not None:
        return _fallback(trace, plan, stop, f"the final request failed ({reply.error})")
    if not reply.text.strip():
        why_not = "the final request ran past its deadline" if reply.stop else "the final request returned no text"
        return _fallback(trace, plan, stop, why_not)
    if ended is StopReason.TIME_BUDGET:
        return (reply.text + f"\n\n[answer cut short: the final request reached its "
                             f"{plan.deadline_sec:g}-second deadline]"), FinalMode.SYNTHESIZED
    return reply.text, FinalMode.SYNTHESIZED


def _fits(caller: ModelCaller, plan: FinalPlan, messages: list[Message]) -> tuple[bool, int]:
    estimate = caller.estimate(messages)
    return estimate + plan.max_tokens <= plan.context_window, estimate


def _condense_prompt(plan: FinalPlan, items: list[str]) -> list[Message]:
    return [Message("system", CONDENSE_SYSTEM), Message("user", plan.question + "\n\n" + "\n\n".join(items))]


def _condensed_messages(caller: ModelCaller, plan: FinalPlan, why: str, trace: TraceWriter) -> list[Message] | None:
    """Spend what is left of the research budget on worker requests that
    condense the evidence in chunks; None when nothing could be condensed."""
    room = plan.context_window - plan.condense_max_output
    chunks: list[list[str]] = [[]]
    for ev in plan.evidence:
        candidate = chunks[-1] + [f"[{ev.label}]\n{ev.text}"]
        if chunks[-1] and caller.estimate(_condense_prompt(plan, candidate)) > room:
            chunks.append([candidate[-1]])
        else:
            chunks[-1] = candidate
    chunks = [c for c in chunks if c]
    notes: list[str] = []
    for i, chunk in enumerate(chunks):
        reply = caller.research(_condense_prompt(plan, chunk), [], role="worker", context_id=f"condense-{i}",
                                max_output=plan.condense_max_output, round=plan.round)
        trace.write(Condensed(chunk=i, items=len(chunk), ok=not reply.failed, detail=reply.detail))
        if reply.failed or not reply.text.strip():
            break
        notes.append(reply.text)
    if not notes:
        return None
    # Chunks that could not be condensed stay in as they are: the final
    # context never silently drops evidence (if it no longer fits, the
    # labelled fallback carries all of it).
    raw = [item for chunk in chunks[len(notes):] for item in chunk]
    return [Message("system", plan.system_prompt),
            Message("user", plan.question + "\n\nCondensed evidence:\n" + "\n\n".join(notes + raw)
                    + "\n\n" + FINAL_INSTRUCTION.format(why=why))]


def _fallback(trace: TraceWriter, plan: FinalPlan, stop: StopReason, why_final: str) -> tuple[str, FinalMode]:
    """The labelled evidence under a line saying why research stopped."""
    trace.write(Fallback(reason=why_final, evidence=len(plan.evidence)))
    lines = [f"Research stopped because {REASONS.get(stop, stop.value)}; {why_final}. "
             f"The evidence gathered ({len(plan.evidence)} item(s)), each labelled with its source:"]
    lines += [f"\n[{i}] {ev.label}\n{ev.text}" for i, ev in enumerate(plan.evidence, start=1)]
    return "\n".join(lines), FinalMode.FALLBACK
