"""The tools-free final request, evidence condensing, the labelled fallback.

After a stop other than `answered` and `cancelled`, one final request with
its own output allowance (`chat.max_tokens`) and a 120-second deadline. If
the transcript does not fit the context window, what is left of the research
budget may condense the evidence first; if it still cannot fit (or the final
request fails), the answer is the labelled evidence under a line saying why
research stopped.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .types import FinalMode, Message, ModelRequest, StopReason

if TYPE_CHECKING:
    from .loop import Evidence, ResearchLoop

REASONS = {
    StopReason.TIME_BUDGET: "the research time budget ran out",
    StopReason.TOKEN_BUDGET: "the research token budget ran out",
    StopReason.NO_PROGRESS: "recent rounds found no new evidence",
    StopReason.CONTEXT_FULL: "the research context is full",
}
FINAL_INSTRUCTION = "Research has stopped because {why}. Answer the question now from the evidence above, without tools."
CONDENSE_SYSTEM = "Condense the evidence below into the facts that bear on the question. Keep sources."


def fallback_text(stop: StopReason, evidence: "list[Evidence]", why_final: str) -> str:
    lines = [f"Research stopped because {REASONS.get(stop, stop.value)}; {why_final}. "
             f"The evidence gathered ({len(evidence)} item(s)), each labelled with its source:"]
    for i, ev in enumerate(evidence, start=1):
        lines.append(f"\n[{i}] {ev.label}\n{ev.text}")
    return "\n".join(lines)


def _fits(loop: "ResearchLoop", messages: list[Message]) -> tuple[bool, int]:
    counter = loop.provider.counter
    estimate = counter.to_tokens(len(counter.prompt_units(messages, [])))
    return estimate + loop.settings.max_tokens <= loop.provider.context_window, estimate


def _condensed_messages(loop: "ResearchLoop", why: str) -> list[Message] | None:
    """Spend what is left of the research budget on worker requests that
    condense the evidence in chunks; None when nothing could be condensed."""
    window = loop.provider.context_window
    room = window - loop.config.research_max_output_tokens
    counter = loop.provider.counter
    chunks: list[list[str]] = [[]]
    for ev in loop.evidence:
        candidate = chunks[-1] + [f"[{ev.label}]\n{ev.text}"]
        msgs = [Message("system", CONDENSE_SYSTEM), Message("user", loop.question + "\n\n" + "\n\n".join(candidate))]
        if chunks[-1] and counter.to_tokens(len(counter.prompt_units(msgs, []))) > room:
            chunks.append([candidate[-1]])
        else:
            chunks[-1] = candidate
    chunks = [c for c in chunks if c]
    notes: list[str] = []
    for i, chunk in enumerate(chunks):
        msgs = [Message("system", CONDENSE_SYSTEM), Message("user", loop.question + "\n\n" + "\n\n".join(chunk))]
        reply = loop.request(msgs, [], role="worker", context_id=f"condense-{i}",
                             max_output=loop.config.research_max_output_tokens)
        loop.trace.emit("condense", chunk=i, items=len(chunk), ok=reply.stop is None and reply.error is None,
                        detail=reply.detail)
        if reply.stop is not None or reply.error is not None or not reply.text.strip():
            break
        notes.append(reply.text)
    if not notes:
        return None
    # Chunks that could not be condensed stay in as they are: the final
    # context never silently drops evidence (if it no longer fits, the
    # labelled fallback carries all of it).
    raw = [item for chunk in chunks[len(notes):] for item in chunk]
    return [Message("system", loop.config.system_prompt),
            Message("user", loop.question + "\n\nCondensed evidence:\n" + "\n\n".join(notes + raw)
                    + "\n\n" + FINAL_INSTRUCTION.format(why=why))]


def final_answer(loop: "ResearchLoop", stop: StopReason, detail: str, messages: list[Message]) -> tuple[str, FinalMode]:
    why = REASONS.get(stop, stop.value)
    final_msgs = messages + [Message("user", FINAL_INSTRUCTION.format(why=why))]
    fits, estimate = _fits(loop, final_msgs)
    if not fits:
        loop.trace.emit("final_context", fits=False, estimated_prompt=estimate, max_tokens=loop.settings.max_tokens,
                        context_window=loop.provider.context_window)
        condensed = _condensed_messages(loop, why) if loop.evidence else None
        if loop.cancel.cancelled:  # cancelled while condensing: stop, no fallback
            return "", FinalMode.CANCELLED
        if condensed is None:
            return _fallback(loop, stop, "the final context could not fit the model's context window")
        final_msgs = condensed
        fits, estimate = _fits(loop, final_msgs)
        if not fits:
            return _fallback(loop, stop, "even the condensed evidence could not fit the model's context window")
    if loop.cancel.cancelled:
        return "", FinalMode.CANCELLED
    from .loop import _output_units
    counter = loop.provider.counter
    deadline = loop.clock.now() + loop.config.final_deadline_sec
    req = ModelRequest(final_msgs, [], loop.settings.max_tokens, deadline, loop.cancel, context_id="final",
                       role="final")
    loop.trace.emit("final_request", estimated_prompt=estimate, max_tokens=loop.settings.max_tokens,
                    deadline=deadline)
    text, calls, usage, interrupted, error = loop._stream(req, deadline)
    units = _output_units(counter, usage, text, [])
    outcome = "error" if error else "cut" if interrupted else "ok"
    record = loop.ledger.record_final(counter=counter, estimated_prompt=estimate, max_output=loop.settings.max_tokens,
                                      output_units=units, outcome=outcome, usage=usage)
    loop.trace.emit("final_settled", **record.to_dict(), error=str(error) if error else None,
                    interrupted=interrupted.value if interrupted else None)
    if interrupted is StopReason.CANCELLED:
        return "", FinalMode.CANCELLED
    if error is not None:
        return _fallback(loop, stop, f"the final request failed ({error})")
    if not text.strip():
        why_not = "the final request ran past its deadline" if interrupted else "the final request returned no text"
        return _fallback(loop, stop, why_not)
    if interrupted is StopReason.TIME_BUDGET:
        text += (f"\n\n[answer cut short: the final request reached its "
                 f"{loop.config.final_deadline_sec:g}-second deadline]")
    return text, FinalMode.SYNTHESIZED


def _fallback(loop: "ResearchLoop", stop: StopReason, why_final: str) -> tuple[str, FinalMode]:
    text = fallback_text(stop, loop.evidence, why_final)
    loop.trace.emit("fallback", reason=why_final, evidence=len(loop.evidence))
    return text, FinalMode.FALLBACK
