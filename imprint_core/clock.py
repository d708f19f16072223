"""Clocks. Every time check in the project goes through one of these."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone


class MonotonicClock:
    """Real time: `time.monotonic`, and a real sleep."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock:
    """Time that moves only when simulated work says so; sleeping is instant.

    Thread-safe, so concurrent section workers can advance it."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot sleep a negative time ({seconds})")
        with self._lock:
            self._now += seconds

    advance = sleep


_second: tuple[int, str] = (-1, "")


def wall_time() -> str:
    """ISO-8601 UTC wall time for trace lines (informative, never compared):
    what datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    writes, with the date and time of day formatted once a second (every
    trace line is stamped; building a datetime for each cost more than the
    rest of writing an event)."""
    global _second
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, datetime.fromtimestamp(sec, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{ns // 1_000_000:03d}+00:00"
