"""The runs of a sweep as columns (`RunTable`), not as one object a run.

At 100,000 runs the per-run objects were most of what a sweep held: each
`TuneRun` with its instance dict, its `RunLabel`, its `RunSource`, the
ranges of its round numbers, its digest and a handful of strings, some
1.5 KB a run. The table keeps the same facts in a few flat arrays: numbers
in `array` columns, a run's own strings (name, file name, task, origin) in
one byte buffer, folders and other repeated strings once in an interned
table, the digest as its 20 bytes. `table[i]` builds a `TuneRun` equal to
the one appended, on demand; whoever iterates the table holds one run at a
time.

What does not fit the columns exactly (a label with a note or a recorded
verdict, round numbers that skip, a string with a control character the
buffer uses as a separator, an outcome recorded by the source) is kept as
the object itself, beside the columns, for that run only: the table gives
back what it was given, whatever the run.
"""
from __future__ import annotations

from array import array
from functools import partial
from dataclasses import dataclass, field
from typing import Iterator, Sequence, overload

import numpy as np

from ...realruns.labels import RunLabel
from ...realruns.outcomes import UNKNOWN, Outcome
from ...realruns.roundlogs import RoundLog
from .work import RunSource, Unheld, read_again

@dataclass
class TuneRun:
    corpus: str
    name: str                 # the label's key
    path: str
    origin: str               # the file it was read from (with #run for a file of many)
    task: str                 # the split unit: SWE-bench instance, tau-bench task, Who&When question
    rounds: int
    label: RunLabel
    numbers: list[Sequence[int]]  # round numbers per reply (`_numbers`: a range where they follow one another)
    replies: list[RoundLog] = field(repr=False)   # a run not held (`source`) reads them again on use
    digest: str = ""
    always_dev: bool = False  # never held out (the regressions corpus)
    full: list[RoundLog] = field(default_factory=list, repr=False)  # the replies with tool names (compare)
    source: RunSource | None = field(default=None, repr=False)
    weight: int = 0           # its result text (`_weight`), for balancing work
    outcome: Outcome = UNKNOWN  # as its source recorded it (`realruns.outcomes`)

    @property
    def held(self) -> bool:
        """Whether its replies are in memory."""
        return self.source is None

    @property
    def unheld(self) -> Unheld:
        """The reference work items carry for a run not held."""
        assert self.source is not None
        return Unheld(self.source, self.digest)


def _held_or_read(name: str):
    """A TuneRun field that a run not held reads again from its file on use
    (and then keeps: `compare` reads every run's replies many times)."""
    def get(run: TuneRun):
        value = run.__dict__.get(name)
        if value is None and run.source is not None:
            run.__dict__["replies"], run.__dict__["full"] = read_again([run.unheld])[0]
            run.__dict__["source"] = None
            keep = run.__dict__.pop("_keep", None)     # a view of a `RunTable`: the table keeps them
            if keep is not None:
                keep(run.__dict__["replies"], run.__dict__["full"])
            value = run.__dict__[name]
        return value

    def put(run: TuneRun, value) -> None:
        run.__dict__[name] = value
    return property(get, put)


TuneRun.replies = _held_or_read("replies")   # type: ignore[assignment]
TuneRun.full = _held_or_read("full")         # type: ignore[assignment]


def _weight(reps: Sequence[RoundLog]) -> int:
    return sum(len(c.result) + 200 for rep in reps for r in rep.rounds for c in r.calls) + 1


_SEP, _SAME, _FOLDER, _BASE = "\x00", "\x01", "\x02", "\x03"
_CONTROL = frozenset(_SEP + _SAME + _FOLDER + _BASE)
_DIGEST_BYTES = 20          # work.digest_of: blake2b of 20 bytes, in hex


