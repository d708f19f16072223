"""The work of a sweep: a chunk of runs judged under some configs, inline,
on a local process pool or on a Dask cluster (`harness.analysis.sweep` plans
the items and keeps the results). A result is each run's progress under each
config, encoded (`progresscache.encode`), so that it crosses processes small.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

from imprint_core.novelty import NoveltyConfig, shared_work

from ..realruns.roundlogs import RoundLog, round_progress
from .progresscache import Progress, encode

def progress_of(reps: Sequence[RoundLog], config: NoveltyConfig) -> Progress:
    """The expensive call: every reply of a run through a fresh tracker."""
    return [round_progress(rep, config) for rep in reps]


def shared_progress(reps: Sequence[RoundLog], configs: Sequence[NoveltyConfig]) -> list[Progress]:
    """progress_of(reps, c) for every config c, each reply judged under every
    config back to back, so that they share its normalized text and shingles."""
    out: list[Progress] = [[] for _ in configs]
    with shared_work():
        for rep in reps:
            for got, config in zip(out, configs):
                got.append(round_progress(rep, config))
    return out


Item = tuple[tuple[int, ...], list[int]]
"""A work item: (config indexes, run indexes), every config over every run."""


def compute_chunk(configs: Sequence[NoveltyConfig], runs: Sequence[Sequence[RoundLog]],
                   share: bool = True) -> list[list[list[str]]]:
    """Per run, per config: its progress, encoded."""
    if share:
        return [[encode(p) for p in shared_progress(reps, configs)] for reps in runs]
    return [[encode(progress_of(reps, c)) for c in configs] for reps in runs]


_WORKER_RUNS: list[list[RoundLog]] = []


def _init_worker(runs: list[list[RoundLog]]) -> None:
    global _WORKER_RUNS
    _WORKER_RUNS = runs


def _pool_item(item: tuple[list[NoveltyConfig], list[int], bool]) -> list[list[list[str]]]:
    configs, idx, share = item
    return compute_chunk(configs, [_WORKER_RUNS[i] for i in idx], share)


Runner = Callable[[list[NoveltyConfig], list[list[RoundLog]], list[Item], bool], list[list[list[list[str]]]]]


def run_inline(configs, runs, items, share=True):
    return [compute_chunk([configs[ci] for ci in cis], [runs[i] for i in idx], share) for cis, idx in items]


def run_pool(jobs: int) -> Runner:
    def run(configs, runs, items, share=True):
        if jobs <= 1 or len(items) <= 1:
            return run_inline(configs, runs, items, share)
        with ProcessPoolExecutor(max_workers=min(jobs, len(items)), initializer=_init_worker,
                                 initargs=(runs,)) as pool:
            return list(pool.map(_pool_item, [([configs[ci] for ci in cis], idx, share) for cis, idx in items]))
    return run


def run_dask(scheduler: Any) -> Runner:
    """On a Dask distributed cluster: `scheduler` is its address (or a
    `distributed.Client`). Every run is scattered to the cluster once; the
    workers need this package importable."""
    def run(configs, runs, items, share=True):
        from distributed import Client
        client = scheduler if isinstance(scheduler, Client) else Client(scheduler, set_as_default=False)
        try:
            needed = sorted({i for _, idx in items for i in idx})
            futures = dict(zip(needed, client.scatter([runs[i] for i in needed])))
            jobs = [client.submit(compute_chunk, [configs[ci] for ci in cis], [futures[i] for i in idx], share,
                                  pure=False) for cis, idx in items]
            return client.gather(jobs)
        finally:
            if client is not scheduler:
                client.close()
    return run


def runner_for(jobs: int | None = None, scheduler: Any = None) -> tuple[Runner, str]:
    if scheduler is not None:
        return run_dask(scheduler), f"Dask cluster {scheduler if isinstance(scheduler, str) else 'client'}"
    jobs = jobs or os.cpu_count() or 1
    return run_pool(jobs), ("1 process" if jobs == 1 else f"{jobs} local processes")
