"""Messages, tool calls, provider events, usage, stop reasons; the Provider,
Tool, Clock and TokenCounter protocols, and the counting modes a provider
declares (`CountingModes`).

Everything the loop exchanges with the outside world is defined here, so a
provider or tool author reads one short module.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal, Protocol, Sequence, runtime_checkable


class StopReason(str, enum.Enum):
    ANSWERED = "answered"
    TIME_BUDGET = "time_budget"
    TOKEN_BUDGET = "token_budget"
    NO_PROGRESS = "no_progress"
    CONTEXT_FULL = "context_full"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Stop:
    """Why research ends: the reason, and the words that say so (the trace's
    `stop` line and the result's detail). One value wherever a stop travels:
    a model request's `Reply`, a tool's `ToolOutput`, the loop's helpers."""
    reason: StopReason
    detail: str = ""


class FinalMode(str, enum.Enum):
    ANSWERED = "answered"        # the model answered during research
    SYNTHESIZED = "synthesized"  # the tools-free final request answered
    FALLBACK = "fallback"        # labelled evidence, no model answer
    CANCELLED = "cancelled"


ToolKind = Literal["read", "write", "ask"]
ResultStatus = Literal["ok", "empty", "error", "not_executed"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model produced arguments that are not a JSON object; the
    # executor turns it into an error result instead of calling the tool.
    invalid_arguments: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid_arguments is not None:
            d["invalid_arguments"] = self.invalid_arguments
        return d


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool."""
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    kind: ToolKind = "read"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class ToolOutput:
    """What a tool callable returns. `segments` are the evidence units (one
    search hit each); when absent, novelty splits `text` into paragraphs."""
    text: str
    segments: tuple[str, ...] | None = None
    status: Literal["ok", "empty", "error"] | None = None  # None: derived from text
    # A tool that spends the research budgets itself (section workers) and met
    # one: research ends after this batch, with this reason and detail.
    stop: Stop | None = None


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    kind: ToolKind
    status: ResultStatus
    text: str
    segments: tuple[str, ...] | None = None
    started_at: float | None = None
    finished_at: float | None = None
    after_deadline: bool = False
    stop: Stop | None = None   # the tool's own stop (ToolOutput.stop)


@dataclass
class Evidence:
    """The text a successful read returned, with where it came from (the
    loop keeps it; the final request answers from it)."""
    round: int
    tool: str
    arguments: dict[str, Any]
    text: str

    @property
    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.tool}({args}), round {self.round}"


@dataclass(frozen=True)
class Usage:
    """Provider-measured usage; None means "not reported", never zero.
    As in OpenAI's API, `prompt_tokens` counts the whole prompt and
    `cached_tokens` the part of it served from a prefix cache."""
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    # Units the provider actually appended to its context for this reply
    # (exact output ids for a local model); None: the counter derives them.
    output_units: tuple[int, ...] | None = None


# ---- provider events -------------------------------------------------------
@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True)
class UsageEvent:
    usage: Usage


@dataclass(frozen=True)
class ErrorEvent:
    error: Exception  # a ProviderError


@dataclass(frozen=True)
class Done:
    pass


ProviderEvent = TextDelta | ToolCallEvent | UsageEvent | ErrorEvent | Done


# ---- protocols ---------------------------------------------------------------
@runtime_checkable
class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class CancelToken:
    """Set once, observed everywhere. `at` cancels when the clock reaches it."""

    def __init__(self, clock: Clock | None = None, at: float | None = None):
        self._set = False
        self._clock = clock
        self._at = at

    def cancel(self) -> None:
        self._set = True

    @property
    def due_at(self) -> float | None:
        """The clock time at which this token cancels itself, if any."""
        return self._at

    @property
    def cancelled(self) -> bool:
        if not self._set and self._at is not None and self._clock is not None:
            if self._clock.now() >= self._at:
                self._set = True
        return self._set


@runtime_checkable
class TokenCounter(Protocol):
    """Counts a formatted prompt as a sequence of units (bytes or token ids).

    `prompt_units(messages + [reply], tools)` must start with
    `prompt_units(messages, tools) + output_units(reply)` up to the chat
    template's own trailer; the prefix-refund policy relies on it.
    """
    name: str
    # Whether a count is the server's own (its chat template and tokenizer).
    exact: bool = False

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Sequence[int]: ...
    def output_units(self, reply: Message) -> Sequence[int]: ...
    def to_tokens(self, units: int) -> int: ...

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[Sequence[int], int]:
        """(units, tokens) of a prompt. A counter whose count is not a
        function of the units alone (the calibrated fit's per-request
        overhead), or that hands out its units cheaper than `prompt_units`
        (the byte estimate's growing buffer), overrides it."""
        units = self.prompt_units(messages, tools)
        return units, self.to_tokens(len(units))


class CalibratedTokenCounter(TokenCounter, Protocol):
    """A counter that learns from the prompt tokens a provider measured."""
    def observe(self, messages: Sequence[Message], tools: Sequence[ToolSpec], measured_prompt: int) -> None: ...


@dataclass(frozen=True)
class CountingModes:
    """The counting modes a provider offers `chat.token_counting` beside its
    own `counter` (the byte estimate): the server's template and tokenizer
    (None: none), the calibrated estimate (None: none), and whether it
    reports usage (the ledger then reconciles with it)."""
    tokenizer: TokenCounter | None = None
    calibrated: CalibratedTokenCounter | None = None
    reports_usage: bool = False


@dataclass
class ModelRequest:
    messages: list[Message]
    tools: list[ToolSpec]
    max_output_tokens: int
    deadline: float           # on the loop's clock
    cancel: CancelToken
    context_id: str = "coordinator"   # one model context: coordinator, worker-N, final
    role: Literal["coordinator", "worker", "final"] = "coordinator"


@runtime_checkable
class Provider(Protocol):
    """One method: turn a request into a stream of events.

    Errors are raised as (or yielded in an ErrorEvent holding) a ProviderError;
    budgets, retries and usage accounting are the loop's business.
    """
    name: str
    context_window: int
    counter: TokenCounter
    # None: the provider counts for itself (a local model's tokenizer, the
    # stub) and `chat.token_counting` does not apply; else what it offers.
    counting_modes: CountingModes | None = None

    def generate(self, request: ModelRequest) -> Iterator[ProviderEvent]: ...


@runtime_checkable
class Tool(Protocol):
    """A tool: its spec, whether it blocks, and a call."""
    spec: ToolSpec
    blocking: bool

    def __call__(self, arguments: dict[str, Any], ctx: "ToolContext") -> "ToolOutput | str": ...


ToolFunction = Callable[[dict[str, Any], "ToolContext"], "ToolOutput | str"]


class ToolContext:
    """Handed to each tool call: the clock, the deadline and cancellation.

    `work(seconds)` simulates (or paces) work: blocking tools and writes run to
    completion even past the deadline; a background read is abandoned at the
    deadline or on cancellation, which is how the record lets non-blocking
    reads stop while mutations are always awaited. An ask's wait for the
    user ends on cancellation ("cancellation stops everything at once").
    """

    def __init__(self, clock: Clock, deadline: float, cancel: CancelToken, *, blocking: bool, kind: ToolKind,
                 round: int = 0):
        self.clock = clock
        self.deadline = deadline
        self.cancel = cancel
        self.blocking = blocking
        self.kind = kind
        self.round = round   # the research round the call belongs to

    def work(self, seconds: float) -> None:
        from .errors import ToolAbandoned
        if seconds <= 0:
            return
        if self.kind == "write" or (self.blocking and self.kind != "ask"):
            # Allowed to return: a blocking call cannot be interrupted and a
            # mutation is never abandoned.
            self.clock.sleep(seconds)
            return
        # A background read stops at the deadline or on cancellation; an ask,
        # blocking or not, waits for the user, not for work, so cancellation
        # ends the wait (its wait is not research time: the deadline does not).
        deadline = float("inf") if self.kind == "ask" else self.deadline
        end = self.clock.now() + seconds
        while True:
            now = self.clock.now()
            if self.cancel.cancelled:
                raise ToolAbandoned("cancelled while running")
            if now >= deadline:
                raise ToolAbandoned("research deadline passed while running")
            if now >= end:
                return
            # Stop exactly at the next point where something can change; the
            # 0.25 s cap keeps a real clock responsive to cancel() from outside.
            stop = min(end, deadline, self.cancel.due_at or end, now + 0.25)
            self.clock.sleep(max(stop - now, 0.0))
