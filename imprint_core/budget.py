"""The time budget and the token ledger: fixed limits apart from usage."""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Literal, Sequence

from .counting import ProcessedUnits
from .errors import TokenBudgetExceeded
from .types import Clock, TokenCounter, Usage

Policy = Literal["reserve", "prefix-refund"]
POLICIES: tuple[str, ...] = ("reserve", "prefix-refund")

MIN_OUTPUT_TOKENS = 1
"""The least output allowance a research request is configured with: a
request that may generate nothing cannot answer or call a tool."""


def tokens(name: str, value: object, least: int = 0) -> int:
    """`value` as a token count of at least `least`, else ValueError naming
    `name`: a negative allowance or reservation would make reservations and
    charges negative, and admit requests past the budget."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least} tokens, not {value!r}")
    return value


class TimeBudget:
    """A deadline counted from `start()` (the end of provider/model setup).

    Time spent between `pause()` and `resume()` (waiting for the user's answer,
    amendment 0159) moves the deadline back by the same amount."""

    def __init__(self, clock: Clock, timeout_sec: float):
        self.clock, self.timeout_sec = clock, float(timeout_sec)
        self._deadline: float | None = None
        self._paused_at: float | None = None
        self.paused_total = 0.0

    def start(self) -> None:
        self._deadline = self.clock.now() + self.timeout_sec

    @property
    def started(self) -> bool:
        return self._deadline is not None

    @property
    def deadline(self) -> float:
        if self._deadline is None:
            raise RuntimeError("time budget not started")
        if self._paused_at is not None:  # frozen: the pause so far does not count
            return self._deadline + (self.clock.now() - self._paused_at)
        return self._deadline

    def pause(self) -> None:
        if self._paused_at is None:
            self._paused_at = self.clock.now()

    def resume(self) -> None:
        if self._paused_at is not None:
            waited = self.clock.now() - self._paused_at
            if self._deadline is not None:
                self._deadline += waited
            self.paused_total += waited
            self._paused_at = None

    def remaining(self) -> float:
        return self.deadline - self.clock.now()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def passed(self) -> str:
        """The one wording of a passed research deadline."""
        return f"research deadline of {self.timeout_sec:g} s passed"


@dataclass
class Reservation:
    id: int
    role: str
    context_id: str
    estimated_prompt: int
    max_output: int

    def __post_init__(self) -> None:
        tokens("estimated_prompt", self.estimated_prompt)
        tokens("max_output", self.max_output)

    @property
    def tokens(self) -> int:
        return self.estimated_prompt + self.max_output


@dataclass
class RequestRecord:
    """One request's accounting: what we estimated, reserved, charged and
    refunded, and what the provider measured (None: not reported)."""
    id: int
    role: str
    context_id: str
    policy: str
    outcome: str                 # ok | cut | error | unsent
    estimated_prompt: int
    max_output: int
    reserved: int
    charged: int
    refunded: int
    charged_prompt: int = 0
    charged_output: int = 0
    prefix_reused: int = 0       # prompt tokens covered by the previous request's context
    output_tokens: int = 0       # our count of what was generated
    measured_prompt: int | None = None
    measured_cached: int | None = None
    measured_output: int | None = None
    counter: str | None = None             # the counter the estimate came from
    estimates: dict[str, int] | None = None  # every counting mode's figure, for the report
    reconciled: bool = False               # the provider's reported usage was taken into account
    measured_charge: int | None = None     # reserve: what the measurement would charge, beside the charge
    overrun: int = 0                       # prefix-refund: tokens charged past the reservation

    @property
    def balanced(self) -> bool:
        """reserved + overrun = charged + refunded, and neither refund nor overrun negative."""
        return (self.refunded >= 0 and self.overrun >= 0
                and self.reserved + self.overrun == self.charged + self.refunded)

    def to_dict(self) -> dict:
        # Flat fields of plain values: a shallow copy, without asdict's deepcopy
        # (once per request, on the loop's hot path).
        return dict(self.__dict__)


@dataclass
class LedgerTotals:
    budget: int
    reserved: int = 0
    charged: int = 0
    refunded: int = 0
    outstanding: int = 0
    requests: int = 0
    overrun: int = 0     # tokens charged past their reservations (reconciled prefix-refund)
    overruns: int = 0    # requests that overran their reservation

    @property
    def committed(self) -> int:
        return self.charged + self.outstanding

    @property
    def left(self) -> int:
        return self.budget - self.committed


@dataclass(frozen=True)
class TokenBudget:
    """The fixed token limit, checked against the usage it is handed: the
    one place a request is admitted or refused (reservations, section
    workers admitted in order, the refusal a request never sent meets)."""
    limit: int
    usage: LedgerTotals

    def admits(self, want: int) -> bool:
        return self.usage.committed + want <= self.limit

    def refusal(self, want: int) -> TokenBudgetExceeded:
        return TokenBudgetExceeded(limit=self.limit, used=self.usage.committed, requested=want)


def _measured(usage: Usage | None) -> dict[str, int | None]:
    """A record's provider-measured fields (None: not reported)."""
    return {"measured_prompt": usage.prompt_tokens if usage else None,
            "measured_cached": usage.cached_tokens if usage else None,
            "measured_output": usage.output_tokens if usage else None}


