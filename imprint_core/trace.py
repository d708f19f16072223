"""Trace files: JSON Lines, a versioned header, whole lines only.

`TraceWriter` stamps each typed event (`events.py`) with the run's clock and
UTC, writes it as one line with one write and a flush, and keeps nothing:
a crash leaves at most an incomplete last line, which `read_trace` reports
instead of failing. Whoever wants the events in memory subscribes.
"""
from __future__ import annotations

import enum
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

import jsonlines

from .budget import RequestRecord
from .clock import wall_time
from .errors import UserInputError
from .events import EVENT_TYPES, TRACE_FORMAT, Event, Header, event_from_line
from .files import json_lines
from .novelty.rule import EvidenceVerdict
from .settings import ResearchSettings
from .types import Clock, Message, ToolCall, ToolSpec

E = TypeVar("E", bound=Event)


class TraceWriter:
    """Streams events to a JSONL file (or any text stream, or nowhere).
    Thread-safe; holds no events."""

    def __init__(self, target: str | os.PathLike | IO[str] | None, clock: Clock, *, meta: dict | None = None):
        self.clock = clock
        self._lock = threading.Lock()
        self._own = False
        self.path: Path | None = None
        self._listeners: list[Callable[[Event], None]] = []
        if target is None:
            self._fh: IO[str] | None = None
        elif isinstance(target, (str, os.PathLike)):
            self.path = Path(target)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")
            self._own = True
        else:
            self._fh = target
        self.header = self.write(Header(meta=dict(meta or {})))

    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Called with each stamped event after it is written (the harness
        collects or cancels on events)."""
        self._listeners.append(fn)

    def write(self, event: E) -> E:
        event = event.stamped(round(self.clock.now(), 6), wall_time())  # type: ignore[assignment]
        if self._fh is not None:
            line = json.dumps(event.to_dict(), ensure_ascii=False, default=_default) + "\n"
            with self._lock:
                if self._fh is not None:
                    self._fh.write(line)
                    self._fh.flush()
        for fn in self._listeners:
            fn(event)
        return event

    def close(self) -> None:
        with self._lock:
            if self._own and self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
                self._fh = None

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class EventLog:
    """Subscribe one to a writer to keep its events in memory (tests, the
    scenario runner's expectations)."""

    def __init__(self, writer: TraceWriter | None = None):
        self.events: list[Event] = []
        if writer is not None:
            self.events.append(writer.header)
            writer.subscribe(self.events.append)

    def of_type(self, kind: type[E] | str) -> list[E]:
        return _of_type(self.events, kind)


def _of_type(events: list[Event], kind: type[E] | str) -> list[E]:
    """Events of one type, named by class or by the `type` of its line."""
    cls = EVENT_TYPES[kind] if isinstance(kind, str) else kind
    return [e for e in events if type(e) is cls]  # type: ignore[misc]


# The project's values that write themselves as a dict, wherever they sit in
# an event (a rule's notes, a header's meta).
_AS_DICT = (Event, RequestRecord, EvidenceVerdict, ResearchSettings, Message, ToolCall, ToolSpec)


def _default(o: Any) -> Any:
    """What json cannot write by itself; anything else as its str."""
    if isinstance(o, _AS_DICT):
        return o.to_dict()
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return o.decode("utf-8", errors="replace")
    return str(o)


@dataclass
class Trace:
    path: str
    header: Header
    events: list[Event]
    warnings: list[str] = field(default_factory=list)

    def of_type(self, kind: type[E] | str) -> list[E]:
        return _of_type(self.events, kind)


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a trace into typed events. A truncated last line (a crash
    mid-write) is dropped and reported in `warnings`; any other malformed
    line is a UserInputError naming the file, line and key."""
    p = str(path)
    try:
        raw = Path(p).read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read trace: {exc.strerror}", file=p) from None
    events: list[Event] = []
    warnings: list[str] = []
    no = 0
    try:
        for no, data in json_lines(raw):
            if not isinstance(data, dict) or "type" not in data:
                raise ValueError("a trace line must be an object with a 'type'")
            events.append(_event(data, p, no, first=not events))
    except ValueError as exc:  # jsonlines.InvalidLineError is one, its cause says what is wrong; reading ends
        no = exc.lineno if isinstance(exc, jsonlines.InvalidLineError) else no
        if no != raw.count(b"\n") + 1 or raw.endswith(b"\n"):
            raise UserInputError(f"not a trace line: {exc.__cause__ or exc}", file=p, line=no) from None
        warnings.append(f"{p}:{no}: last line is incomplete (the run was interrupted); ignored")
    if not events:
        raise UserInputError("no trace header", file=p, line=1, key="type", expected="'header' on the first line")
    return Trace(p, events[0], events[1:], warnings)  # type: ignore[arg-type]


def _event(data: dict, p: str, no: int, *, first: bool) -> Event:
    """One line's typed event; the first must be a header of this format."""
    if first:
        if data.get("type") != "header":
            raise UserInputError("no trace header", file=p, line=no, key="type", expected="'header' on the first line")
        if data.get("format") != TRACE_FORMAT:
            raise UserInputError(f"unsupported trace format {data.get('format')!r}", file=p, line=no,
                                 key="format", expected=TRACE_FORMAT)
    try:
        return event_from_line(data)
    except KeyError as exc:
        raise UserInputError(f"a {data['type']!r} line lacks a field", file=p, line=no, key=exc.args[0]) from None
    except LookupError:
        raise UserInputError(f"unknown event type {data['type']!r}", file=p, line=no, key="type",
                             expected="one of " + ", ".join(EVENT_TYPES)) from None
    except TypeError as exc:
        raise UserInputError(f"a {data['type']!r} line does not fit its type ({exc})", file=p, line=no) from None
