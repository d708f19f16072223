"""The scripted stub provider: turns from a list or a callable, simulated
time on the injected clock, reported usage, and a loud failure when the
script runs out."""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, Union

from ..counting import ByteEstimateCounter, RegexTokenCounter
from ..errors import ProviderError, ScriptExhausted
from ..types import (Clock, CountingModes, Done, Message, ModelRequest, ProviderEvent, TextDelta, TokenCounter,
                     ToolCall, ToolCallEvent, Usage, UsageEvent)


@dataclass(frozen=True)
class Chunk:
    text: str
    delay: float = 0.0   # simulated seconds before this chunk arrives


@dataclass
class Turn:
    """One scripted reply: text (an answer when there are no tool calls),
    tool calls, an optional error raised after the chunks (a stream cut off or
    a failed request), latency before the first chunk (prefill), and usage:
    "auto" reports what the provider's tokenizer measured, None reports none."""
    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    chunks: Sequence[Chunk] | None = None
    latency: float = 0.0
    error: ProviderError | None = None
    usage: Union[Usage, str, None] = "auto"

    def stream(self) -> list[Chunk]:
        if self.chunks is not None:
            return list(self.chunks)
        return [Chunk(self.text)] if self.text else []


_call_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call for a script: `call("search", query="x")`."""
    return ToolCall(id=f"call_{next(_call_ids)}", name=name, arguments=arguments)


TurnSource = Union[Sequence[Union[Turn, str]], Callable[[ModelRequest, int], Union[Turn, str]], None]


class ScriptedProvider:
    """Replies from a script, one turn per request of each role.

    `turns` serves coordinator requests, `workers` section-worker requests and
    `final` the final request; each is a list (used in order) or a callable
    `(request, index) -> Turn | str`. Worker and final requests without a
    script get a deterministic default reply; coordinator requests never do:
    running out raises ScriptExhausted naming the turn."""

    # Counts for itself (the counter it is given): `chat.token_counting` does not apply.
    counting_modes: CountingModes | None = None

    def __init__(self, turns: TurnSource, *, clock: Clock, workers: TurnSource = None, final: TurnSource = None,
                 context_window: int = 8192, counter: TokenCounter | None = None, name: str = "stub",
                 measure: TokenCounter | None = None):
        self.name = name
        self.clock = clock
        self.context_window = context_window
        self.counter = counter or ByteEstimateCounter()
        # What the "server" measures: by default a tokenizer-like count that
        # differs from the byte estimate, as a real provider's would.
        self.measure = measure or (self.counter if isinstance(self.counter, RegexTokenCounter) else RegexTokenCounter())
        self._sources = {"coordinator": turns, "worker": workers, "final": final}
        self._used = {"coordinator": 0, "worker": 0, "final": 0}
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []

    def _next_turn(self, request: ModelRequest) -> Turn:
        role = request.role
        with self._lock:
            index = self._used[role]
            self._used[role] += 1
            self.requests.append(request)
        source = self._sources[role]
        if source is None:
            if role == "coordinator":
                raise ScriptExhausted("scripted provider has no coordinator script")
            return Turn(text=_default_reply(request))
        if callable(source):
            turn = source(request, index)
        else:
            if index >= len(source):
                if role != "coordinator":
                    return Turn(text=_default_reply(request))
                raise ScriptExhausted(
                    f"scripted provider ran out: coordinator request {index + 1} asked for turn {index + 1}, "
                    f"but the script has {len(source)} turn(s)")
            turn = source[index]
        if turn is None:
            raise ScriptExhausted(f"scripted provider: the {role} script returned no turn for request {index + 1}")
        return Turn(text=turn) if isinstance(turn, str) else turn

    def generate(self, request: ModelRequest) -> Iterator[ProviderEvent]:
        turn = self._next_turn(request)
        if not self._wait(turn.latency, request):
            return
        produced = []
        for chunk in turn.stream():
            if not self._wait(chunk.delay, request):
                return
            produced.append(chunk.text)
            yield TextDelta(chunk.text)
        if turn.error is not None:
            raise turn.error
        for c in turn.tool_calls:
            yield ToolCallEvent(c)
        if turn.usage == "auto":
            prompt = len(self.measure.prompt_units(request.messages, request.tools))
            reply = Message("assistant", "".join(produced), tool_calls=tuple(turn.tool_calls))
            yield UsageEvent(Usage(prompt_tokens=prompt, cached_tokens=None,
                                   output_tokens=len(self.measure.output_units(reply))))
        elif isinstance(turn.usage, Usage):
            yield UsageEvent(turn.usage)
        yield Done()


    def _wait(self, seconds: float, request: ModelRequest) -> bool:
        """Simulated waiting that ends early, exactly at the deadline or a
        scheduled cancellation, as a provider that honours both would. False
        when the stream should end there."""
        if seconds <= 0:
            return True
        now = self.clock.now()
        full = now + seconds
        stop_at = max(now, min(full, request.deadline, request.cancel.due_at or full))
        self.clock.sleep(stop_at - now)
        return stop_at >= full


def _default_reply(request: ModelRequest) -> str:
    last = request.messages[-1].content if request.messages else ""
    if request.role == "final":
        return "Answer based on the evidence gathered."
    return "Notes: " + " ".join(last.split()[:60])
