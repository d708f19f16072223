"""The tuner's expensive part: per-round novelty of labelled runs, once per
novelty config, cached, fanned out over processes or a Dask cluster.

A run's stop at any patience follows from one list per reply: each round's
kind and whether it made progress (`realruns.roundlogs.round_progress`). That
list depends on the novelty config (every `NoveltyConfig` field) and on the
run, never on patience, so it is computed once per (run, config) and kept:

- in memory, per process (`cache.MEMORY`), so a second sweep in the same process
  with other patience values or rules costs nothing;
- on disk, optionally, under the user cache dir (`default_cache_dir()`), one
  small file per (run content, config, code version): the run's key is a
  hash of what the novelty rule reads (each call's kind, status, result and
  segments, and where replies start), the code version a hash of the
  novelty and round-classification sources, so an edit there or in the
  importers' output is a miss, never a stale hit.

What is missing is computed by `compute_progress`: inline (`jobs=1`), on a
local process pool (`jobs=N`, the default all cores), or on a Dask
distributed cluster (`scheduler=ADDRESS`). Work is cut into (configs, chunk
of runs) items, chunks balanced by text size; the result does not depend on
how it was cut or where it ran. With `share` (the default) an item holds
every config a run misses, and a worker judges each reply under all of them
back to back inside `novelty.shared_work()`: the configs share the
normalization, segmentation and shingles of each text, so a grid costs
about one normalization per profile and one shingling per width plus the
counting of each config. `share=False` is the path before sharing, one
config per item, kept to measure the two side by side
(benchmarks/bench_tune.py). Every patience value then replays the cheap
counter: `stop_rounds` finds the stop of every patience in one pass.

Memory: the runs loaded live in a `table.RunTable`, columns rather than
an object a run (built as a `TuneRun` when read); a corpus's files are
found and read one at a time, and the runs past `HOLD_CHARS`
of result text keep only what the verdicts need (label, round numbers,
digest); a work item carries them as references (`work.Unheld`), the
worker that judges one reads its replies again and lets them go after, and
no item holds more than a share of `HOLD_CHARS` (benchmarks/bench_scale.py).
"""
from __future__ import annotations

import heapq
import os
import sys
from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from imprint_core.errors import UserInputError
from imprint_core.novelty import NoveltyConfig

from ...realruns.labels import Labels, RunLabel, corpus_name, load_labels
from ...realruns.noveltyconfigs import config_key
from ...realruns.outcomes import OutcomeError, outcome_of
from ...realruns.regressionstore import CORPUS as REGRESSIONS
from ...realruns.roundlogs import replies
from ...realruns.runfiles import RunFile, iter_inputs, read_file
from .cache import Progress, ProgressCache, decode, encode
from .table import (RunTable, TuneRun, _weight, digest_at, first_of_equal, held_at,  # noqa: F401  (TuneRun: imported from here)
                    refs_of, reply_lengths, weights_of)
from .work import Item, RunSource, digest_of, runner_for, slim


# ---- corpora and their labelled runs ------------------------------------------------------------------
@dataclass
class Corpus:
    """Run files (traces, round logs, raw trajectories) and the labels file that
    judges them. The regressions corpus (`realruns.regressionstore`, named after
    regressions.yaml) is always tuned on, never held out (a regression is there
    to be fixed). A regression keeps the task of the run it came from (its
    header's task or instance id), so that task moves to dev whole: a run
    tuned on as a regression must not be scored again as held-out. Without
    a task id it is a task of its own."""
    paths: list[str]
    labels: str
    name: str = ""
    always_dev: bool | None = None

    def __post_init__(self) -> None:
        self.name = self.name or corpus_name(self.labels)
        if self.always_dev is None:
            self.always_dev = self.name == REGRESSIONS


