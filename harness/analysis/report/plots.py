"""The report's PNG plots that compare providers and policies (matplotlib,
imported lazily, Agg backend): estimates against measurements, reserve
against prefix-refund, stop reasons and final modes, deadline overshoot;
and the helpers every plot of the report uses (`timelines` draws the
per-round panels with them).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import pandas as pd

from ...ratios import ratio_stats
from ..frames.load import Frames
from .inputs import STOP_ORDER, policy_pairs, unpaired
from .tables import secs, trace_runs

MODE_COLORS = {"answered": "#4c9f70", "synthesized": "#4a78b5", "fallback": "#e0a030", "cancelled": "#9a9a9a"}
DPI = 110


def pyplot():
    """matplotlib.pyplot on the Agg backend, in the report's style."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.spines.top": False,
                         "axes.spines.right": False, "figure.facecolor": "white"})
    return plt


def save(fig, path: Path) -> Path:
    """Write `fig` to `path` at the report's resolution and close it."""
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def provider_colors(providers: Sequence[str]) -> dict[str, str]:
    base = {"stub": "#7f7f7f"}
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
    out, i = {}, 0
    for p in sorted(providers):
        if p in base:
            out[p] = base[p]
        else:
            out[p] = palette[i % len(palette)]
            i += 1
    return out


def grid(n: int, plt, width: float = 5.2, height: float = 3.0):
    cols = 2 if n > 1 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, constrained_layout=True)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:n]


# ---- estimates against measurements ---------------------------------------------------------------
def plot_estimates(frames: Frames, out: Path, colors: dict[str, str]) -> tuple[Path | None, Path | None]:
    req = frames.measured_requests()
    req = req[req["ratio"].notna()]
    if req.empty:
        return None, None
    plt = pyplot()
    import matplotlib.ticker as ticker
    providers = sorted(req["provider"].unique())
    n = len(providers)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(4.2 * cols, 5.6), 3.9 * rows), squeeze=False,
                             constrained_layout=True)
    for ax, provider in zip(axes.flat, providers):
        g = req[req["provider"] == provider]
        for role, marker in (("coordinator", "o"), ("worker", "s"), ("final", "^")):
            gr = g[g["role"] == role]
            if not gr.empty:
                ax.scatter(gr["measured_prompt"], gr["estimated"], s=16, alpha=0.6, marker=marker,
                           color=colors.get(provider), label=f"{role} ({len(gr)})", edgecolors="none")
        lo = max(1.0, float(min(g["measured_prompt"].min(), g["estimated"].min())) * 0.8)
        hi = float(max(g["measured_prompt"].max(), g["estimated"].max())) * 1.25
        ax.plot([lo, hi], [lo, hi], color="black", lw=1, ls="--", label="y = x (exact)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        for axis in (ax.xaxis, ax.yaxis):  # plain 1-2-5 labels: matplotlib's minor labels overlap under a decade
            axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel("measured prompt tokens (provider)")
        ax.set_ylabel("estimated prompt tokens (ours)")
        ax.set_title(f"{provider}: median est./meas. {ratio_stats(g['ratio']).median:.2f}")
        ax.text(0.97, 0.04, "above the line: over-count\nbelow: under-count", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=7, color="#555")
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3, which="both")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle("Estimated against measured prompt tokens")
    scatter = save(fig, out / "estimates-scatter.png")

    fig, axes = plt.subplots(1, n, figsize=(max(4.2 * n, 5.5), 3.4), squeeze=False, constrained_layout=True)
    for ax, provider in zip(axes.flat, providers):
        r = req.loc[req["provider"] == provider, "ratio"]
        st = ratio_stats(r)
        lo, hi = min(st.lowest, 0.95), max(st.highest, 1.05)
        bins = 30 if r.nunique() > 1 else 5
        ax.hist(r, bins=bins, range=(lo, hi), color=colors.get(provider), alpha=0.85)
        ax.axvline(1.0, color="black", ls="--", lw=1, label="exact")
        ax.axvline(st.median, color="#c0392b", lw=1.2, label=f"median {st.median:.3f}")
        ax.axvline(st.p95, color="#c0392b", lw=1, ls=":", label=f"p95 {st.p95:.3f}")
        ax.set_xlabel("estimated / measured (below 1: under-count)")
        ax.set_ylabel("requests")
        ax.set_title(f"{provider} ({st.count} requests, {st.under:.0%} under-counted)")
        ax.legend(fontsize=7)
    fig.suptitle("Estimate / measurement per request")
    return scatter, save(fig, out / "estimates-ratio.png")


