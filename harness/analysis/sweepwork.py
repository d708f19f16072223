"""The work of a sweep: a chunk of runs judged under some configs, inline,
on a local process pool or on a Dask cluster (`harness.analysis.sweep` plans
the items and keeps the results). A result is each run's progress under each
config, encoded (`progresscache.encode`), so that it crosses processes small.
"""
from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Sequence

from imprint_core.novelty import NoveltyConfig, NoveltyTracker, shared_work
from imprint_core.rounds import classify_round
from imprint_core.stoprules.builtin import judge_reads

from ..realruns.roundlogs import RoundLog, round_progress, round_view
from .progresscache import Progress, encode


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
        novelty = judge_reads(tracker, view)[2]
        for got, c in zip(out, configs):
            at = dataclasses.replace(novelty, min_new_shingles=c.min_new_shingles, min_new_share=c.min_new_share)
            progress = classify_round(((call.kind, call.status) for call in view.calls), novelty_progress=at.progress)[1]
            got.append((view.kind, bool(progress)))
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