HOLD_CHARS = 16_000_000
"""Result text (`_weight`) a corpus load keeps parsed in memory; the runs
past it keep only what the verdicts need (label, round numbers, digest) and
are read again from their files by the worker that computes their
progress, an item at a time, so memory stays flat however large the corpus. The labelled
corpora beside the repository fit (about 7 million)."""


def task_of(rf: RunFile) -> str:
    """A run's task: the header's `task_id` (tau-bench: runs of one task are its
    trials), else its `instance_id` (mini-swe-agent: the SWE-bench instance;
    Who&When: the question, shared by a Hand-Crafted and an
    Algorithm-Generated file), else the run's name."""
    for key in ("task_id", "instance_id"):
        v = rf.log.labels.get(key)
        if v is not None and not isinstance(v, bool) and str(v).strip():
            return str(v)
    return rf.name


def _numbers(nums: list[int]) -> Sequence[int]:
    """A reply's round numbers as a `range` when they follow one another (as
    they mostly do): one small object a reply, which a corpus of 100,000 runs
    holds for every run."""
    if nums and nums == list(range(nums[0], nums[0] + len(nums))):
        return range(nums[0], nums[0] + len(nums))
    return tuple(nums)


def _run_files(paths: Sequence[str], warnings: list[str]) -> Iterator[tuple[RunFile, RunSource]]:
    """`load_runs`, a file at a time (the runs of one file in memory at once;
    the files are found one at a time too, `runfiles.iter_inputs`)."""
    skipped: list[str] = []
    unread: list[str] = []
    for path, kind, named in iter_inputs(paths, skipped):
        got, warning = read_file(path, kind, named=named)
        file = sys.intern(str(path))
        for rf in got:
            yield rf, RunSource(file, kind, named, sys.intern(rf.log.path), "")
        if warning:
            unread.append(warning)
    warnings += skipped + unread      # as a list of the files first gave them: the files skipped, then the rest


def load_corpus(corpus: Corpus, user_turns: str = "reset", held: list[int] | None = None, *,
                outcomes: bool = False, into: RunTable | None = None) -> tuple[RunTable, list[str]]:
    """The labelled runs of a corpus (unlabelled runs cannot be judged and are
    not replayed; with `outcomes`, a run without a label that records its
    outcome is judged by that alone), and warnings: files skipped, labels that
    match no run, runs that match a label another run already took. Files are
    read one at a time; runs past `HOLD_CHARS` of result text (`held`: the
    count so far, over corpora) are not kept parsed (`TuneRun.source`).
    The runs go into a `RunTable` (`into`, or a new one), as columns."""
    labels: Labels = load_labels([corpus.labels])
    warnings: list[str] = []
    held = held if held is not None else [0]
    taken: dict[str, str] = {}
    out = into if into is not None else RunTable()
    before = len(out)
    for rf, source in _run_files(corpus.paths, warnings):
        label = labels.for_run(rf.name, None, rf.log.path)
        try:
            outcome = outcome_of(rf.log.labels)
        except OutcomeError as exc:
            raise UserInputError(str(exc), file=rf.display, line=1, key=exc.key, expected=exc.expected) from None
        if label is None:
            if not outcomes or outcome.value == "unknown":
                continue
            label = RunLabel(rf.name, file=corpus.labels)
        if label.name in taken:
            warnings.append(f"{rf.display}: label {label.name!r} already matched {taken[label.name]}; skipped")
            continue
        taken[label.name] = rf.display
        full = replies(rf.log, user_turns)
        reps = [slim(r) for r in full]
        task = task_of(rf)
        if corpus.always_dev and task == rf.name:     # no task id in its header: a task of its own
            task = f"{corpus.name}:{label.name}"
        weight = _weight(reps)
        # Interned, the path, origin, source file and log path (mostly one
        # text) are one object a run, not four (by sizeof, some 400 bytes a run).
        run = TuneRun(corpus.name, label.name, source.log_path, sys.intern(rf.display), task, len(rf.log.rounds), label,
                      [_numbers([r.number for r in rep.rounds]) for rep in reps], reps, digest_of(reps),
                      bool(corpus.always_dev), full, weight=weight, outcome=outcome)
        held[0] += weight
        if held[0] > HOLD_CHARS:       # past what is kept: read again when its progress is computed
            run.__dict__.update(replies=None, full=None, source=replace(source, user_turns=user_turns))
        out.append(run)
    unmatched = [n for n in labels.runs if n not in taken]
    if unmatched:
        warnings.append(f"{corpus.name}: {len(unmatched)} label(s) match no run: {', '.join(unmatched[:8])}"
                        f"{'…' if len(unmatched) > 8 else ''}")
    if len(out) == before and not len(labels):
        warnings.append(f"corpus {corpus.name}: no run is labelled{' or records its outcome' if outcomes else ''}; "
                        "skipped")
        return out, warnings
    if len(out) == before:
        raise UserInputError(f"corpus {corpus.name}: no run is labelled", file=corpus.labels, key="runs",
                             expected="labels whose names match the runs' scenario names, file stems or path tails "
                                      f"under {' '.join(corpus.paths)}")
    return out, warnings