# ---- reserve against prefix-refund ----------------------------------------------------------------
def plot_policies(frames: Frames, out: Path) -> tuple[Path | None, list[str], pd.DataFrame]:
    pairs = policy_pairs(frames)
    notes: list[str] = []
    alone = unpaired(frames)
    if alone:
        notes.append("Not paired, as no run of the same scenario under prefix-refund is among the inputs: "
                     + ", ".join(alone) + ".")
    if not pairs:
        runs = trace_runs(frames)
        have = sorted(runs["policy"].dropna().unique())
        notes.insert(0, "No scenario ran under both policies on one provider"
                     + (f" (policies present: {', '.join(have)})." if have else "."))
        return None, notes, pd.DataFrame()
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator
    pairs = pairs[:3]
    fig, axes = plt.subplots(len(pairs), 2, figsize=(11, 3.6 * len(pairs)), squeeze=False, constrained_layout=True)
    req = frames.requests
    table = []
    shared_all = True
    for row, (a, b, how) in zip(axes, pairs):
        tops = []
        for ax, run in zip(row, (a, b)):
            r = req[(req["run"] == run["run"]) & (req["role"] != "final")].reset_index(drop=True)
            x = range(1, len(r) + 1)
            res, chg, ref = r["reserved"].cumsum(), r["charged"].cumsum(), r["refunded"].cumsum()
            ax.plot(x, res, color="#4a78b5", lw=2, label="reserved")
            ax.plot(x, chg, color="#c0392b", lw=2, ls="--", label="charged")
            ax.plot(x, ref, color="#4c9f70", lw=1.5, label="refunded")
            top = float(res.max() if len(res) else 0)
            budget = run.get("token_budget")
            # a budget far above what the run used would flatten its curves: name it instead of drawing it
            if budget and not pd.isna(budget):
                if budget <= 3 * max(top, 1.0):
                    ax.axhline(budget, color="black", lw=1, ls=":", label=f"budget {int(budget):,}")
                    top = max(top, float(budget))
                else:
                    ax.plot([], [], color="black", lw=1, ls=":", label=f"budget {int(budget):,} (off the scale)")
            tops.append(top)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))   # requests are counted, never halved
            stop = run.get("stop_reason")
            ax.set_title(f"{run['policy']}: {run['name']} ({run['provider']})\n{len(r)} requests, charged "
                         f"{int(run['charged'] or 0):,} of {int(run['reserved'] or 0):,} reserved; stop: {stop}")
            ax.set_xlabel("research request")
            ax.set_ylabel("tokens (cumulative)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
            table.append({"provider": run["provider"], "policy": run["policy"], "scenario": run["name"],
                          "requests": int(run["requests"] or 0), "reserved": int(run["reserved"] or 0),
                          "charged": int(run["charged"] or 0), "refunded": int(run["refunded"] or 0),
                          "stop": stop, "matched by": how})
        # one y scale for a pair of the same script, so the two policies compare at a glance; runs of
        # different scripts, or scales so far apart that one panel would be a flat line, each get their own
        shared = max(tops) <= 3 * max(min(tops), 1.0)
        shared_all &= shared
        for ax, top in zip(row, tops):
            ax.set_ylim(0, (max(tops) if shared else top) * 1.08 or 1)
    fig.suptitle("Reserved, charged and refunded tokens over a run: reserve against prefix-refund"
                 + (" (same y scale)" if shared_all else " (each panel on its own y scale: mind the axes)"))
    return save(fig, out / "policy-compare.png"), notes, pd.DataFrame(table)


# ---- stop reasons and final modes -----------------------------------------------------------------
def plot_stops(frames: Frames, out: Path) -> Path | None:
    runs = trace_runs(frames)
    if runs.empty:
        return None
    plt = pyplot()
    providers = sorted(runs["provider"].dropna().unique())
    reasons = [r for r in STOP_ORDER if r in set(runs["stop_reason"])] + \
        sorted(set(runs["stop_reason"].dropna()) - set(STOP_ORDER))
    modes = [m for m in MODE_COLORS if m in set(runs["final_mode"])] + \
        sorted(set(runs["final_mode"].dropna()) - set(MODE_COLORS))
    fig, axes = plt.subplots(1, len(providers), figsize=(max(4.6 * len(providers), 6), 0.5 * len(reasons) + 1.8),
                             squeeze=False, constrained_layout=True, sharey=True)
    for ax, provider in zip(axes.flat, providers):
        g = runs[runs["provider"] == provider]
        left = [0] * len(reasons)
        for mode in modes:
            counts = [int(((g["stop_reason"] == r) & (g["final_mode"] == mode)).sum()) for r in reasons]
            ax.barh(reasons, counts, left=left, color=MODE_COLORS.get(mode, "#666"), label=mode)
            for i, c in enumerate(counts):
                if c:
                    ax.text(left[i] + c / 2, i, str(c), ha="center", va="center", fontsize=7, color="white")
            left = [a + b for a, b in zip(left, counts)]
        ax.invert_yaxis()
        ax.set_xlabel("runs")
        ax.set_title(f"{provider} ({len(g)} runs)")
        ax.legend(title="final mode", fontsize=7, title_fontsize=7, loc="lower right")
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle("Stop reasons (rows) and final modes (colours) across all scenarios")
    return save(fig, out / "stops.png")


# ---- deadline overshoot ---------------------------------------------------------------------------
def plot_overshoot(frames: Frames, out: Path, colors: dict[str, str]) -> Path | None:
    runs = trace_runs(frames)
    if runs.empty:
        return None
    plt = pyplot()
    providers = sorted(runs["provider"].dropna().unique())
    tc = frames.tool_calls[(frames.tool_calls["source"] == "trace") & frames.tool_calls["after_deadline"].astype(bool)
                           & frames.tool_calls["run"].isin(runs["run"])]
    fig, ax = plt.subplots(figsize=(max(2.6 * len(providers) + 3, 7.5), 3.8), constrained_layout=True)
    for i, provider in enumerate(providers):
        g = runs[runs["provider"] == provider]
        over = g["overshoot"].fillna(0).to_numpy()
        jitter = [((k * 7919) % 101 / 100 - 0.5) * 0.16 for k in range(len(over))]
        ax.scatter([i - 0.15 + j for j in jitter], over, s=22, alpha=0.7, color=colors.get(provider),
                   label="run: research overshoot at the stop" if i == 0 else None, edgecolors="none")
        for name, v, j in sorted(zip(g["name"], over, jitter), key=lambda z: -z[1])[:4]:
            if v > 0:
                ax.annotate(str(name), (i - 0.15 + j, v), xytext=(-6, 0), textcoords="offset points", ha="right",
                            va="center", fontsize=6.5, color="#444")
        t = tc[tc["provider"] == provider]
        if len(t):
            ax.scatter([i + 0.2] * len(t), t["overrun"].fillna(0), marker="D", s=26, facecolors="none",
                       edgecolors=colors.get(provider), label="tool call finished after the deadline" if i == 0 else None)
            for tool, v, name in sorted(zip(t["tool"], t["overrun"].fillna(0), t["name"]), key=lambda z: -z[1])[:4]:
                ax.annotate(f"{tool}", (i + 0.2, v), xytext=(6, 0), textcoords="offset points", ha="left",
                            va="center", fontsize=6.5, color="#444")
        worst = float(over.max()) if len(over) else 0.0
        ax.annotate(f"max {secs(worst):g} s\n{int((over > 0).sum())}/{len(over)} runs past",
                    (i, worst), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=7.5)
    ax.set_xticks(range(len(providers)), providers)
    ax.set_xlim(-0.6, len(providers) - 0.4)
    ax.set_ylabel("seconds past the research deadline")
    top = max(float(runs["overshoot"].fillna(0).max()), float(tc["overrun"].fillna(0).max()) if len(tc) else 0.0, 1.0)
    ax.set_ylim(-0.05 * top, top * 1.35)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Deadline overshoot per provider (0 for runs that stopped in time)")
    return save(fig, out / "overshoot.png")
