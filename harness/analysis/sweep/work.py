"""The work of a sweep: a chunk of runs judged under some configs, inline,
on a local process pool or on a Dask cluster (`harness.analysis.sweep` plans
the items and keeps the results). A result is each run's progress under each
config, encoded (`cache.encode`), so that it crosses processes small.

A run the sweep does not hold in memory travels as an `Unheld` reference
(its file and digest), and whoever judges it reads it: the workers read in
parallel, and the client only plans and collects. Workers of a Dask cluster
on other machines must therefore see the run files at the same paths.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, Union

from imprint_core.errors import UserInputError
from imprint_core.novelty import NoveltyConfig, NoveltyTracker, shared_work
from imprint_core.rounds import classify_round
from imprint_core.stoprules.builtin import judged_calls

from ...realruns.roundlogs import Round, RoundCall, RoundLog, replies, round_progress, round_view
from ...realruns.runfiles import read_file
from .cache import Progress, encode


# ---- runs read again -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSource:
    """Where a run that is not held in memory is read again from."""
    file: str
    kind: str
    named: bool
    log_path: str             # the run's round log path (one file may hold several runs)
    user_turns: str


@dataclass(frozen=True)
class Unheld:
    """A run not held in memory, as a work item carries it: where to read it
    and the digest its content must still have."""
    source: RunSource
    digest: str


def slim(log: RoundLog) -> RoundLog:
    """Only what the novelty rule reads: kind, status, result, segments, and
    the arguments (whose values echoed in a result are not evidence)."""
    return RoundLog("", "", {}, [Round(r.number, [RoundCall("", c.args, c.kind, c.status, c.result, c.segments)
                                                  for c in r.calls]) for r in log.rounds])


def digest_of(reps: Sequence[RoundLog]) -> str:
    """A run's key: a hash of what the novelty rule reads, reply by reply."""
    h = hashlib.blake2b(digest_size=20)
    for rep in reps:
        h.update(b"\x1ereply")
        for r in rep.rounds:
            h.update(b"\x1fround")
            for c in r.calls:
                h.update(json.dumps([c.kind, c.status, c.result, c.segments, c.args], ensure_ascii=False,
                                    sort_keys=True, default=str).encode())
    return h.hexdigest()


def read_again(refs: Sequence[Unheld]) -> list[tuple[list[RoundLog], list[RoundLog]]]:
    """(replies, full replies) of runs not held, each file read once; a run
    whose content changed since it was loaded is an error, not another verdict."""
    by_file: dict[tuple[str, str, bool], dict[str, RoundLog]] = {}
    out = []
    for ref in refs:
        src = ref.source
        key = (src.file, src.kind, src.named)
        if key not in by_file:
            by_file[key] = {rf.log.path: rf.log for rf in read_file(Path(src.file), src.kind, named=src.named)[0]}
        log = by_file[key].get(src.log_path)
        full = replies(log, src.user_turns) if log is not None else []
        reps = [slim(r) for r in full]
        if log is None or digest_of(reps) != ref.digest:
            raise UserInputError("the run changed while it was tuned on", file=src.file,
                                 expected="run files left as they are until the command ends")
        out.append((reps, full))
    return out


def progress_of(reps: Sequence[RoundLog], config: NoveltyConfig) -> Progress:
    """The expensive call: every reply of a run through a fresh tracker."""
    return [round_progress(rep, config) for rep in reps]


def _judging(config: NoveltyConfig) -> NoveltyConfig:
    """What a tracker's state depends on: every field but the two thresholds
    that only read a round's counts (RoundNovelty.progress)."""
    return dataclasses.replace(config, min_new_shingles=1, min_new_share=0.0)


def family_progress(log: RoundLog, configs: Sequence[NoveltyConfig]) -> list[list[tuple[str, bool]]]:
    """round_progress(log, c) for configs that differ only in min_new_shingles
    and min_new_share: one tracker judges and remembers each round, and each
    config reads the round's counts with its own thresholds."""
    tracker = NoveltyTracker(_judging(configs[0]))
    out: list[list[tuple[str, bool]]] = [[] for _ in configs]
    for rnd in log.rounds:
        view = round_view(rnd)
        if view.kind == "error":
            for got in out:
                got.append((view.kind, False))
            continue
        answered = classify_round(((call.kind, call.status) for call in view.calls), novelty_progress=False)[1]
        calls = judged_calls(view)
        if not calls:       # nothing judged: no new evidence, and nothing for the tracker to remember
            for got in out:
                got.append((view.kind, answered))
            continue
        # The round's results judged together: what judge_reads gives (NoveltyTracker.observe_round).
        novelty = tracker.observe_round([(c.status, c.result, c.segments, c.args) for _, c in calls])
        for got, c in zip(out, configs):
            got.append((view.kind, answered or novelty.progress_at(c.min_new_shingles, c.min_new_share)))
    return out


