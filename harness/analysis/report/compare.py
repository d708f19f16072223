"""The report's "Stop rules compared" section, computed from the labelled
runs the report judges (the corpora it is given), as `imprint compare`
computes it, rather than read from a committed compare.json whose runs and
date are another's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..compare import Comparison, RuleChoice, compare, plot
from ..sweep.progress import Corpus, load_corpora


def corpora_of(judged: Sequence[Any], paths: Sequence[str | Path]) -> list[Corpus]:
    """One corpus per labels file of the judged runs, over the input paths
    that hold its runs (a run folder, a corpus folder), as `imprint compare
    --corpus PATH --labels FILE` would be given them."""
    roots = sorted({Path(p).resolve() for p in paths}, key=lambda r: -len(r.parts))   # the nearest first
    by: dict[str, set[str]] = {}
    for jr in judged:
        if not jr.label.file:
            continue
        where = Path(str(jr.row.path)).resolve()
        root = next((r for r in roots if where == r or where.is_relative_to(r)), None)
        if root is not None:
            by.setdefault(str(jr.label.file), set()).add(str(root))
    return [Corpus(sorted(v), f) for f, v in sorted(by.items())]


def comparison_of(judged: Sequence[Any], paths: Sequence[str | Path], out: Path, choices: Sequence[RuleChoice], *,
                  slack: int, user_turns: str = "reset") -> tuple[dict, str | None]:
    """`imprint compare`'s figures for `choices` (the command's default: every
    built-in, `DEFAULT_RULES`) over the judged runs' corpora (runs that
    record their outcome count too, as in `imprint compare`), as its
    compare.json holds them, and its plot written to `out`/compare.png
    (None: no run to compare)."""
    from ..sweep.cache import ProgressCache, default_cache_dir
    from ..sweep.stops import Split
    corpora = corpora_of(judged, paths)
    if not corpora:
        return {}, None
    runs, _ = load_corpora(corpora, user_turns, outcomes=True)
    if not runs:
        return {}, None
    comp: Comparison = compare(runs, choices, split=Split(0.3, 5, "imprint-tune"), slack=slack,
                               cache=ProgressCache(default_cache_dir()))
    image = out / "compare.png"
    plot(comp, image)
    import os
    command = "imprint compare " + " ".join(
        " ".join(f"--corpus {os.path.relpath(p)}" for p in c.paths) + f" --labels {c.labels}" for c in corpora)
    return comp.to_dict() | {"command": command, "decisions": []}, str(image)