def load_corpora(corpora: Sequence[Corpus], user_turns: str = "reset", *,
                 outcomes: bool = False) -> tuple[RunTable, list[str]]:
    names = [c.name for c in corpora]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UserInputError(f"two corpora are both named {dup!r} (after their labels files)", key="--labels",
                             expected="one labels file per corpus, with distinct names")
    runs = RunTable()
    warnings: list[str] = []
    held = [0]
    for c in corpora:
        warnings += load_corpus(c, user_turns, held, outcomes=outcomes, into=runs)[1]
    return runs, warnings


def plan(missing: dict[int, list[int]], weights: Sequence[int], jobs: int, share: bool = True,
         max_weight: int | None = None) -> list[Item]:
    """Work items for the (run, config) pairs missing (configs by run): runs
    that miss the same configs together, all of those configs in each item
    (`share`), or one config per item; each group in enough chunks to keep
    `jobs` workers busy and none heavier than about `max_weight`, balanced
    by weight (largest first onto the lightest chunk)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for ri, cis in missing.items():
        if share:
            groups.setdefault(tuple(cis), []).append(ri)
        else:
            for ci in cis:
                groups.setdefault((ci,), []).append(ri)
    per_group = max(1, -(-jobs * 3 // max(1, len(groups)))) if jobs > 1 else 1
    items: list[Item] = []
    for cis, idx in sorted(groups.items()):
        n = per_group
        if max_weight:
            n = max(n, -(-sum(weights[i] for i in idx) // max_weight))
        n = min(n, len(idx))
        items += [(cis, b) for b in _balanced(idx, weights, n)]
    return sorted(items, key=lambda it: -len(it[0]) * sum(weights[i] for i in it[1]))


def _balanced(idx: list[int], weights: Sequence[int], n: int) -> list[list[int]]:
    """`idx` in `n` bins, heaviest first onto the lightest bin (ties: the
    lowest bin), each bin sorted, empty bins left out. A heap of (load, bin)
    pops exactly what a scan for the least (load, bin) finds, in log n steps
    instead of n: at 100,000 runs a scan was some 25 million steps."""
    bins: list[list[int]] = [[] for _ in range(n)]
    heap = [(0, k) for k in range(n)]        # already a heap: ascending
    for ri in sorted(idx, key=lambda i: (-weights[i], i)):
        load, b = heap[0]
        bins[b].append(ri)
        heapq.heapreplace(heap, (load + weights[ri], b))
    return [sorted(b) for b in bins if b]


MEMMAP_BYTES = 256 * 2 ** 20
"""A progress table's letters past this many bytes (configs × rounds) live in
a temporary file, mapped (`np.memmap`), not in memory: a wide grid over a
large corpus would otherwise hold a byte per config and round."""


def _codes(shape: tuple[int, int]) -> np.ndarray:
    """Zeros of `shape`, bytes: in memory, or past `MEMMAP_BYTES` mapped from a
    temporary file (deleted when closed: the map keeps it open until dropped)."""
    if shape[0] * shape[1] <= MEMMAP_BYTES:
        return np.zeros(shape, dtype=np.uint8)
    import tempfile
    with tempfile.TemporaryFile(prefix="imprint-progress-") as f:
        return np.memmap(f, dtype=np.uint8, mode="w+", shape=shape)


class ProgressTable(Mapping[tuple[int, int], Progress]):
    """Progress of every (config, run), one byte a round: a configs × rounds
    array of the rounds' letters (`cache.encode`), the runs' rounds
    one after another, replies cut where `TuneRun.numbers` cuts them. A
    dict of decoded lists held 1.6 million objects at 100,000 runs × 16
    configs (a synthetic dict of that shape measured 324 MiB under
    tracemalloc); this holds 16 bytes a round (the sweep's peak lay
    elsewhere: in the runs' objects, now `table.RunTable`, and in the
    listing of the files, now `runfiles.iter_inputs`). Runs of equal content share one
    row span (`alias`). Read as a mapping: `table[(ci, ri)]` decodes."""

    def __init__(self, runs: Sequence[TuneRun], configs: int):
        # each run's replies as lengths in one array (`table.reply_lengths`): no object a run
        self._reply_at, self._reply_len = reply_lengths(runs)
        rounds = np.zeros(len(self._reply_len) + 1, dtype=np.int64)
        np.cumsum(self._reply_len, out=rounds[1:])
        self._start = rounds[self._reply_at]        # each run's first round among all runs' rounds
        self._codes = _codes((configs, int(self._start[-1])))   # 0: not yet known
        self._known = np.zeros((configs, len(runs)), dtype=bool)
        self._alias = np.arange(len(runs), dtype=np.int64)

    def _lengths(self, ri: int) -> list[int]:
        return self._reply_len[self._reply_at[ri]:self._reply_at[ri + 1]].tolist()

    def put(self, ci: int, ri: int, progress: Progress) -> None:
        self.put_encoded(ci, ri, encode(progress))

    def put_encoded(self, ci: int, ri: int, encoded: Sequence[str]) -> None:
        """`put` of progress as workers send it (`cache.encode`),
        without decoding it only to encode it again."""
        text = "".join(encoded).encode("ascii")
        a, b = self._start[ri], self._start[ri + 1]
        if len(text) != b - a or [len(rep) for rep in encoded] != self._lengths(ri):
            raise ValueError(f"run {ri}'s progress has {len(text)} rounds in {len(encoded)} replies, "
                             f"its round numbers {b - a}")
        self._codes[ci, a:b] = np.frombuffer(text, dtype=np.uint8)
        self._known[ci, ri] = True

    def same_as(self, ri: int, first: int) -> None:
        """Run `ri` has the content of run `first`: its progress is first's."""
        self._alias[ri] = first

    def __getitem__(self, key: tuple[int, int]) -> Progress:
        ci, ri = key
        src = int(self._alias[ri])
        if not (0 <= ci < len(self._codes) and self._known[ci, src]):
            raise KeyError(key)
        text = self._codes[ci, self._start[src]:self._start[src + 1]].tobytes().decode("ascii")
        reps, at = [], 0
        for n in self._lengths(ri):
            reps.append(text[at:at + n])
            at += n
        return decode(reps)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return ((ci, ri) for ci in range(len(self._codes)) for ri in range(len(self._alias))
                if self._known[ci, self._alias[ri]])

    def __len__(self) -> int:
        return int(self._known[:, self._alias].sum())

    @property
    def nbytes(self) -> int:
        """What it holds in memory (letters mapped from a file apart)."""
        mapped = isinstance(self._codes, np.memmap)
        return ((0 if mapped else self._codes.nbytes) + self._known.nbytes + self._start.nbytes
                + self._alias.nbytes + self._reply_at.nbytes + self._reply_len.nbytes)

    @property
    def mapped(self) -> bool:
        """Whether its letters live in a mapped temporary file (`MEMMAP_BYTES`)."""
        return isinstance(self._codes, np.memmap)


