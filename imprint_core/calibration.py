"""The calibrated byte estimate: remote prompt counts learned from measured usage.

Where a provider has no tokenizer, its reported usage still says how many
tokens the prompts it saw really had. `CalibratedCounter` fits, per provider
and model, measured prompt tokens against the byte estimate's bytes:

    tokens = slope * bytes + overhead[tools offered or not]

The slope is the least-squares slope (pooled within the two kinds of
request), and each kind's overhead is then raised until the line lies on or
above every measurement of that kind: the upper envelope, so the fit never
under-counts a request it has seen (the per-request overhead is where a
server's tool preamble goes). A kind of request without a measurement yet
is not guessed: the counter raises `CountingUnavailable` and the caller
falls back to the byte estimate, tracing why.

`CalibrationStore` keeps the measurements (the last `MAX_POINTS` per
provider and model) in a JSON file in the user cache, written atomically
after each one, so that a session's first request is covered by what
earlier sessions measured. `CalibrationStore(None)` keeps them in memory
only (scenario runs: reproducible, never the user's cache).
"""
from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Sequence

from .counting import DEFAULT_BYTES_PER_TOKEN, ByteEstimateCounter, GrownBytes
from .errors import CountingUnavailable
from .files import atomic_write_text
from .types import Message, ToolSpec

CALIBRATION_ENV = "IMPRINT_CALIBRATION"
CALIBRATION_FORMAT = "imprint-calibration/1"
MAX_POINTS = 256


def default_calibration_path() -> Path:
    """`$IMPRINT_CALIBRATION`, else `<user cache>/imprint/calibration.json`
    (the cache the model folder and the tuner use)."""
    env = os.environ.get(CALIBRATION_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir
    return Path(user_cache_dir("imprint")) / "calibration.json"


class CalibrationStore:
    """Measured (bytes, tools offered, prompt tokens) per `provider|model` key."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._points: dict[str, list[tuple[int, bool, int]]] = {}
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}  # an unreadable cache is rebuilt, never fatal
            for key, pts in (data.get("fits") or {}).items() if isinstance(data, dict) else ():
                self._points[key] = [(int(b), bool(t), int(m)) for b, t, m in pts if int(b) > 0 and int(m) > 0]

    @staticmethod
    def key(provider: str, model: str) -> str:
        return f"{provider}|{model}"

    def points(self, key: str) -> list[tuple[int, bool, int]]:
        with self._lock:
            return list(self._points.get(key, ()))

    def add(self, key: str, nbytes: int, tools: bool, measured: int) -> None:
        if nbytes <= 0 or measured <= 0:
            return
        with self._lock:
            pts = self._points.setdefault(key, [])
            pts.append((int(nbytes), bool(tools), int(measured)))
            del pts[:-MAX_POINTS]
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(self.path, json.dumps(
                    {"format": CALIBRATION_FORMAT, "fits": self._points}, indent=1) + "\n")


def fit_envelope(points: Sequence[tuple[int, bool, int]]) -> tuple[float, dict[bool, float]] | None:
    """(slope, overhead per kind) of the upper envelope, or None without points."""
    if not points:
        return None
    kinds: dict[bool, list[tuple[int, int]]] = {}
    for b, t, m in points:
        kinds.setdefault(t, []).append((b, m))
    num = den = 0.0
    for pts in kinds.values():
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        num += sum((x - mx) * (y - my) for x, y in pts)
        den += sum((x - mx) ** 2 for x, _ in pts)
    slope = num / den if den > 0 else 1.0 / DEFAULT_BYTES_PER_TOKEN
    slope = max(slope, 0.0)
    return slope, {t: max(y - slope * x for x, y in pts) for t, pts in kinds.items()}


class CalibratedCounter(ByteEstimateCounter):
    """The byte estimate's units (bytes), counted by the fitted envelope.

    Prefix reuse and output are still converted at the byte estimate's
    ratio; only a whole prompt's count comes from the fit."""

    def __init__(self, store: CalibrationStore, provider: str, model: str,
                 bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN):
        super().__init__(bytes_per_token)
        self.store, self.key = store, CalibrationStore.key(provider, model)
        self.name = f"calibrated/{self.bytes_per_token:g}"

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[GrownBytes, int]:
        units = self.grown_units(messages, tools)
        fit = fit_envelope(self.store.points(self.key))
        kind = bool(tools)
        if fit is None or kind not in fit[1]:
            what = "requests that offer tools" if kind else "requests without tools"
            raise CountingUnavailable(f"no calibration yet for {what} to {self.key}")
        slope, overhead = fit
        return units, max(math.ceil(slope * len(units) + overhead[kind] - 1e-9), 1)

    def observe(self, messages: Sequence[Message], tools: Sequence[ToolSpec], measured_prompt: int) -> None:
        self.store.add(self.key, len(self.grown_units(messages, tools)), bool(tools), measured_prompt)
