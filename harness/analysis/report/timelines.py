"""The report's per-round panels, one per selected run: budget consumption
round by round, and the novelty timeline (new evidence, the patience
counter, writes, asks, errors, labels and the stop).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from . import plots
from ..frames.load import Frames


# ---- budget consumption per round -----------------------------------------------------------------
def plot_budget(frames: Frames, out: Path, selected: list[dict]) -> Path | None:
    if not selected:
        return None
    plt = plots.pyplot()
    fig, axes = plots.grid(len(selected), plt)
    for ax, run in zip(axes, selected):
        g = frames.rounds[frames.rounds["run"] == run["run"]].sort_values("round")
        budget = run.get("token_budget") or float("nan")
        x = g["round"].tolist()
        tok = (g["charged"] / budget * 100).tolist()
        timeout = run.get("timeout") or float("nan")
        # the deadline moves back by every wait for the user: research time used is t minus that start
        tim = ((g["t"] - (g["deadline"] - timeout)) / timeout * 100).tolist()
        ax.plot(x, tok, color="#c0392b", marker="o", ms=3, label="tokens charged (% of budget)")
        ax.plot(x, tim, color="#4a78b5", marker="s", ms=3, label="research time used (% of the timeout)")
        stop_round = run.get("stop_round")
        if stop_round is not None and not pd.isna(stop_round):
            ax.axvline(stop_round, color="black", lw=1.2, ls="--", label=f"stop: {run['stop_reason']}")
        req = run.get("budget_requested")
        if req and not pd.isna(req) and budget == budget:
            y = (float(run.get("charged") or 0) + float(req)) / budget * 100
            ax.scatter([(stop_round or x[-1]) + 1], [y], facecolors="none", edgecolors="#c0392b",
                       label=f"next reservation would reach {y:.0f}%", zorder=3)
        ax.axhline(100, color="#555", lw=0.8, ls=":")
        peak = max([v for v in tok + tim if v == v] + [100.0])
        ax.set_ylim(0, max(120.0, peak * 1.1))
        ax.set_xlim(0.5, max(x + [stop_round or 0]) + 1.5)
        ax.set_xlabel("round")
        ax.set_ylabel("budget used (%)")
        ax.set_title(f"{run['name']} ({run['provider']}, {run['policy']})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5, loc="upper left")
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle("Budget consumption per round: tokens charged and time used, with the stop")
    return plots.save(fig, out / "budget-per-round.png")


# ---- novelty timelines ----------------------------------------------------------------------------
def panel_titles(selected: list[dict]) -> list[str]:
    """A panel's name: a scenario's name, or the run id where two runs share a
    name; a round log's run id (its folder and stem: the same task is in
    several folders of runs, and a bare stem such as `88` says nothing)."""
    names = [str(r["name"]) for r in selected]
    titles = [str(r["run"]) if names.count(n) > 1 or r["source"] != "trace" else n for r, n in zip(selected, names)]
    return [t if titles.count(t) == 1 else f"{t} #{i + 1}" for i, t in enumerate(titles)]


def write_groups(rounds: Sequence[int], kinds: Sequence[str]) -> list[tuple[int, int]]:
    """Consecutive write rounds as (first, last) spans, so a run of writes gets one marker."""
    spans: list[tuple[int, int]] = []
    for r, kind in zip(rounds, kinds):
        if kind != "write":
            continue
        if spans and spans[-1][1] == r - 1:
            spans[-1] = (spans[-1][0], r)
        else:
            spans.append((r, r))
    return spans


def plot_novelty(frames: Frames, out: Path, selected: list[dict], labels: dict[str, Any] | None = None,
                 name: str = "novelty-timeline.png", title: str | None = None,
                 captions: dict[str, str] | None = None) -> Path | None:
    if not selected:
        return None
    plt = plots.pyplot()
    labels = labels or {}
    labelled = False
    fig, axes = plots.grid(len(selected), plt, height=3.3)
    if len(selected) == 1:
        fig.set_size_inches(8, 3.8)
    for ax, run, panel in zip(axes, selected, panel_titles(selected)):
        g = frames.rounds[frames.rounds["run"] == run["run"]].sort_values("round")
        x = g["round"].to_numpy()
        new = g["new_shingles"].fillna(0).to_numpy()
        colors = ["#4c9f70" if p else "#bbbbbb" for p in g["progress"]]
        ax.bar(x, new, color=colors, width=0.8)
        ax.set_ylabel("new evidence (shingles)")
        ax.set_xlabel("round")
        top = max(float(new.max()) if len(new) else 1.0, 1.0)
        ax.set_ylim(0, top * 1.3)
        # one marker per stretch of writes, and none closer than a 25th of the axis to the last
        gap, last = max(len(x), 1) / 14, None
        for a, b in write_groups(x.tolist(), g["kind"].tolist()):
            ax.axvspan(a - 0.45, b + 0.45, color="#4a78b5", alpha=0.15, lw=0)
            mid = (a + b) / 2
            if last is None or mid - last >= gap:
                ax.text(mid, top * 1.22, "W" if a == b else f"W×{b - a + 1}", ha="center", va="center",
                        fontsize=7, color="#4a78b5")
                last = mid
        label = labels.get(run["run"])
        if label is not None:
            labelled = True
            for a, b in label.loops:
                ax.axvspan(a - 0.5, b + 0.5, color="#c0392b", alpha=0.12, lw=0)
            if label.should_not_stop_before is not None:
                ax.axvline(label.should_not_stop_before + 0.5, color="#2e8b57", lw=1.4, ls="-.")
        for r, kind, errs in zip(x, g["kind"], g["errors"]):
            if kind == "ask":
                ax.text(r, top * 1.22, "?", ha="center", va="center", fontsize=8, color="#8e44ad")
            if errs:
                ax.plot([r], [top * 1.12], marker="x", color="#c0392b", ms=6, ls="none")
        ax2 = ax.twinx()
        ax2.step(x, g["patience_counter"], where="mid", color="#e67e22", lw=1.6)
        patience = g["patience"].dropna()
        if len(patience):
            ax2.axhline(float(patience.iloc[0]), color="#e67e22", ls=":", lw=1)
            # the counter may run past the patience after the stop (a replay goes on to the run's end)
            ax2.set_ylim(0, max(float(patience.iloc[0]), float(g["patience_counter"].max() or 0)) * 1.35)
        ax2.set_ylabel("patience counter", color="#e67e22")
        ax2.spines["right"].set_visible(True)
        stop_round = run.get("stop_round")
        stopped = stop_round is not None and not pd.isna(stop_round)
        if stopped:   # named in the title: a label in the plot collides with the write markers
            ax.axvline(stop_round + 0.5, color="black", lw=1.2, ls="--")
        what = (captions or {}).get(run["run"]) or (run["provider"] if run["source"] == "trace"
                                                    else "round log, replayed")
        stop = f"stop: {run['stop_reason']} at round {int(stop_round)}" if stopped else \
            f"stop: {run['stop_reason']}" if isinstance(run.get("stop_reason"), str) else "never stopped"
        ax.set_title(f"{panel}\n{what}; {stop}", fontsize=9)
        ax.xaxis.get_major_locator().set_params(integer=True)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color="#4c9f70", label="new shingles, a progress round"),
               Patch(color="#bbbbbb", label="new shingles, no progress"),
               Line2D([], [], color="#e67e22", lw=1.6, label="patience counter"),
               Line2D([], [], color="#e67e22", ls=":", label="patience"),
               Patch(color="#4a78b5", alpha=0.3, label="write rounds (W×n: n in a row)"),
               Line2D([], [], marker="x", color="#c0392b", ls="none", label="error in the round"),
               Line2D([], [], color="black", ls="--", label="stop")]
    if labelled:
        handles += [Line2D([], [], color="#2e8b57", ls="-.", label="label: useful until"),
                    Patch(color="#c0392b", alpha=0.25, label="label: a loop")]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=7.5, frameon=False)
    fig.suptitle(title or "Novelty timeline: new evidence per round, the patience counter (dotted: the patience), "
                          "write rounds, errors and the stop")
    return plots.save(fig, out / name)