@dataclass
class ComputeStats:
    pairs: int = 0          # (run, config) pairs needed (runs of equal content count once below)
    memory: int = 0         # found in this process's memory
    disk: int = 0           # found on disk
    computed: int = 0       # computed now
    items: int = 0          # work items sent
    where: str = ""


def compute_progress(runs: Sequence[TuneRun], configs: Sequence[NoveltyConfig], *, jobs: int | None = None,
                     scheduler: Any = None, cache: ProgressCache | None = None,
                     share: bool = True) -> tuple[ProgressTable, ComputeStats]:
    """Progress of every (config, run): from the cache where it is, computed
    (once, wherever `jobs`/`scheduler` say; configs sharing work where
    `share`) where it is not."""
    cache = cache or ProgressCache()
    keys = [config_key(c) for c in configs]
    out = ProgressTable(runs, len(configs))
    missing: dict[int, tuple[int, ...]] = {}     # run -> the configs it misses
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}   # one tuple for every run missing the same configs
    stats = ComputeStats(pairs=len(configs) * len(runs))
    before_mem, before_disk = cache.hits_memory, cache.hits_disk
    first = first_of_equal(runs)     # runs of equal content are computed once: the first stands for the others
    for ri in range(len(runs)):
        at = int(first[ri])
        if at != ri:
            out.same_as(ri, at)
            continue
        digest = digest_at(runs, ri)
        miss = []
        for ci, key in enumerate(keys):
            hit = cache.get(digest, key)
            if hit is not None:
                out.put(ci, ri, hit)
            else:
                miss.append(ci)
        if miss:
            t = tuple(miss)
            missing[ri] = shared.setdefault(t, t)
    del first
    stats.memory, stats.disk = cache.hits_memory - before_mem, cache.hits_disk - before_disk
    runner, stats.where = runner_for(jobs, scheduler)
    if missing:
        workers = jobs or os.cpu_count() or 1
        streamed = any(not held_at(runs, ri) for ri in missing)
        items = plan(missing, weights_of(runs), workers, share, HOLD_CHARS // (2 * workers) if streamed else None)
        del missing
        stats.items = len(items)
        # A run not held goes as a reference: the worker that judges it reads it, and lets it go after.
        refs = refs_of(runs)
        for n, encoded in runner(list(configs), refs, items, share):
            cis, idx = items[n]
            for ri, per_config in zip(idx, encoded):
                digest = digest_at(runs, ri)
                for ci, enc in zip(cis, per_config):
                    cache.put(digest, keys[ci], decode(enc))
                    out.put_encoded(ci, ri, enc)
                    stats.computed += 1
    return out, stats


# ---- patience ----------------------------------------------------------------------------------------------
def stop_rounds(progress: Progress, numbers: Sequence[Sequence[int]], patiences: Iterable[int]) -> dict[int, int | None]:
    """The round at which the rule stops the run, for every patience, in one
    pass: the counter of consecutive read rounds without progress restarts
    with each reply and rises one at a time, so patience p stops at the
    first round where it reaches p (None: never). Write rounds neither count
    nor reset (`imprint_core.novelty.PatienceRule`)."""
    first: dict[int, int] = {}
    for rep, nums in zip(progress, numbers):
        counter = 0
        for (kind, made), number in zip(rep, nums):
            if kind == "write":
                continue
            counter = 0 if made else counter + 1
            if counter and counter not in first:
                first[counter] = number
    return {p: first.get(p) for p in patiences}