class _Interned:
    """Strings (or other hashable values) that repeat across runs, each kept once."""

    def __init__(self) -> None:
        self.values: list = []
        self._ids: dict = {}

    def id(self, value) -> int:
        got = self._ids.get(value)
        if got is None:
            got = self._ids[value] = len(self.values)
            self.values.append(value)
        return got


class RunTable(Sequence[TuneRun]):
    """`TuneRun`s in columns; `table[i]` is a `TuneRun` equal to the i-th appended."""

    def __init__(self) -> None:
        self._shared = _Interned()              # corpora, folders, label files, kinds, user-turn modes
        self._text = bytearray()                # each run's own strings, UTF-8, separated
        self._text_at = array("q", [0])
        self._digest = bytearray()
        self._ints = array("q")                 # per run, _WIDTH values (see append)
        self._loops_at = array("q", [0])
        self._loops = array("q")                # per loop: start, end, period (-1: none)
        self._replies_at = array("q", [0])
        self._reply_start = array("q")          # per reply: its first round number (-1: see _numbers)
        self._reply_len = array("q")            # per reply: its rounds
        self._held: dict[int, tuple[list, list]] = {}   # replies and full replies of the runs held in memory
        self._labels: dict[int, RunLabel] = {}  # labels the columns do not carry exactly
        self._numbers: dict[int, list] = {}     # round numbers the columns do not carry exactly
        self._outcomes: dict[int, object] = {}  # outcomes other than UNKNOWN
        self._objects: dict[int, object] = {}   # runs whose strings or digest the columns cannot carry

    # ---- writing ---------------------------------------------------------------------------------------
    _WIDTH = 12
    # corpus, rounds, weight, always_dev, should_not_stop_before (0: none), label file, label line (-1: none),
    # source kind (-1: no source), source named, source user turns, source file (-1: the path's), spare

    def _pack(self, s: str, path: str | None = None) -> str | None:
        """A string for the buffer: the path's own (`path`), or its folder's id
        and its base name; None when it holds a separator."""
        if path is not None and s == path:
            return _SAME
        if not s or _CONTROL.intersection(s):
            return None if s else ""
        cut = s.rfind("/")
        if cut <= 0:
            return s
        return f"{_FOLDER}{self._shared.id(s[:cut])}{_BASE}{s[cut + 1:]}"

    def _unpack(self, s: str, path: str = "") -> str:
        if s == _SAME:
            return path
        if s[:1] == _FOLDER:
            folder, _, base = s[1:].partition(_BASE)
            return f"{self._shared.values[int(folder)]}/{base}"
        return s

    def append(self, run: TuneRun) -> None:
        ri = len(self)
        d = run.__dict__
        source: RunSource | None = d.get("source")
        held = source is None
        digest = run.digest
        texts = [self._pack(run.name), self._pack(run.path), self._pack(run.task), self._pack(run.origin, run.path),
                 self._pack(source.file, run.path) if source is not None else ""]
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            raw = b""
        fits = (None not in texts and len(raw) == _DIGEST_BYTES and raw.hex() == digest
                and (source is None or source.log_path == run.path))
        if not fits:
            self._objects[ri] = run
            self._ints.extend([0] * self._WIDTH)
            self._digest += bytes(_DIGEST_BYTES)
            self._text_at.append(len(self._text))
            self._loops_at.append(len(self._loops))
            self._replies_at.append(len(self._reply_start))
            return
        self._text += _SEP.join(texts).encode("utf-8")
        self._text_at.append(len(self._text))
        self._digest += raw
        label = run.label
        plain = (label.name == run.name and not (label.note or label.source or label.added or label.repeats)
                 and label.when_added is None and len(label.periods) == len(label.loops)
                 and (label.should_not_stop_before is None or label.should_not_stop_before > 0))
        if plain:
            for (a, b), p in zip(label.loops, label.periods):
                self._loops.extend((a, b, -1 if p is None else p))
        else:
            self._labels[ri] = label
        self._loops_at.append(len(self._loops))
        exact = True
        for nums in run.numbers:
            if isinstance(nums, range) and nums.step == 1 and len(nums):
                self._reply_start.append(nums.start)
            else:
                exact = False
                self._reply_start.append(-1)
            self._reply_len.append(len(nums))
        if not exact:
            self._numbers[ri] = run.numbers
        self._replies_at.append(len(self._reply_start))
        if held:
            self._held[ri] = (d.get("replies"), d.get("full"))
        if run.outcome is not UNKNOWN:
            self._outcomes[ri] = run.outcome
        self._ints.extend((
            self._shared.id(run.corpus), run.rounds, run.weight, int(run.always_dev),
            label.should_not_stop_before or 0 if plain else 0, self._shared.id(label.file) if plain else 0,
            -1 if not plain or label.line is None else label.line,
            -1 if held else self._shared.id(source.kind), 0 if held else int(source.named),
            0 if held else self._shared.id(source.user_turns), 0, 0))

    # ---- reading -------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._text_at) - 1

    @overload
    def __getitem__(self, i: int) -> TuneRun: ...

    @overload
    def __getitem__(self, i: slice) -> list[TuneRun]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        ri = int(i)
        n = len(self)
        if ri < 0:
            ri += n
        if not 0 <= ri < n:
            raise IndexError(i)
        got = self._objects.get(ri)
        if got is not None:
            return got
        ints = self._ints[ri * self._WIDTH:(ri + 1) * self._WIDTH]
        name, path, task, origin, file = self._text[self._text_at[ri]:self._text_at[ri + 1]].decode("utf-8").split(_SEP)
        path = self._unpack(path)
        name, task, origin = self._unpack(name), self._unpack(task), self._unpack(origin, path)
        label = self._labels.get(ri)
        if label is None:
            a, b = self._loops_at[ri], self._loops_at[ri + 1]
            spans = self._loops[a:b]
            label = RunLabel(name, ints[4] or None, tuple((spans[k], spans[k + 1]) for k in range(0, len(spans), 3)),
                             file=self._shared.values[ints[5]], line=None if ints[6] < 0 else ints[6],
                             periods=tuple(None if spans[k] < 0 else spans[k] for k in range(2, len(spans), 3)))
        held = self._held.get(ri)
        source = None
        if held is None:
            source = RunSource(self._unpack(file, path), self._shared.values[ints[7]], bool(ints[8]), path,
                               self._shared.values[ints[9]])
        run = TuneRun(self._shared.values[ints[0]], name, path, origin, task, ints[1], label, self.numbers(ri),
                      held[0] if held else None, self.digest(ri), bool(ints[3]), held[1] if held else None,
                      source, ints[2], self._outcomes.get(ri, UNKNOWN))
        if source is not None:      # read again on use, it is then kept here, as a TuneRun keeps it
            run.__dict__["_keep"] = partial(self._keep, ri)
        return run

    def __iter__(self) -> Iterator[TuneRun]:
        return (self[i] for i in range(len(self)))

    def _keep(self, ri: int, replies: list, full: list) -> None:
        self._held[ri] = (replies, full)

    def digest(self, ri: int) -> str:
        got = self._objects.get(ri)
        if got is not None:
            return got.digest
        return self._digest[ri * _DIGEST_BYTES:(ri + 1) * _DIGEST_BYTES].hex()

    def numbers(self, ri: int) -> list:
        got = self._objects.get(ri)
        if got is not None:
            return got.numbers
        got = self._numbers.get(ri)
        if got is not None:
            return got
        a, b = self._replies_at[ri], self._replies_at[ri + 1]
        return [range(s, s + n) for s, n in zip(self._reply_start[a:b], self._reply_len[a:b])]

    def held(self, ri: int) -> bool:
        got = self._objects.get(ri)
        return got.held if got is not None else ri in self._held

    def weights(self) -> np.ndarray:
        """Each run's result text (`TuneRun.weight`)."""
        out = np.frombuffer(self._ints, dtype=np.int64).reshape(-1, self._WIDTH)[:, 2].copy()
        for ri, run in self._objects.items():
            out[ri] = run.weight
        return out

    def reply_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(each run's first reply, as an index into the second), rounds of every reply."""
        at = np.frombuffer(self._replies_at, dtype=np.int64)
        lens = np.frombuffer(self._reply_len, dtype=np.int64)
        if not self._objects:
            return at.copy(), lens.copy()
        return reply_lengths([self[i] for i in range(len(self))])

    def refs(self) -> "Refs":
        return Refs(self)


def reply_lengths(runs: Sequence[TuneRun]) -> tuple[np.ndarray, np.ndarray]:
    """`RunTable.reply_lengths` of any sequence of runs."""
    if isinstance(runs, RunTable):
        return runs.reply_lengths()
    lens = [len(nums) for run in runs for nums in run.numbers]
    at = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum([len(run.numbers) for run in runs], out=at[1:])
    return at, np.array(lens, dtype=np.int64)


class Refs(Sequence):
    """The runs as work items carry them (`work.RunRef`), built one at a time:
    a held run's replies, or an `Unheld` reference."""

    def __init__(self, table: RunTable):
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i):
        ri = int(i)
        held = self.table._held.get(ri)
        if held is not None:
            return held[0]
        run = self.table[ri]
        return run.replies if run.held else run.unheld


