"""The loop recall no novelty setting can beat (`imprint tune`'s ceiling):
each run replayed with a perfect novelty judgement inside its labelled loops
and its shipped verdicts everywhere else. A loop missed even then is out of
reach of the novelty config; only the patience, or another rule, can catch it.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ...realruns.labels import LOOP_SLACK, Tally, judge
from ..sweep.cache import Progress
from ..sweep.progress import TuneRun, stop_rounds


CEILINGS = {
    "record": "every read round inside a labelled loop judged no progress; write rounds left out, as the record "
              "says",
    "writes count": "the same, and the write rounds inside a labelled loop counted as rounds without progress "
                    "(outside the record)",
}


def oracle_progress(progress: Progress, numbers: Sequence[Sequence[int]], loops: Sequence[tuple[int, int]],
                    writes_count: bool) -> Progress:
    """The run's verdicts with a perfect novelty judgement inside its labelled
    loops: no round there makes progress (and with `writes_count`, a write
    round there counts as a read round without progress). Outside the loops
    the verdicts stay as they are."""
    def inside(n: int) -> bool:
        return any(a <= n <= b for a, b in loops)

    out = []
    for rep, nums in zip(progress, numbers):
        row = []
        for (kind, made), n in zip(rep, nums):
            if inside(n):
                row.append(("read" if writes_count and kind == "write" else kind, False))
            else:
                row.append((kind, made))
        out.append(row)
    return out


def loop_ceiling(runs: Sequence[TuneRun], progress: Iterable[Progress], patiences: Sequence[int],
                 slack: int = LOOP_SLACK) -> list[dict[str, Any]]:
    """The most loop recall any novelty setting could give at each patience
    (`CEILINGS`): the shipped verdicts outside the labelled loops, no progress
    inside them. A loop the patience rule cannot reach even then (shorter than
    the patience, made of write rounds, or reset by progress just before it)
    is out of reach of every novelty setting. One row per (ceiling, corpus,
    patience), over all runs of both parts."""
    tallies: dict[tuple[str, str, int], Tally] = {}
    for run, prog in zip(runs, progress):     # one pass: `progress` may be read as it is decoded
        if not run.label.loops:
            continue
        for name in CEILINGS:
            oracle = oracle_progress(prog, run.numbers, run.label.loops, name == "writes count")
            stops = stop_rounds(oracle, run.numbers, patiences)
            for p in patiences:
                tallies.setdefault((name, run.corpus, p), Tally()).add(run.label, judge(run.label, stops[p],
                                                                                        run.rounds, slack))
    rows = []
    for name in CEILINGS:
        for (_, corpus, p), t in sorted(((k, t) for k, t in tallies.items() if k[0] == name),
                                        key=lambda kv: (kv[0][1], kv[0][2])):
            rows.append({"ceiling": name, "corpus": corpus, "patience": p, "loops": t.loops, "caught": t.caught,
                         "premature": t.premature, "useful_with_loops": t.useful})
    return rows
