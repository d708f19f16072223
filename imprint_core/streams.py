"""A provider's event stream, consumed into one `Collected`.

`collect` checks cancellation and the deadline after every event and closes
the stream however it ends; the model call, benchmarks and tests use it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol, runtime_checkable

from .errors import ProviderError
from .types import CancelToken, Clock, Done, ErrorEvent, ProviderEvent, StopReason, TextDelta, ToolCall, ToolCallEvent, Usage, UsageEvent


@runtime_checkable
class Closable(Protocol):
    """A stream that holds something open (a generator, an HTTP response)."""
    def close(self) -> None: ...


@dataclass(frozen=True)
class Collected:
    """What one provider stream produced. `interrupted`: the deadline or a
    cancellation cut it; `error`: the provider failed."""
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    interrupted: StopReason | None = None
    error: ProviderError | None = None


def collect(events: Iterable[ProviderEvent], *, clock: Clock | None = None, deadline: float = math.inf,
            cancel: CancelToken | None = None) -> Collected:
    """Consume a provider stream, checking cancellation and the deadline
    after every event. Closes the stream however it ends."""
    parts: list[str] = []
    calls: list[ToolCall] = []
    usage: Usage | None = None
    interrupted: StopReason | None = None
    error: ProviderError | None = None

    def cut() -> StopReason | None:
        if cancel is not None and cancel.cancelled:
            return StopReason.CANCELLED
        if clock is not None and clock.now() >= deadline:
            return StopReason.TIME_BUDGET
        return None

    try:
        for event in events:
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append(event.call)
            elif isinstance(event, UsageEvent):
                usage = event.usage
            elif isinstance(event, ErrorEvent):
                raise event.error
            elif isinstance(event, Done):
                break
            interrupted = cut()
            if interrupted is not None:
                break
        else:
            # Ended without Done: a provider that saw the deadline or the
            # cancellation itself and stopped early.
            interrupted = cut()
    except ProviderError as exc:
        error = exc
    finally:
        if isinstance(events, Closable):
            events.close()
    return Collected("".join(parts), tuple(calls), usage, interrupted, error)
