"""Per-round progress of a (run, config), kept: in this process's memory
(`MEMORY`) and, optionally, on disk under the user cache dir, one small file
per (run content, config, code version). The code version is a hash of the
novelty and round-classification sources, so an edit there is a miss, never
a stale hit. Progress is stored as one string per reply, a letter a round
(its kind's initial, upper case where it made progress).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

Progress = list[tuple[tuple[str, bool], ...]]
"""Per reply, per round: (kind, made progress)."""

CACHE_FORMAT = 1
MEMORY: "OrderedDict[tuple[str, str], Progress]" = OrderedDict()
"""This process's computed progress, by (run digest, config key): the last
stored or read, up to `MEMORY_BYTES` (a corpus of 100,000 runs would otherwise
keep every run's progress for the life of the process; past the bound a
second sweep reads the disk cache, or computes again without one)."""
MEMORY_BYTES = 16 * 2 ** 20
"""The bound of `MEMORY`, in bytes as `entry_bytes` counts them: a bound in
entries let the cache grow with the runs' replies, and the same bound held
40,000 entries at 10,000 runs and 100,000 at 100,000."""
_memory_bytes = [0]


def entry_bytes(key: tuple[str, str], progress: Progress) -> int:
    """What one entry of `MEMORY` holds, by sys.getsizeof: its node in the
    ordered dict and its key tuple, the digest (the config key is one object
    for every run), and the list of replies (the replies' tuples are shared,
    `decode`)."""
    return _ENTRY + sys.getsizeof(key[0]) + sys.getsizeof(progress)


_ENTRY = 104 + 56   # an OrderedDict entry and its node, measured on CPython 3.11; a 2-tuple key


def _remember(key: tuple[str, str], progress: Progress) -> None:
    old = MEMORY.pop(key, None)
    if old is not None:
        _memory_bytes[0] -= entry_bytes(key, old)
    MEMORY[key] = progress
    _memory_bytes[0] += entry_bytes(key, progress)
    while _memory_bytes[0] > MEMORY_BYTES and MEMORY:
        k, v = MEMORY.popitem(last=False)
        _memory_bytes[0] -= entry_bytes(k, v)


def memory_bytes() -> int:
    """What `MEMORY` holds now, as `entry_bytes` counts it."""
    return _memory_bytes[0]


def clear_memory_cache() -> None:
    MEMORY.clear()
    _memory_bytes[0] = 0


def default_cache_dir() -> Path:
    """`$IMPRINT_CACHE_DIR/tune` or the user cache dir's `imprint/tune`."""
    env = os.environ.get("IMPRINT_CACHE_DIR")
    if env:
        return Path(env) / "tune"
    from platformdirs import user_cache_dir
    return Path(user_cache_dir("imprint")) / "tune"


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of the sources that decide a round's progress: the novelty
    package (its compiled path's .pyx too), round classification, the stop
    rules, the round logs' reading and the sweep's own judging (sweep/work.py)."""
    import imprint_core.novelty as novelty
    import imprint_core.rounds as core_rounds
    import imprint_core.stoprules as stoprules
    from ...realruns import roundlogs as realrounds
    files: list[Path] = []
    for mod in (novelty, core_rounds, stoprules, realrounds):
        f = Path(mod.__file__)
        files += sorted([*f.parent.rglob("*.py"), *f.parent.rglob("*.pyx")]) if f.name == "__init__.py" else [f]
    files.append(Path(__file__).with_name("work.py"))   # its source, not the module: sweep.work imports this one
    h = hashlib.blake2b(digest_size=12)
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def encode(progress: Progress) -> list[str]:
    return ["".join(k[0].upper() if made else k[0] for k, made in rep) for rep in progress]


_KINDS = {"r": "read", "w": "write", "a": "ask", "e": "error"}
# The eight (kind, made progress) pairs, built once: a decoded round is a
# pointer to one of them, not a tuple of its own (100,000 runs hold millions).
_ROUNDS = {c: (kind, made) for ch, kind in _KINDS.items() for c, made in ((ch, False), (ch.upper(), True))}


# A decoded reply is shared too: the same letters decode to one tuple. Replies
# repeat across configs (configs apart in a threshold mostly agree) and across
# runs (591 distinct among 6,140 replies of 1,000 synthetic runs), so 100,000
# runs hold a table of patterns, not a list per reply. The table is cleared
# past `_REPLIES_MAX` patterns: that only stops the sharing.
_REPLIES: dict[str, tuple[tuple[str, bool], ...]] = {}
_REPLIES_MAX = 200_000


def decode(text: list[str]) -> Progress:
    out = []
    for rep in text:
        got = _REPLIES.get(rep)
        if got is None:
            if len(_REPLIES) >= _REPLIES_MAX:
                _REPLIES.clear()
            got = _REPLIES[rep] = tuple(_ROUNDS[ch] for ch in rep)
        out.append(got)
    return out


class ProgressCache:
    """Progress by (run digest, config): this process's memory, then the disk (optional)."""

    def __init__(self, disk: Path | None = None):
        self.disk = disk
        self.hits_memory = self.hits_disk = self.stored = 0

    def _file(self, digest: str, key: str) -> Path:
        assert self.disk is not None
        name = hashlib.blake2b(f"{CACHE_FORMAT}\0{code_version()}\0{digest}\0{key}".encode(),
                               digest_size=16).hexdigest()
        return self.disk / name[:2] / f"{name}.json"

    def get(self, digest: str, key: str) -> Progress | None:
        hit = MEMORY.get((digest, key))
        if hit is not None:
            MEMORY.move_to_end((digest, key))
            self.hits_memory += 1
            return hit
        if self.disk is None:
            return None
        try:
            data = json.loads(self._file(digest, key).read_text(encoding="utf-8"))
            progress = decode(data["progress"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        _remember((digest, key), progress)
        self.hits_disk += 1
        return progress

    def put(self, digest: str, key: str, progress: Progress) -> None:
        _remember((digest, key), progress)
        self.stored += 1
        if self.disk is None:
            return
        f = self._file(digest, key)
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            tmp = f.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": CACHE_FORMAT, "config": json.loads(key), "digest": digest,
                                       "progress": encode(progress)}), encoding="utf-8")
            os.replace(tmp, f)
        except OSError:
            pass   # a cache that cannot be written is only slower
