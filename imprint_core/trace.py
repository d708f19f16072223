"""Trace files: JSON Lines, a versioned header, whole lines only.

Every line has `type`, `t` (the run's clock) and `wall` (UTC). Lines are
built in memory and written with one write and a flush, so a crash leaves at
most an incomplete last line, which the reader reports instead of failing.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from .clock import wall_time
from .errors import UserInputError
from .types import Clock

TRACE_FORMAT = "imprint-trace/1"


def _default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "value"):  # enums
        return o.value
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return o.decode("utf-8", errors="replace")
    return str(o)


class TraceWriter:
    """Appends events to a JSONL file (or any text stream). Thread-safe."""

    def __init__(self, target: str | os.PathLike | IO[str] | None, clock: Clock, *, meta: dict | None = None):
        self.clock = clock
        self._lock = threading.Lock()
        self._own = False
        self.path: Path | None = None
        self._listeners: list[Callable[[dict], None]] = []
        if target is None:
            self._fh: IO[str] | None = None
        elif hasattr(target, "write"):
            self._fh = target  # type: ignore[assignment]
        else:
            self.path = Path(target)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")
            self._own = True
        self.events: list[dict] = []
        self.emit("header", format=TRACE_FORMAT, **(meta or {}))

    def subscribe(self, fn: Callable[[dict], None]) -> None:
        """Called after each event is written (the harness cancels on events)."""
        self._listeners.append(fn)

    def emit(self, type: str, **data: Any) -> dict:
        event = {"type": type, "t": round(self.clock.now(), 6), "wall": wall_time(), **data}
        line = json.dumps(event, ensure_ascii=False, default=_default) + "\n"
        with self._lock:
            self.events.append(event)
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


@dataclass
class Trace:
    path: str
    header: dict
    events: list[dict]
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type: str) -> list[dict]:
        return [e for e in self.events if e.get("type") == type]


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a trace. A truncated last line (a crash mid-write) is dropped and
    reported in `warnings`; any other malformed line is a UserInputError
    naming the file and line."""
    p = str(path)
    try:
        raw = Path(p).read_bytes()
    except OSError as exc:
        raise UserInputError(f"cannot read trace: {exc.strerror}", file=p) from None
    lines = raw.split(b"\n")
    complete_tail = raw.endswith(b"\n")
    events: list[dict] = []
    warnings: list[str] = []
    for no, rawline in enumerate(lines, start=1):
        if not rawline.strip():
            continue
        last = no == len(lines) and not complete_tail
        try:
            event = json.loads(rawline.decode("utf-8"))
            if not isinstance(event, dict) or "type" not in event:
                raise ValueError("a trace line must be an object with a 'type'")
        except (ValueError, UnicodeDecodeError) as exc:
            if last:
                warnings.append(f"{p}:{no}: last line is incomplete (the run was interrupted); ignored")
                break
            raise UserInputError(f"not a trace line: {exc}", file=p, line=no) from None
        events.append(event)
    if not events or events[0].get("type") != "header":
        raise UserInputError("no trace header", file=p, line=1, key="type", expected="'header' on the first line")
    header = events[0]
    if header.get("format") != TRACE_FORMAT:
        raise UserInputError(f"unsupported trace format {header.get('format')!r}", file=p, line=1, key="format",
                             expected=TRACE_FORMAT)
    return Trace(p, header, events[1:], warnings)
