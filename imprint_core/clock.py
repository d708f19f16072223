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


def wall_time() -> str:
    """ISO-8601 UTC wall time for trace lines (informative, never compared)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
