"""Which novelty path runs: the compiled one (compiled.pyx, built by `pip
install` through setup.py) where it is built, else the pure-Python one,
which is the definition and gives the same fingerprints and verdicts
(tests/core/novelty/test_novelty_compiled.py).

IMPRINT_NOVELTY_PURE=1 chooses the pure path (tests and benchmarks compare
the two). A missing extension is said once, on stderr, when the package is
imported; the pure path then runs.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator

PURE_ENV = "IMPRINT_NOVELTY_PURE"

try:
    from . import compiled as built
except ImportError:
    built = None

AVAILABLE = built is not None


def _chosen() -> ModuleType | None:
    if os.environ.get(PURE_ENV, "").strip() not in ("", "0"):
        return None
    if built is None:
        print("note: the compiled novelty path is not built (reinstall with `pip install -e .` and a C compiler); "
              "novelty runs in pure Python, with the same verdicts, slower", file=sys.stderr)
    return built


ext: ModuleType | None = _chosen()
"""The compiled module in use; None: the pure-Python path."""


def active() -> bool:
    return ext is not None


@contextmanager
def compiled(on: bool) -> Iterator[None]:
    """Run the block on the compiled path (`on`, where it is built) or the pure one."""
    global ext
    if on and built is None:
        raise RuntimeError("the compiled novelty path is not built")
    before = ext
    ext = built if on else None
    try:
        yield
    finally:
        ext = before
