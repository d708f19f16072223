"""One model call, in one place: count, reserve, stream, settle, retry.

`ModelCaller.research` is every research request (coordinator turns and
section workers); `ModelCaller.final` is the tools-free final request. Both
return a typed `Reply` and never raise for a provider failure. A provider's
event stream becomes one `Collected` in `streams.collect`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .budget import RequestRecord, Reservation, TimeBudget, TokenLedger
from .counting import Counting, count_prompt, output_units
from .errors import CountingUnavailable, ProviderError, TokenBudgetExceeded
from .events import (BudgetExhausted, CountFallback, FinalRequest, FinalSettled, RequestReserved, RequestRetry,
                     RequestSettled)
from .streams import Collected, collect
from .trace import TraceWriter
from .types import CancelToken, Clock, Message, ModelRequest, Provider, Stop, StopReason, TokenCounter, ToolCall, ToolSpec


@dataclass
class Reply:
    """A model request's outcome: content, or why there is none (`stop`:
    research must end; `error`: the request failed for good)."""
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    stop: Stop | None = None
    error: ProviderError | None = None
    record: RequestRecord | None = None

    @property
    def failed(self) -> bool:
        return self.stop is not None or self.error is not None

    @property
    def detail(self) -> str:
        """What ended the request: the stop's words, else the error's."""
        return self.stop.detail if self.stop is not None else str(self.error) if self.error is not None else ""


@dataclass
class Pending:
    """A research request reserved and not yet settled (`ModelCaller.begin`)."""
    messages: list[Message]
    tools: list[ToolSpec]
    role: str
    context_id: str
    max_output: int
    round: int
    attempt: int
    counter: TokenCounter
    units: Sequence[int]
    estimate: int
    reservation: Reservation
    started: float = 0.0


class ModelCaller:
    """Research and final requests against one provider, one ledger and one
    time budget. Budgets, usage and retries live here, not in providers."""

    def __init__(self, provider: Provider, *, ledger: TokenLedger, time: TimeBudget, clock: Clock,
                 cancel: CancelToken, trace: TraceWriter, max_retries: int = 2, retry_backoff_sec: float = 1.0,
                 counting: Counting | None = None):
        self.provider, self.ledger, self.time, self.clock = provider, ledger, time, clock
        self.cancel, self.trace = cancel, trace
        self.max_retries, self.retry_backoff_sec = max_retries, retry_backoff_sec
        self.counting = counting or Counting("native", "native", provider.counter)

    @property
    def counter(self) -> TokenCounter:
        return self.counting.counter

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, role: str = "coordinator",
              context_id: str = "coordinator") -> tuple[TokenCounter, Sequence[int], int]:
        """(counter used, units, tokens) of a prompt. A counter that cannot
        count it hands over to the mode's fallback, then to the provider's
        own byte estimate, each hand-over traced as `count_fallback`."""
        chain = [c for c in (self.counting.counter, self.counting.fallback, self.provider.counter) if c is not None]
        wanted = chain[0]
        for i, counter in enumerate(chain):
            try:
                units, tokens = count_prompt(counter, messages, tools)
            except CountingUnavailable as exc:
                if i == len(chain) - 1:
                    raise
                self.trace.write(CountFallback(role=role, context_id=context_id, wanted=wanted.name,
                                               used=chain[i + 1].name, reason=str(exc)))
                continue
            return counter, units, tokens
        raise AssertionError("unreachable")

    def estimate(self, messages: list[Message], tools: Sequence[ToolSpec] = ()) -> int:
        return self.count(messages, list(tools))[2]

    def research(self, messages: list[Message], tools: list[ToolSpec], *, role: str, context_id: str,
                 max_output: int, round: int, attempt: int = 0) -> Reply:
        """Time and cancel checks, count, context check, reservation,
        streamed response, settlement, retries."""
        while True:
            begun = self.begin(messages, tools, role=role, context_id=context_id, max_output=max_output,
                               round=round, attempt=attempt)
            if isinstance(begun, Reply):
                return begun
            reply = self.finish(begun, self.send(begun))
            if reply is not None:
                return reply
            attempt += 1

    def begin(self, messages: list[Message], tools: list[ToolSpec], *, role: str, context_id: str,
              max_output: int, round: int, attempt: int = 0) -> "Pending | Reply":
        """A request up to its reservation (traced), or the Reply that ends it
        first. Section workers begin theirs in order, so that the ledger and
        the trace never depend on thread timing."""
        if self.cancel.cancelled:
            return Reply(stop=Stop(StopReason.CANCELLED, "cancelled before a model request"))
        if self.time.expired():
            return Reply(stop=Stop(StopReason.TIME_BUDGET, self.time.passed()))
        counter, units, estimate = self.count(messages, tools, role=role, context_id=context_id)
        window = self.provider.context_window
        if estimate + max_output > window:
            return Reply(stop=Stop(StopReason.CONTEXT_FULL,
                                   f"prompt of {estimate} tokens plus {max_output} output tokens exceeds the "
                                   f"context window of {window}"))
        try:
            reservation = self.ledger.reserve(estimate, max_output, role=role, context_id=context_id)
        except TokenBudgetExceeded as exc:
            self._exhausted(exc, role, context_id)
            return Reply(stop=Stop(StopReason.TOKEN_BUDGET, str(exc)))
        self.trace.write(RequestReserved(id=reservation.id, role=role, context_id=context_id, attempt=attempt,
                                         estimated_prompt=estimate, max_output=max_output,
                                         reserved=reservation.tokens, budget_left=self.ledger.totals.left))
        return Pending(messages, tools, role, context_id, max_output, round, attempt, counter, units, estimate,
                       reservation)

    def send(self, p: "Pending") -> Collected:
        """The streamed response of a begun request (thread-safe: section
        workers send theirs at once)."""
        p.started = self.clock.now()
        deadline = self.time.deadline
        return self._stream(ModelRequest(list(p.messages), list(p.tools), p.max_output, deadline, self.cancel,
                                         context_id=p.context_id, role=p.role), deadline)  # type: ignore[arg-type]

    def finish(self, p: "Pending", got: Collected, ended: float | None = None) -> Reply | None:
        """Settle a sent request (traced) into its Reply; None when it is to be
        sent again (the retry's wait done). `ended`: when its response ended,
        where it is settled later (section workers settle in order)."""
        messages, tools, counter, role = p.messages, p.tools, p.counter, p.role
        error, interrupted = got.error, got.interrupted
        record = self.ledger.settle(p.reservation, counter=counter, prompt_units=p.units,
                                    output_units=output_units(counter, got.usage, got.text, got.calls),
                                    outcome="error" if error else "cut" if interrupted else "ok",
                                    usage=got.usage, sent=error is None or error.processed,
                                    reconcile=self.counting.reconcile,
                                    estimates=self.counting.side_counts(messages, tools, counter, p.estimate))
        self.counting.learn(messages, tools, got.usage)
        self.trace.write(RequestSettled(record=record,
                                        duration=(self.clock.now() if ended is None else ended) - p.started,
                                        error=str(error) if error else None,
                                        interrupted=interrupted.value if interrupted else None, round=p.round))
        if interrupted is not None:
            what = "cancelled" if interrupted is StopReason.CANCELLED else self.time.passed()
            return Reply(text=got.text, stop=Stop(interrupted, f"{what} during a {role} response"), record=record)
        if error is None:
            return Reply(text=got.text, calls=list(got.calls), record=record)
        if (error.retryable and error.retry_after is not None and p.attempt < self.max_retries
                and self.clock.now() + error.retry_after >= self.time.deadline):
            # Honouring the server's wait would pass the deadline; sending
            # again at once would ignore it. Research time is up.
            return Reply(stop=Stop(StopReason.TIME_BUDGET,
                                   f"rate limited: the provider asked to wait {error.retry_after:g} s with "
                                   f"{max(self.time.remaining(), 0):.3g} s of research time left"), record=record)
        wait = self._retry_wait(error, p.attempt)
        if wait is None:
            return Reply(text=got.text, error=error, record=record)
        self.trace.write(RequestRetry(id=p.reservation.id, attempt=p.attempt + 1, wait=wait, error=str(error)))
        if not self._wait(wait):
            return Reply(stop=Stop(StopReason.CANCELLED, "cancelled while waiting to retry"), record=record)
        return None

    def _exhausted(self, exc: TokenBudgetExceeded, role: str, context_id: str) -> None:
        self.trace.write(BudgetExhausted(role=role, context_id=context_id, limit=exc.limit, used=exc.used,
                                         requested=exc.requested, message=str(exc)))

    def reservation_refused(self, messages: list[Message], max_output: int, *, role: str, context_id: str) -> str:
        """The budget error a request that was never tried would have met,
        traced as such (section workers admitted in order)."""
        exc = self.ledger.limit.refusal(self.estimate(messages) + max_output)
        self._exhausted(exc, role, context_id)
        return str(exc)

    def _wait(self, seconds: float) -> bool:
        """Wait before a retry; False as soon as the run is cancelled. Waits
        in short steps so a cancel() from another thread is seen promptly."""
        end = self.clock.now() + seconds
        while True:
            if self.cancel.cancelled:
                return False
            now = self.clock.now()
            if now >= end:
                return True
            self.clock.sleep(min(end, self.cancel.due_at or end, now + 0.25) - now)

    def _retry_wait(self, error: ProviderError, attempt: int) -> float | None:
        if not error.retryable or attempt >= self.max_retries:
            return None
        wait = error.retry_after if error.retry_after is not None else self.retry_backoff_sec * 2 ** attempt
        return wait if self.clock.now() + wait < self.time.deadline else None

    def final(self, messages: list[Message], *, max_tokens: int, deadline_sec: float,
              estimate: int | None = None) -> Reply:
        """The tools-free final request: not reserved against the research
        budget, recorded like any other; its own deadline."""
        if self.cancel.cancelled:
            return Reply(stop=Stop(StopReason.CANCELLED, "cancelled before the final request"))
        counter, _, counted = self.count(messages, [], role="final", context_id="final")
        estimate = counted if estimate is None else estimate
        deadline = self.clock.now() + deadline_sec
        self.trace.write(FinalRequest(estimated_prompt=estimate, max_tokens=max_tokens, deadline=deadline))
        got = self._stream(ModelRequest(messages, [], max_tokens, deadline, self.cancel, context_id="final",
                                        role="final"), deadline)
        error, interrupted = got.error, got.interrupted
        record = self.ledger.record_final(counter=counter, estimated_prompt=estimate, max_output=max_tokens,
                                          output_units=output_units(counter, got.usage, got.text, ()),
                                          outcome="error" if error else "cut" if interrupted else "ok",
                                          usage=got.usage,
                                          estimates=self.counting.side_counts(messages, [], counter, counted))
        self.counting.learn(messages, [], got.usage)
        self.trace.write(FinalSettled(record=record, error=str(error) if error else None,
                                      interrupted=interrupted.value if interrupted else None))
        return Reply(text=got.text, stop=Stop(interrupted, str(error) if error else "") if interrupted else None, error=error,
                     record=record)

    def _stream(self, req: ModelRequest, deadline: float) -> Collected:
        try:
            events = self.provider.generate(req)
        except ProviderError as exc:
            return Collected(error=exc)
        return collect(events, clock=self.clock, deadline=deadline, cancel=self.cancel)
