"""Work shared across configs: the pure steps of the novelty rule
(normalizing, segmenting, shingling) remembered while `shared_work()` is on, so
that every config that judges the same text reuses what the first computed.

A sweep judges each round under many configs that differ only in how they
count; their normalization profile and shingle width are few. With sharing
on, a grid costs about one normalization per profile and one shingling per
width, plus the counting of every config.

- Off unless a thread turns it on: the loop judges each text once, and pays
  one attribute lookup per call.
- Per thread: Dask workers run tasks on threads, and one table shared by
  threads would need a lock.
- Bounded: the least recently used entries go once more than ENTRIES are
  held or their texts exceed CHARS characters; judging a round under every
  config back to back (the sweep) needs only the last few.
- Keyed by the text itself, not a digest of it, so that two texts never
  share an entry; values are returned as computed, so callers get copies of
  lists and read-only arrays (`frozen`).
"""
from __future__ import annotations

import dataclasses
import functools
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

ENTRIES = 4_096
CHARS = 16 << 20

_local = threading.local()


class _Table:
    __slots__ = ("entries", "chars", "hits", "misses")

    def __init__(self) -> None:
        self.entries: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.chars = self.hits = self.misses = 0

    def get(self, key: Any) -> Any:
        got = self.entries.get(key)
        if got is None:
            self.misses += 1
            return None
        self.entries.move_to_end(key)
        self.hits += 1
        return got[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        if size > CHARS:
            return
        self.entries[key] = (value, size)
        self.chars += size
        while len(self.entries) > ENTRIES or self.chars > CHARS:
            _, (_, gone) = self.entries.popitem(last=False)
            self.chars -= gone


@contextmanager
def shared_work(on: bool = True) -> Iterator[None]:
    """Remember shared work on this thread inside the block (`on`), or not.
    A block inside another keeps the outer table."""
    before = getattr(_local, "table", None)
    _local.table = (before or _Table()) if on else None
    try:
        yield
    finally:
        _local.table = before


def stats() -> tuple[int, int]:
    """(hits, misses) of this thread's table (0, 0 when sharing is off)."""
    table = getattr(_local, "table", None)
    return (table.hits, table.misses) if table is not None else (0, 0)


def shared(key: Callable[..., Any], size: Callable[..., int], copy: Callable[[Any], Any] = lambda v: v,
           keep: Callable[[Any], None] = lambda v: None) -> Callable[[Callable], Callable]:
    """A pure function, remembered while sharing is on. `key` gives the
    entry's key from the call's arguments (None: not remembered), `size` its
    characters; `keep` readies a value to be remembered (`frozen`), `copy`
    gives what each caller gets of it. `plain` is the function itself."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            table = _local.__dict__.get("table")
            if table is None:
                return fn(*args, **kwargs)
            k = key(*args, **kwargs)
            if k is None:
                return fn(*args, **kwargs)
            k = (fn, k)
            got = table.get(k)
            if got is None:
                got = fn(*args, **kwargs)
                keep(got)
                table.put(k, got, size(*args, **kwargs))
            return copy(got)
        call.plain = fn   # type: ignore[attr-defined]
        return call
    return wrap


_ATOMS = (str, bytes, int, float, type(None))   # hold no array: a remembered list of texts is not walked item by item
_FIELDS: dict[type, tuple[str, ...]] = {}


def frozen(value: Any) -> None:
    """Make the arrays of a remembered value (a tuple, a dataclass, an
    array, nested) read-only: a caller that writes into one fails loudly
    instead of changing what the next config is given."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for v in value:
            if not isinstance(v, _ATOMS):
                frozen(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(type(value))
        if names is None:
            names = _FIELDS[type(value)] = tuple(f.name for f in dataclasses.fields(value))
        for name in names:
            frozen(getattr(value, name))