def shared_progress(reps: Sequence[RoundLog], configs: Sequence[NoveltyConfig]) -> list[Progress]:
    """progress_of(reps, c) for every config c, each reply judged under every
    config back to back, so that they share its normalized text and shingles,
    and configs apart only in thresholds share one tracker (family_progress)."""
    out: list[Progress] = [[] for _ in configs]
    families: dict[NoveltyConfig, list[int]] = {}
    for i, c in enumerate(configs):
        families.setdefault(_judging(c), []).append(i)
    with shared_work():
        for rep in reps:
            for members in families.values():
                for i, got in zip(members, family_progress(rep, [configs[i] for i in members])):
                    out[i].append(got)
    return out


Item = tuple[tuple[int, ...], list[int]]
"""A work item: (config indexes, run indexes), every config over every run."""


RunRef = Union[Sequence[RoundLog], Unheld]
"""A run as work carries it: its replies, or where to read them."""


def _resolved(runs: Sequence[RunRef]) -> list[Sequence[RoundLog]]:
    refs = [r for r in runs if isinstance(r, Unheld)]
    got = iter(read_again(refs))
    return [next(got)[0] if isinstance(r, Unheld) else r for r in runs]


def compute_chunk(configs: Sequence[NoveltyConfig], runs: Sequence[RunRef],
                  share: bool = True) -> list[list[list[str]]]:
    """Per run, per config: its progress, encoded (runs not held read here)."""
    runs = _resolved(runs)
    if share:
        return [[encode(p) for p in shared_progress(reps, configs)] for reps in runs]
    return [[encode(progress_of(reps, c)) for c in configs] for reps in runs]


_WORKER_RUNS: list[RunRef] = []


def _init_worker(runs: list[RunRef]) -> None:
    global _WORKER_RUNS
    _WORKER_RUNS = runs


def _pool_item(item: tuple[list[NoveltyConfig], list[int], bool]) -> list[list[list[str]]]:
    configs, idx, share = item
    return compute_chunk(configs, [_WORKER_RUNS[i] for i in idx], share)


Result = list[list[list[str]]]
Runner = Callable[[list[NoveltyConfig], list[RunRef], list[Item], bool], Iterator[tuple[int, Result]]]
"""Runs the items and yields (item index, its result) as each is done."""


def run_inline(configs, runs, items, share=True):
    for i, (cis, idx) in enumerate(items):
        yield i, compute_chunk([configs[ci] for ci in cis], [runs[r] for r in idx], share)


def run_pool(jobs: int) -> Runner:
    def run(configs, runs, items, share=True):
        if jobs <= 1 or len(items) <= 1:
            yield from run_inline(configs, runs, items, share)
            return
        with ProcessPoolExecutor(max_workers=min(jobs, len(items)), initializer=_init_worker,
                                 initargs=(runs,)) as pool:
            yield from enumerate(pool.map(_pool_item, [([configs[ci] for ci in cis], idx, share)
                                                       for cis, idx in items]))
    return run


def run_dask(scheduler: Any) -> Runner:
    """On a Dask distributed cluster: `scheduler` is its address (or a
    `distributed.Client`). Every run held in memory is scattered to the
    cluster once; a run not held goes as its `Unheld` reference and the
    worker reads it. The workers need this package importable."""
    def run(configs, runs, items, share=True):
        from distributed import Client, as_completed
        client = scheduler if isinstance(scheduler, Client) else Client(scheduler, set_as_default=False)
        try:
            held = sorted({i for _, idx in items for i in idx if not isinstance(runs[i], Unheld)})
            refs: dict[int, Any] = dict(zip(held, client.scatter([runs[i] for i in held]))) if held else {}
            jobs = {client.submit(compute_chunk, [configs[ci] for ci in cis], [refs.get(i, runs[i]) for i in idx],
                                  share, pure=False): n for n, (cis, idx) in enumerate(items)}
            for future, result in as_completed(jobs, loop=client.loop, with_results=True):
                yield jobs[future], result
        finally:
            if client is not scheduler:
                client.close()
    return run


def runner_for(jobs: int | None = None, scheduler: Any = None) -> tuple[Runner, str]:
    if scheduler is not None:
        return run_dask(scheduler), f"Dask cluster {scheduler if isinstance(scheduler, str) else 'client'}"
    jobs = jobs or os.cpu_count() or 1
    return run_pool(jobs), ("1 process" if jobs == 1 else f"{jobs} local processes")
