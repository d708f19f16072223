"""`imprint tune`: sweep patience and normalization over labelled runs.

Each run's per-round novelty is computed once per normalization
(`rounds.round_progress`); every patience value then only replays the
cheap counter (`rounds.apply_patience`). Runs come from `load_frames`
(traces and round logs alike); labels (`realruns.labels`) say which runs are
useful and where runs loop. A setting is scored by its premature stops on
useful runs and the rounds it lets labelled loops run before stopping.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig

from ..realruns.labels import Labels, RunLabel, judge
from ..realruns.rounds import PATIENCE, Round, RoundCall, RoundLog, apply_patience, round_progress
from .frames import Frames

DEFAULT_PATIENCE, DEFAULT_NORMALIZATION = PATIENCE.default, "default"   # the shipped settings: ties lean towards them


@dataclass
class RunRounds:
    run: str
    name: str
    path: str
    rounds: int
    replies: list[RoundLog]
    label: RunLabel | None = None


@dataclass
class Setting:
    normalization: str
    patience: int
    premature: int = 0
    premature_runs: list[str] = field(default_factory=list)
    rounds_lost: int = 0
    loop_rounds: int = 0
    loop_total: int = 0
    loops: int = 0
    loops_stopped: int = 0
    useful: int = 0
    stops: int = 0
    runs: int = 0

    @property
    def key(self) -> str:
        return f"patience {self.patience}, normalization {self.normalization}"

    def to_dict(self) -> dict:
        return asdict(self)


def runs_from_frames(frames: Frames, labels: Labels | None = None) -> list[RunRounds]:
    """Every run's rounds and calls, cut into replies, from the loader's tables."""
    calls: dict[str, dict[int, list[RoundCall]]] = {}
    tc = frames.tool_calls
    if not tc.empty:
        tc = tc[tc["status"] != "not_executed"]
        for r in tc[["run", "round", "tool", "arguments", "kind", "status", "text", "segments"]].itertuples(index=False):
            segs = r.segments if isinstance(r.segments, list) else None
            calls.setdefault(r.run, {}).setdefault(int(r.round), []).append(
                RoundCall(r.tool, r.arguments if isinstance(r.arguments, dict) else {}, r.kind, r.status,
                          r.text if isinstance(r.text, str) else "", segs))
    replies: dict[str, dict[int, list[int]]] = {}
    if not frames.rounds.empty:
        for r in frames.rounds[["run", "round", "reply"]].itertuples(index=False):
            replies.setdefault(r.run, {}).setdefault(int(r.reply), []).append(int(r.round))
    out = []
    for run in frames.runs[["run", "name", "path"]].itertuples(index=False):
        by_round = calls.get(run.run, {})
        by_reply = replies.get(run.run, {})
        numbers = sorted({n for ns in by_reply.values() for n in ns} | set(by_round))
        if not by_reply and numbers:
            by_reply = {1: numbers}
        logs = []
        for reply in sorted(by_reply):
            rnds = [Round(n, by_round.get(n, [])) for n in sorted(by_reply[reply])]
            logs.append(RoundLog(run.path, "", {}, rnds))
        label = labels.for_run(run.name, run.run, run.path) if labels is not None else None
        out.append(RunRounds(run.run, run.name, run.path, len(numbers), logs, label))
    return out


def progress_by_reply(run: RunRounds, config: NoveltyConfig) -> list[tuple[list[int], list[tuple[str, bool]]]]:
    """Per reply: its round numbers and (kind, progress) per round. The
    expensive part; once per normalization."""
    return [([r.number for r in log.rounds], round_progress(log, config)) for log in run.replies]


def stop_round(progress: list[tuple[list[int], list[tuple[str, bool]]]], patience: int) -> int | None:
    """The round where the rule first stops the run (None: never)."""
    for numbers, prog in progress:
        stop, _ = apply_patience(prog, patience)
        if stop is not None:
            return numbers[stop - 1]
    return None


def sweep(runs: Sequence[RunRounds], patiences: Sequence[int], normalizations: Sequence[str]) -> list[Setting]:
    results = []
    for norm in normalizations:
        cfg = NoveltyConfig(normalization=norm)
        progress = [(run, progress_by_reply(run, cfg)) for run in runs]
        for p in patiences:
            s = Setting(norm, p)
            for run, prog in progress:
                stop = stop_round(prog, p)
                s.runs += 1
                s.stops += stop is not None
                if run.label is None:
                    continue
                j = judge(run.label, stop, run.rounds)
                s.useful += run.label.useful
                s.premature += j.premature
                if j.premature:
                    s.premature_runs.append(f"{run.name}@{stop}<{run.label.should_not_stop_before}")
                s.rounds_lost += j.rounds_lost
                s.loop_rounds += j.loop_rounds
                s.loop_total += j.loop_total
                s.loops += j.loops
                s.loops_stopped += j.loops_stopped
            results.append(s)
    return results


def recommend(results: Sequence[Setting], max_premature: int = 0) -> Setting:
    """Fewest rounds inside loops among the settings with at most
    `max_premature` premature stops (else the fewest premature stops); ties
    go to fewer rounds lost, then to the setting nearest the shipped one."""
    ok = [s for s in results if s.premature <= max_premature]
    pool = ok or [s for s in results if s.premature == min(r.premature for r in results)]
    return min(pool, key=lambda s: (s.loop_rounds if ok else (s.premature, s.loop_rounds), s.rounds_lost,
                                    abs(s.patience - DEFAULT_PATIENCE), s.normalization != DEFAULT_NORMALIZATION,
                                    -NORMALIZATIONS.index(s.normalization)))


def tradeoff(results: Sequence[Setting], best: Setting) -> list[str]:
    """Sentences comparing the recommendation with its neighbours and the default."""
    by = {(s.normalization, s.patience): s for s in results}
    lines = [f"recommended: {best.key}: {best.premature} premature stop(s) on {best.useful} useful run(s), "
             f"{best.loop_rounds} of {best.loop_total} labelled loop rounds spent "
             f"({best.loops_stopped} of {best.loops} loops stopped inside), {best.stops} of {best.runs} runs stopped"]
    for other, why in [((best.normalization, best.patience - 1), "one less"),
                       ((best.normalization, best.patience + 1), "one more"),
                       ((DEFAULT_NORMALIZATION, DEFAULT_PATIENCE), "shipped default")]:
        s = by.get(other)
        if s is None or s is best:
            continue
        extra = f" ({', '.join(s.premature_runs[:5])}{'…' if len(s.premature_runs) > 5 else ''})" if s.premature_runs else ""
        lines.append(f"{why}: {s.key}: {s.premature} premature{extra}, {s.rounds_lost} useful round(s) lost, "
                     f"{s.loop_rounds} of {s.loop_total} loop rounds, {s.stops} stops")
    same = [n for n in NORMALIZATIONS if n != best.normalization and (n, best.patience) in by
            and (by[(n, best.patience)].premature, by[(n, best.patience)].loop_rounds) == (best.premature, best.loop_rounds)]
    if same:
        lines.append(f"normalization {', '.join(same)} score(s) the same at patience {best.patience} on these runs")
    return lines


def plot_curve(results: Sequence[Setting], best: Setting, path: Path, title: str = "") -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    styles = {"none": ("tab:gray", "o", ":", -0.15), "basic": ("tab:blue", "s", "--", -0.09),
              "default": ("tab:orange", "^", "-", -0.03), "logs": ("tab:green", "v", "-.", 0.03),
              "ocr": ("tab:purple", "D", ":", 0.09), "all": ("tab:red", "x", "--", 0.15)}
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, constrained_layout=True)
    for norm in NORMALIZATIONS:
        rows = sorted((s for s in results if s.normalization == norm), key=lambda s: s.patience)
        if not rows:
            continue
        color, marker, ls, dodge = styles[norm]
        xs = [s.patience + dodge for s in rows]  # side by side where normalizations score alike
        ax1.plot(xs, [s.premature for s in rows], color=color, marker=marker, ls=ls, label=norm, ms=5, alpha=0.85)
        share = [100 * s.loop_rounds / s.loop_total if s.loop_total else 0 for s in rows]
        ax2.plot(xs, share, color=color, marker=marker, ls=ls, label=norm, ms=5, alpha=0.85)
    for ax in (ax1, ax2):
        ax.axvline(best.patience, color="green", lw=1.2, alpha=0.6)
        ax.grid(alpha=0.3)
    useful = best.useful
    ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_ylabel(f"premature stops\n(of {useful} useful runs)")
    ax1.set_title(title or "Patience sweep: premature stops against rounds spent in loops")
    ax1.legend(title="normalization", fontsize=8)
    ax2.set_ylabel(f"loop rounds spent (%)\n(of {best.loop_total} labelled)")
    ax2.set_xlabel("patience (consecutive rounds without new evidence)")
    ax2.set_ylim(0, 105)
    ax2.set_xticks(sorted({s.patience for s in results}))
    ax1.annotate(f"recommended: {best.patience}, {best.normalization}", (best.patience, ax1.get_ylim()[1]),
                 xytext=(4, -12), textcoords="offset points", color="green", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