# ---- what the sweep reads of any sequence of runs: a table's columns, or each run's field --------------------
def digest_at(runs: Sequence[TuneRun], ri: int) -> str:
    return runs.digest(ri) if isinstance(runs, RunTable) else runs[ri].digest


def held_at(runs: Sequence[TuneRun], ri: int) -> bool:
    return runs.held(ri) if isinstance(runs, RunTable) else runs[ri].held


def weights_of(runs: Sequence[TuneRun]) -> np.ndarray:
    """Each run's result text, for balancing work (`TuneRun.weight`; 0: measured from its replies)."""
    if isinstance(runs, RunTable):
        out = runs.weights()
    else:
        out = np.array([r.weight for r in runs], dtype=np.int64)
    for ri in np.flatnonzero(out == 0):
        out[ri] = _weight(runs[int(ri)].replies)
    return out


def refs_of(runs: Sequence[TuneRun]) -> Sequence:
    """The runs as work carries them (`work.RunRef`): a held run's replies, else an `Unheld` reference."""
    if isinstance(runs, RunTable):
        return runs.refs()
    return [run.replies if run.held else run.unheld for run in runs]


def first_of_equal(runs: Sequence[TuneRun]) -> np.ndarray:
    """For each run, the first run of equal content (equal digest): itself, or an earlier one."""
    if isinstance(runs, RunTable) and not runs._objects and len(runs):
        digests = np.frombuffer(bytes(runs._digest), dtype=f"V{_DIGEST_BYTES}")
        _, first, inverse = np.unique(digests, return_index=True, return_inverse=True)
        return first[inverse.reshape(-1)].astype(np.int64)
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(digest_at(runs, ri), ri) for ri in range(len(runs))], dtype=np.int64)


def last_round(runs: Sequence[TuneRun]) -> int:
    """The highest round number of any run (0: none): what a stop round can be."""
    if isinstance(runs, RunTable) and not runs._objects and not runs._numbers:
        start = np.frombuffer(runs._reply_start, dtype=np.int64)
        lens = np.frombuffer(runs._reply_len, dtype=np.int64)
        return int((start + lens - 1).max()) if len(start) else 0
    return max((max(nums) for i in range(len(runs)) for nums in _numbers_at(runs, i) if len(nums)), default=0)


def _numbers_at(runs: Sequence[TuneRun], ri: int) -> list:
    return runs.numbers(ri) if isinstance(runs, RunTable) else runs[ri].numbers