class TokenLedger:
    """Reservations before research requests, settlement after them.

    Thread-safe: section workers reserve and settle concurrently. `reserve`
    raises TokenBudgetExceeded (quoting limit and value) and reserves nothing
    when the request does not fit, so the request is never sent."""

    def __init__(self, budget: int, policy: Policy = "prefix-refund"):
        if policy not in POLICIES:
            raise ValueError(f"unknown accounting policy {policy!r}; allowed: {', '.join(POLICIES)}")
        self.budget, self.policy = int(budget), policy
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._outstanding: set[int] = set()   # ids of reservations not settled yet: one settlement each
        self._processed = ProcessedUnits()
        self.records: list[RequestRecord] = []
        self.final_records: list[RequestRecord] = []
        self.totals = LedgerTotals(budget=self.budget)
        self.limit = TokenBudget(self.budget, self.totals)

    def reserve(self, estimated_prompt: int, max_output: int, *, role: str = "coordinator",
                context_id: str = "coordinator") -> Reservation:
        want = tokens("estimated_prompt", estimated_prompt) + tokens("max_output", max_output)
        with self._lock:
            if not self.limit.admits(want):
                raise self.limit.refusal(want)
            r = Reservation(next(self._ids), role, context_id, estimated_prompt, max_output)
            self._outstanding.add(r.id)
            self.totals.outstanding += want
            self.totals.reserved += want
            return r

    def settle(self, r: Reservation, *, counter: TokenCounter, prompt_units: Sequence[int],
               output_units: Sequence[int], outcome: str, usage: Usage | None = None,
               sent: bool = True, reconcile: bool = False, estimates: dict[str, int] | None = None
               ) -> RequestRecord:
        """Charge by the policy; the rest of the reservation is refunded.

        prefix-refund: prompt tokens past the prefix this context already
        processed, plus the output actually generated; an unsent request is
        refunded whole. reserve: the reservation is the charge.

        `reconcile`: where the provider reported the prompt it processed
        (research-loop.md, "Token accounting"), a refund is never negative:
        - reserve: the charge stays the reservation; what the measurement
          would charge (measured prompt plus the whole output allowance) is
          recorded beside it as `measured_charge`;
        - prefix-refund: the charge follows the measurement (measured prompt
          less the cached tokens it reported, else less the prefix we counted
          as reused, plus the measured output); a charge above the
          reservation is recorded as an `overrun` past it, and counted in the
          totals. The budget then holds less than the reservations promised:
          the next reservation that does not fit stops research with
          token_budget. reserved + overrun = charged + refunded."""
        with self._lock:
            self._take(r)
            reused_units = self._processed.reused(r.context_id, prompt_units) if sent else 0
            reused = min(counter.to_tokens(reused_units), r.estimated_prompt)
            out_tokens = min(counter.to_tokens(len(output_units)), r.max_output)
            if sent:
                self._processed.saw(r.context_id, prompt_units, output_units)
            return self._charge(r, reused, out_tokens, outcome=outcome, usage=usage, sent=sent, reconcile=reconcile,
                                counter=counter.name, estimates=estimates)

    def settle_counted(self, r: Reservation, *, reused: int, output: int, counter: str,
                       outcome: str = "ok") -> RequestRecord:
        """`settle` for a request replayed from a recorded run, which has no
        prompt units to compare, only counts: `reused`, the prompt tokens the
        previous request of the context processed (its prompt and output),
        and `output`, the tokens this one generated. The policy's charge is
        `settle`'s, from the same clamped counts (at most the estimated
        prompt, at most the output allowance)."""
        reused = min(tokens("reused", reused), r.estimated_prompt)
        output = min(tokens("output", output), r.max_output)
        with self._lock:
            self._take(r)
            return self._charge(r, reused, output, outcome=outcome, usage=None, sent=True, reconcile=False,
                                counter=counter, estimates=None)

    def _take(self, r: Reservation) -> None:
        """`r` out of the outstanding reservations (under the lock), once."""
        self._outstanding.remove(r.id)   # KeyError: settled twice
        self.totals.outstanding -= r.tokens

    def _charge(self, r: Reservation, reused: int, out_tokens: int, *, outcome: str, usage: Usage | None,
                sent: bool, reconcile: bool, counter: str, estimates: dict[str, int] | None) -> RequestRecord:
        """The settlement of `r` under the policy (under the lock, `r` taken): the one place a
        charge is decided, for a live request (`settle`) and a replayed one (`settle_counted`)."""
        charged_prompt = max(r.estimated_prompt - reused, 0) if sent else 0
        charged_output = out_tokens if sent else 0
        reconciled = bool(reconcile and sent and usage is not None and usage.prompt_tokens is not None)
        measured_charge = None
        if self.policy == "reserve":    # the parts of the charge are those of the reservation
            charged = r.tokens
            if sent:
                charged_prompt, charged_output = r.estimated_prompt, r.max_output
            if reconciled:
                assert usage is not None and usage.prompt_tokens is not None
                measured_charge = usage.prompt_tokens + r.max_output
        elif reconciled:
            assert usage is not None and usage.prompt_tokens is not None
            cached = usage.cached_tokens if usage.cached_tokens is not None else reused
            charged_prompt = max(usage.prompt_tokens - min(cached, usage.prompt_tokens), 0)
            if usage.output_tokens is not None:
                charged_output = usage.output_tokens
            charged = charged_prompt + charged_output
        else:
            charged = min(charged_prompt + charged_output, r.tokens)
        overrun = max(charged - r.tokens, 0)
        rec = RequestRecord(
            id=r.id, role=r.role, context_id=r.context_id, policy=self.policy,
            outcome=outcome if sent else "unsent", estimated_prompt=r.estimated_prompt,
            max_output=r.max_output, reserved=r.tokens, charged=charged, refunded=r.tokens - charged + overrun,
            charged_prompt=charged_prompt, charged_output=charged_output, prefix_reused=reused,
            output_tokens=out_tokens, **_measured(usage), counter=counter, estimates=estimates, reconciled=reconciled,
            measured_charge=measured_charge, overrun=overrun)
        self.totals.charged += rec.charged
        self.totals.refunded += rec.refunded
        if overrun:
            self.totals.overrun += overrun
            self.totals.overruns += 1
        self.totals.requests += 1
        self.records.append(rec)
        return rec

    def record_final(self, *, counter: TokenCounter, estimated_prompt: int, max_output: int,
                     output_units: Sequence[int], outcome: str, usage: Usage | None,
                     estimates: dict[str, int] | None = None) -> RequestRecord:
        """The final request is not reserved against the research budget; its
        usage is recorded like any other request's."""
        tokens("estimated_prompt", estimated_prompt)
        tokens("max_output", max_output)
        with self._lock:
            out = min(counter.to_tokens(len(output_units)), max_output)
            rec = RequestRecord(
                id=next(self._ids), role="final", context_id="final", policy=self.policy, outcome=outcome,
                estimated_prompt=estimated_prompt, max_output=max_output, reserved=0, charged=0, refunded=0,
                output_tokens=out, **_measured(usage), counter=counter.name, estimates=estimates)
            self.final_records.append(rec)
            return rec

    def forget_context(self, context_id: str) -> None:
        with self._lock:
            self._processed.forget(context_id)
