"""`imprint report`: a self-contained HTML page, a Markdown summary and PNG
plots from traces (and round logs), all read through `frames.load_frames`.

The plots answer the record's questions: do the token estimates match what
providers measure; what do `reserve` and `prefix-refund` charge for the same
script; how runs spend their token and time budgets round by round; how
novelty and patience evolve up to the stop; how runs stop and end; how far
they overshoot the deadline.
"""
from __future__ import annotations

import html
import json
import math
from glob import escape as glob_escape
import os
import re
import string
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from imprint_core.counting import COUNTED_MODES

from ..ratios import ratio_stats
from .frames import Frames
from .token_overruns import token_overruns

PLOT_NAMES = ("accuracy-timelines.png", "compare.png", "estimates-scatter.png", "estimates-ratio.png", "policy-compare.png", "budget-per-round.png",
              "novelty-timeline.png", "stops.png", "overshoot.png")
STOP_ORDER = ["answered", "no_progress", "token_budget", "time_budget", "context_full", "cancelled"]
MODE_COLORS = {"answered": "#4c9f70", "synthesized": "#4a78b5", "fallback": "#e0a030", "cancelled": "#9a9a9a"}
DPI = 110


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "axes.titlesize": 10, "axes.spines.top": False,
                         "axes.spines.right": False, "figure.facecolor": "white"})
    return plt


def _save(fig, path: Path) -> Path:
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


@dataclass
class Section:
    title: str
    intro: str = ""
    image: str | None = None
    alt: str = ""
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    links: list[tuple[str, str | None, str]] = field(default_factory=list)   # (label, href, text after it)
    figures_first: bool = True     # False: the tables (the figures a reader came for) above the image

    @property
    def empty(self) -> bool:
        return not (self.image or self.tables or self.notes or self.links)


# ---- 0. the stop rule's accuracy on labelled runs --------------------------------------------------
def accuracy_table(judged: Sequence[Any]) -> pd.DataFrame:
    """Per corpus (labels file): premature stops on useful runs and labelled
    loops caught, from the gate's judged runs."""
    from ..realruns.labels import Tally
    tallies: dict[str, Tally] = {}
    failing: dict[str, int] = {}
    for jr in judged:
        tallies.setdefault(jr.source, Tally()).add(jr.label, jr.judgement)
        failing[jr.source] = failing.get(jr.source, 0) + (not jr.holds)
    rows = []
    for name, t in sorted(tallies.items()):
        rows.append({"corpus": name, "labelled runs": t.runs,
                     "premature stops": f"{t.premature} of {t.useful} useful runs" if t.useful else "no useful run",
                     "loops caught": f"{t.caught} of {t.loops} ({t.caught / t.loops:.0%})" if t.loops else "no loop",
                     "runs that fail": failing[name]})
    return pd.DataFrame(rows)


def failing_runs(judged: Sequence[Any]) -> list[Any]:
    """The judged runs whose label does not hold: premature stops first, then
    missed loops, corpus by corpus."""
    bad = [jr for jr in judged if not jr.holds]
    return sorted(bad, key=lambda jr: (jr.source, not jr.judgement.premature))


def _spread(runs: list[Any], limit: int) -> list[Any]:
    """Up to `limit` runs taken corpus by corpus in turn, premature stops before missed loops."""
    by: dict[str, list[Any]] = {}
    for jr in runs:
        by.setdefault(jr.source, []).append(jr)
    out: list[Any] = []
    while len(out) < limit and any(by.values()):
        for name in sorted(by):
            if by[name] and len(out) < limit:
                out.append(by[name].pop(0))
    return out


def _href(path: Any, out: Path) -> str | None:
    """A link from the report to a run's file. A raw trajectory converted in
    memory is named as its round log would be (x.jsonl): link the raw file
    beside it (x.traj.json.gz), or the file of many runs it came from."""
    if not path or (isinstance(path, float) and math.isnan(path)):
        return None
    p = Path(str(path))
    if not p.is_file():
        beside = sorted(q for q in p.parent.glob(glob_escape(p.stem) + ".*") if q.is_file())
        p = beside[0] if beside else next((a for a in p.parents if a.is_file()), p)
    if not p.is_file():
        return None
    return Path(os.path.relpath(p.resolve(), out.resolve())).as_posix()


def accuracy_section(frames: Frames, judged: Sequence[Any], out: Path, rule: str, max_runs: int) -> Section:
    bad = failing_runs(judged)
    shown = _spread(bad, max_runs)
    labels = {jr.row.run: jr.label for jr in judged}
    path = plot_novelty(frames, out, [frames.runs[frames.runs["run"] == jr.row.run].iloc[0].to_dict() for jr in shown],
                        labels=labels, name="accuracy-timelines.png",
                        captions={jr.row.run: f"{jr.source}, " + ("premature stop" if jr.judgement.premature
                                                                   else "loop missed") for jr in shown},
                        title="Runs the stop rule got wrong: new evidence per round, the patience counter, the "
                              "label (green: useful until; red: a loop) and the stop")
    s = Section("Stop rule accuracy",
                "Every labelled run judged against its label, as `imprint check` judges it: a premature stop is a "
                "no-progress stop before the round the run was labelled useful until; a loop is caught by a stop "
                f"from its first round to a round or so after its last. {rule}".strip(), path,
                "Novelty timelines of runs the stop rule got wrong, with their labels", figures_first=False)
    s.tables.append(("per corpus", accuracy_table(judged)))
    plotted = {jr.row.run for jr in shown}
    for jr in bad:
        text = "; ".join(jr.problems()) + (" (plotted below)" if jr.row.run in plotted else "")
        s.links.append((f"{jr.source}: {jr.row.run}", _href(jr.row.path, out), text))
    if not bad:
        s.notes.append(f"Every one of the {len(judged)} labelled run(s) holds.")
    return s


# ---- 1. estimates against measurements --------------------------------------------------------------
def estimate_stats(frames: Frames) -> pd.DataFrame:
    req = frames.measured_requests()
    req = req[req["ratio"].notna()]
    rows = []
    for provider, g in req.groupby("provider"):
        lo, hi = g.loc[g["ratio"].idxmin()], g.loc[g["ratio"].idxmax()]
        st = ratio_stats(g["ratio"])
        rows.append({
            "provider": provider, "requests": st.count, "median": round(st.median, 3), "p95": round(st.p95, 3),
            "under-counts": f"{st.under:.1%}",
            "worst under-count": f"{lo['ratio']:.3f} ({int(lo['estimated'])} est. / {int(lo['measured_prompt'])} meas., "
                                 f"{lo['scenario']})",
            "worst over-count": f"{hi['ratio']:.3f} ({int(hi['estimated'])} est. / {int(hi['measured_prompt'])} meas., "
                                f"{hi['scenario']})"})
    return pd.DataFrame(rows)


def counting_mode_stats(frames: Frames) -> pd.DataFrame:
    """Issue 14: every counting mode against the same measurements, per
    provider, side by side. Each request records the figure of every mode
    its run could count (`estimates` in the trace); a calibrated figure
    exists from a session's second measured request on (the first has
    nothing to learn from). `budget` names the modes the budget counted
    with on these requests; `reconciled` the requests settled from usage."""
    req = frames.measured_requests()
    rows = []
    for provider, g in req.groupby("provider"):
        if not any(g[f"est_{m}"].notna().any() for m in COUNTED_MODES):
            continue
        used = sorted(str(u) for u in g["counting_used"].dropna().unique())
        for mode in COUNTED_MODES:
            est = g[f"est_{mode}"]
            ok = est.notna()
            if not ok.any():
                continue
            st = ratio_stats(est[ok] / g.loc[ok, "measured_prompt"])
            rows.append({"provider": provider, "mode": mode, "requests": int(ok.sum()),
                         "median": round(st.median, 3), "p95": round(st.p95, 3),
                         "under-counts": f"{st.under:.1%}", "exact": f"{st.exact:.0%}",
                         "budget used it": "yes" if mode in used else "",
                         "reconciled": int(g.loc[ok, "reconciled"].fillna(False).astype(bool).sum())})
    return pd.DataFrame(rows)


def plot_estimates(frames: Frames, out: Path, colors: dict[str, str]) -> tuple[Path | None, Path | None]:
    req = frames.measured_requests()
    req = req[req["ratio"].notna()]
    if req.empty:
        return None, None
    plt = _plt()
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
    scatter = _save(fig, out / "estimates-scatter.png")

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
    return scatter, _save(fig, out / "estimates-ratio.png")


# ---- 2. reserve against prefix-refund ---------------------------------------------------------------
_POLICY_WORDS = re.compile(r"(^|[-_])(policy|reserve|prefix|refund|prefix-refund)(?=$|[-_])")


def policy_pairs(frames: Frames) -> list[tuple[dict, dict, str]]:
    """(reserve run, prefix-refund run, how matched) per provider: runs of
    the same question and provider under both policies; failing that, runs
    whose names match once the policy words are taken out."""
    runs = frames.runs[(frames.runs["source"] == "trace") & frames.runs["policy"].notna()]
    pairs = []
    for provider, g in runs.groupby("provider"):
        found = None
        best_key = None
        for key_name, keyfn in (("the same question", lambda r: r["question"]),
                                ("matching names", lambda r: _POLICY_WORDS.sub("", str(r["name"])))):
            groups: dict[Any, dict[str, list[dict]]] = {}
            for r in g.to_dict("records"):
                groups.setdefault(keyfn(r), {}).setdefault(r["policy"], []).append(r)
            for key, by in groups.items():
                for a in by.get("reserve", []):
                    for b in by.get("prefix-refund", []):
                        score = (_POLICY_WORDS.sub("", str(a["name"])) == _POLICY_WORDS.sub("", str(b["name"])),
                                 a.get("token_budget") == b.get("token_budget"),
                                 "policy" in str(a["name"]) + str(b["name"]),
                                 (a["requests"] or 0) + (b["requests"] or 0))
                        if best_key is None or score > best_key:
                            best_key, found = score, (a, b, key_name)
            if found:
                break
        if found:
            pairs.append(found)
    return pairs


def plot_policies(frames: Frames, out: Path) -> tuple[Path | None, list[str], pd.DataFrame]:
    pairs = policy_pairs(frames)
    notes: list[str] = []
    runs = frames.runs[frames.runs["source"] == "trace"]
    if not pairs:
        have = sorted(runs["policy"].dropna().unique())
        notes.append("No scenario ran under both policies on one provider"
                     + (f" (policies present: {', '.join(have)})" if have else "")
                     + ("; showing one run per policy instead." if len(have) == 2 else "."))
        if len(have) == 2:
            a = runs[runs["policy"] == "reserve"].sort_values("requests").iloc[-1].to_dict()
            b = runs[runs["policy"] == "prefix-refund"].sort_values("requests").iloc[-1].to_dict()
            pairs = [(a, b, "not matched: different scenarios")]
        else:
            return None, notes, pd.DataFrame()
    plt = _plt()
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
        shared = how != "not matched: different scenarios" and max(tops) <= 3 * max(min(tops), 1.0)
        shared_all &= shared
        for ax, top in zip(row, tops):
            ax.set_ylim(0, (max(tops) if shared else top) * 1.08 or 1)
    fig.suptitle("Reserved, charged and refunded tokens over a run: reserve against prefix-refund"
                 + (" (same y scale)" if shared_all else " (each panel on its own y scale: mind the axes)"))
    return _save(fig, out / "policy-compare.png"), notes, pd.DataFrame(table)


# ---- selections ------------------------------------------------------------------------------------------
def select_runs(frames: Frames, limit: int, chosen: Sequence[str] = (), purpose: str = "budget") -> list[dict]:
    """Runs worth a panel: the chosen ones, else a spread of stop reasons,
    providers, writes, errors and asks."""
    rounds = frames.rounds
    has_rounds = set(rounds["run"].unique())
    runs = frames.runs[frames.runs["run"].isin(has_rounds)]
    if purpose == "budget":
        runs = runs[runs["source"] == "trace"]
    recs = runs.to_dict("records")
    if chosen:
        picked = [r for c in chosen for r in recs if c in (r["run"], r["name"])]
        return picked[:limit] if picked else []
    by_run = {k: g for k, g in rounds.groupby("run")}
    def feats(r: dict) -> dict:
        g = by_run[r["run"]]
        use = 0.0
        if r["source"] == "trace":
            last = g.iloc[-1]
            tokens = (last["charged"] or 0) / r["token_budget"] if r.get("token_budget") else 0.0
            timeout = r.get("timeout") or 0
            used = (last["t"] - (last["deadline"] - timeout)) / timeout if timeout and pd.notna(last["t"]) else 0.0
            use = max(float(tokens or 0), float(used or 0))
        return {"writes": int((g["kind"] == "write").sum()), "errors": int((g["errors"] > 0).sum()),
                "asks": int((g["kind"] == "ask").sum()), "rounds": len(g), "use": use}
    f = {r["run"]: feats(r) for r in recs}
    picked: list[dict] = []

    def take(cands: list[dict], key: Callable[[dict], Any]) -> None:
        cands = [c for c in cands if c["run"] not in {p["run"] for p in picked}]
        if purpose == "novelty":  # another script rather than the same one twice
            fresh = [c for c in cands if c["source"] != "trace" or c["question"] not in {p["question"] for p in picked}]
            cands = fresh or cands
        if cands and len(picked) < limit:
            picked.append(max(cands, key=key))

    if purpose == "budget":
        def spend(r: dict) -> tuple:  # runs of several rounds that use much of a budget read best
            return (f[r["run"]]["rounds"] > 1, f[r["run"]]["use"], f[r["run"]]["rounds"])
        for reason in STOP_ORDER:
            take([r for r in recs if r["stop_reason"] == reason and r["provider"] != "stub"], spend)
        for reason in STOP_ORDER:
            take([r for r in recs if r["stop_reason"] == reason], spend)
    else:
        np_runs = [r for r in recs if r["stop_reason"] == "no_progress"]
        take([r for r in np_runs if f[r["run"]]["writes"]], lambda r: f[r["run"]]["writes"])
        take([r for r in np_runs if f[r["run"]]["errors"]], lambda r: f[r["run"]]["errors"])
        take([r for r in recs if f[r["run"]]["asks"]], lambda r: f[r["run"]]["rounds"])
        take([r for r in recs if r["source"] == "trace" and r["provider"] != "stub"], lambda r: f[r["run"]]["rounds"])
        take([r for r in recs if r["source"] == "roundlog" and r["stop_reason"] == "no_progress"],
             lambda r: f[r["run"]]["rounds"])
        take(np_runs, lambda r: f[r["run"]]["rounds"])
        take([r for r in recs if r["stop_reason"] != "no_progress"], lambda r: f[r["run"]]["rounds"])
    take(recs, lambda r: f[r["run"]]["rounds"])
    while len(picked) < limit:
        before = len(picked)
        take(recs, lambda r: f[r["run"]]["rounds"])
        if len(picked) == before:
            break
    return picked


def _grid(n: int, plt, width: float = 5.2, height: float = 3.0):
    cols = 2 if n > 1 else 1
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, constrained_layout=True)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:n]


# ---- 3. budget consumption per round ---------------------------------------------------------------------------
def plot_budget(frames: Frames, out: Path, selected: list[dict]) -> Path | None:
    if not selected:
        return None
    plt = _plt()
    fig, axes = _grid(len(selected), plt)
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
    return _save(fig, out / "budget-per-round.png")


# ---- 4. novelty timelines ------------------------------------------------------------------------------------------
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
    plt = _plt()
    labels = labels or {}
    labelled = False
    fig, axes = _grid(len(selected), plt, height=3.3)
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
    return _save(fig, out / name)


# ---- 5. stop reasons and final modes --------------------------------------------------------------------
def stop_table(frames: Frames) -> pd.DataFrame:
    runs = frames.runs[frames.runs["source"] == "trace"]
    if runs.empty:
        return pd.DataFrame()
    t = pd.crosstab([runs["provider"], runs["stop_reason"].fillna("(none)")], runs["final_mode"].fillna("(none)"))
    t = t.reset_index()
    t.columns.name = None
    return t


def plot_stops(frames: Frames, out: Path) -> Path | None:
    runs = frames.runs[frames.runs["source"] == "trace"]
    if runs.empty:
        return None
    plt = _plt()
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
    return _save(fig, out / "stops.png")


# ---- 6. deadline overshoot -----------------------------------------------------------------------------------------
def _secs(v: float) -> float:
    """Seconds as the overshoot table and plot both show them (to the hundredth)."""
    return round(v, 2)


def overshoot_table(frames: Frames) -> pd.DataFrame:
    runs = frames.runs[frames.runs["source"] == "trace"]
    tc = frames.tool_calls[(frames.tool_calls["source"] == "trace") & frames.tool_calls["after_deadline"].astype(bool)]
    rows = []
    for provider, g in runs.groupby("provider"):
        timed = g[g["stop_reason"] == "time_budget"]
        over = g["overshoot"].fillna(0)
        t = tc[tc["provider"] == provider]
        worst = g.loc[over.idxmax()] if len(g) and over.max() > 0 else None
        rows.append({"provider": provider, "runs": len(g), "time stops": len(timed),
                     "past the deadline": int((over > 0).sum()),
                     "median (s)": _secs(float(over[over > 0].median())) if (over > 0).any() else 0.0,
                     "largest (s)": _secs(float(over.max())) if len(over) else 0.0,
                     "largest in": worst["name"] if worst is not None else "-",
                     "late calls": len(t),
                     "largest call overrun (s)": round(float(t["overrun"].max()), 2) if len(t) and t["overrun"].notna().any() else 0.0})
    return pd.DataFrame(rows)


def plot_overshoot(frames: Frames, out: Path, colors: dict[str, str]) -> Path | None:
    runs = frames.runs[frames.runs["source"] == "trace"]
    if runs.empty:
        return None
    plt = _plt()
    providers = sorted(runs["provider"].dropna().unique())
    tc = frames.tool_calls[(frames.tool_calls["source"] == "trace") & frames.tool_calls["after_deadline"].astype(bool)]
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
        ax.annotate(f"max {_secs(worst):g} s\n{int((over > 0).sum())}/{len(over)} runs past",
                    (i, worst), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=7.5)
    ax.set_xticks(range(len(providers)), providers)
    ax.set_xlim(-0.6, len(providers) - 0.4)
    ax.set_ylabel("seconds past the research deadline")
    top = max(float(runs["overshoot"].fillna(0).max()), float(tc["overrun"].fillna(0).max()) if len(tc) else 0.0, 1.0)
    ax.set_ylim(-0.05 * top, top * 1.35)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Deadline overshoot per provider (0 for runs that stopped in time)")
    return _save(fig, out / "overshoot.png")


# ---- the page ---------------------------------------------------------------------------------------------------------
def runs_table(frames: Frames) -> pd.DataFrame:
    runs = frames.runs[frames.runs["source"] == "trace"].copy()
    if runs.empty:
        return runs
    cols = ["name", "provider", "policy", "stop_reason", "stop_round", "final_mode", "rounds", "requests",
            "reserved", "charged", "refunded", "overshoot"]
    t = runs[cols].rename(columns={"name": "scenario", "stop_reason": "stop", "stop_round": "stop round",
                                   "final_mode": "final mode", "overshoot": "overshoot (s)"})
    for c in ("stop round", "rounds", "requests", "reserved", "charged", "refunded"):
        t[c] = t[c].map(lambda v: "-" if v is None or pd.isna(v) else f"{int(v):,}")
    t["overshoot (s)"] = t["overshoot (s)"].map(lambda v: "-" if pd.isna(v) else f"{v:g}")
    return t.fillna("-")


NO_TRACES = ("No traces of our runs among the inputs, only round logs and raw trajectories: they carry no token "
             "estimates, ledgers, budgets, stop reasons of their own or deadlines, so those sections are left out.")


def compare_section(comparison: Path, out: Path) -> Section:
    """`imprint compare`'s figures (its compare.json and plot), held-out part
    and dev, so the report shows the shipped rule beside the others."""
    import shutil
    from imprint_core.errors import UserInputError
    try:
        data = json.loads(comparison.read_text(encoding="utf-8"))
        cells = data["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"not a compare.json of `imprint compare`: {exc}", file=str(comparison),
                             key="cells") from None
    rows = []
    for c in cells:
        if c.get("part") == "all":
            continue
        frac = lambda a, b: f"{a}/{b}" if b else "–"   # noqa: E731
        lat = c.get("median_latency")
        rows.append({"rule": c["rule"], "corpus": c["corpus"], "part": c["part"],
                     "loop recall": frac(c["caught"], c["loops"]), "premature": frac(c["premature"], c["useful"]),
                     "stops before a loop": c.get("stops_before_loop", "–") if c["loops"] else "–",
                     "median latency": "–" if lat is None else f"{lat:g}",
                     "loop rounds spent": frac(c["loop_rounds_spent"], c["loop_rounds_total"])})
    image = None
    png = comparison.with_name("compare.png")
    if png.exists():
        shutil.copyfile(png, out / "compare.png")
        image = str(out / "compare.png")
    held = pd.DataFrame([r for r in rows if r["part"] == "held-out"])
    dev = pd.DataFrame([r for r in rows if r["part"] == "dev"])
    return Section("Stop rules compared",
                   f"Every labelled run replayed through each stop rule, split by task as `imprint tune` splits "
                   f"(`{data.get('command', 'imprint compare')}`; {comparison}). Loop recall and premature stops "
                   "per corpus, the held-out part first; latency is the rounds from a caught loop's start to the "
                   "stop.", image, "Loop recall against premature stops, one marker per rule",
                   tables=[(t, df) for t, df in (("held-out", held), ("dev", dev)) if not df.empty],
                   figures_first=False)


def build_sections(frames: Frames, out: Path, *, select: Sequence[str] = (), max_runs: int = 6,
                   judged: Sequence[Any] = (), rule: str = "", comparison: Path | None = None) -> list[Section]:
    """The report's sections, the stop rule's accuracy first when labelled
    runs are among the inputs (`judged`: the gate's `judged_runs`). A section
    with nothing to show is left out, never shown empty."""
    sections: list[Section] = []
    if judged:
        sections.append(accuracy_section(frames, judged, out, rule, max_runs))
    if comparison is not None:
        sections.append(compare_section(comparison, out))
    labels = {jr.row.run: jr.label for jr in judged}
    chosen = select_runs(frames, max_runs, select, "novelty")
    path = plot_novelty(frames, out, chosen, labels=labels)
    s = Section("Novelty timelines",
                "Per round: the new shingles its evidence added (green when the round counted as "
                "progress), the patience counter against the patience (dotted), write rounds (W, left "
                "out of the rule), asks (?), rounds with errors (x) and the stop"
                + ("; for a labelled run, its label." if labels else "."), path,
                "Novelty timeline of selected runs",
                notes=[] if path else ["No run with rounds among the inputs."])
    if (frames.runs["source"] == "trace").any():
        sections += _trace_sections(frames, out, select, max_runs, novelty=s)
    else:
        sections.append(s)
    t = runs_table(frames)
    if not t.empty:
        sections.append(Section("All runs", "", None, tables=[("runs", t)]))
    return [s for s in sections if not s.empty]


def _trace_sections(frames: Frames, out: Path, select: Sequence[str], max_runs: int,
                    novelty: Section) -> list[Section]:
    """The sections only traces of our runs can fill, with `novelty` in its place among them."""
    colors = provider_colors(frames.providers)
    sections: list[Section] = []

    scatter, hist = plot_estimates(frames, out, colors)
    stats = estimate_stats(frames)
    s = Section("Estimated against measured prompt tokens",
                "Every request whose provider reported its usage: our prompt estimate (the counting mode the run's "
                "budget used for remote providers, the tokenizer for local ones) against the provider's measurement, each observation once (a "
                "replayed cassette repeats its recording's figures). Above the line the "
                "estimate over-counts (research stops a little early); below it under-counts (the budget is "
                "overspent).", scatter, "Scatter of estimated against measured prompt tokens per provider")
    if stats.empty:
        s.notes.append("No request in these traces carries a measured prompt size.")
    else:
        s.tables.append(("estimate / measured per provider", stats))
        if "stub" in set(stats["provider"]):
            s.notes.append("The stub's measurement is a stand-in tokenizer, not a provider's: its figures test the "
                           "plumbing, not the estimate.")
    sections.append(s)
    modes = counting_mode_stats(frames)
    if not modes.empty:
        s = Section("Counting modes against the measurement",
                    "Every remote request carries the figure of each counting mode its run could count "
                    "(`chat.token_counting`: byte, the record's estimate; calibrated, the byte estimate fitted to "
                    "earlier measurements, from a session's second request on; tokenizer, the server's own chat "
                    "template and tokenizer), so the modes are compared on the same requests. `budget used it`: "
                    "the mode the budget counted with; `reconciled`: requests whose charge the server's reported "
                    "usage settled.")
        s.tables.append(("estimate / measured per provider and counting mode", modes))
        sections.append(s)
    if hist is not None:
        sections.append(Section("Estimate / measurement per request",
                                "The same requests as a distribution of estimate / measurement; the dashed line is "
                                "an exact count.", hist, "Histogram of estimate over measurement per provider"))

    path, notes, table = plot_policies(frames, out)
    s = Section("reserve against prefix-refund",
                "One script under both settlement policies: `reserve` charges every reservation whole (charged = "
                "reserved, nothing refunded); `prefix-refund` charges only the prompt past the prefix already "
                "processed plus the output generated.", path, "Reserved, charged and refunded tokens per request "
                "under reserve and prefix-refund", notes=notes)
    if not table.empty:
        s.tables.append(("the pair", table))
    elif path is None:
        s.notes.append("No run under `reserve` among these traces.")
    sections.append(s)

    over = token_overruns(frames.requests)
    s = Section("Token charges past the reservation",
                "Research requests whose reconciled charge (prefix-refund, the provider's measured usage) went "
                "past what was reserved for them: every one, largest first. The refund is then 0, never "
                "negative, and the tokens past the reservation are an overrun.")
    if over.empty:
        s.notes.append("None among these traces.")
    else:
        counts = ["id", "round", "reserved", "charged", "tokens_over"]
        s.tables.append(("overruns", over[["run", "role", *counts]].astype({c: "Int64" for c in counts})
                         .reset_index(drop=True)))
    sections.append(s)

    chosen = select_runs(frames, max_runs, select, "budget")
    path = plot_budget(frames, out, chosen)
    sections.append(Section("Budget consumption per round",
                            "Tokens charged so far (share of the research token budget) and research time used "
                            "(share of the timeout; waits for the user's answer do not count) at the end of each round; the dashed line is the "
                            "stop. A hollow marker shows the reservation that no longer fitted.",
                            path, "Budget consumption per round for selected runs",
                            notes=[] if path else ["No trace with rounds among the inputs."]))
    sections.append(novelty)

    path = plot_stops(frames, out)
    s = Section("Stop reasons and final modes", "How every run stopped and how its answer was produced.", path,
                "Stop reasons and final modes per provider")
    t = stop_table(frames)
    if not t.empty:
        s.tables.append(("runs by stop reason and final mode", t))
    elif path is None:
        s.notes.append("No trace among the inputs records a stop.")
    sections.append(s)

    path = plot_overshoot(frames, out, colors)
    s = Section("Deadline overshoot",
                "How far past the research deadline each run stopped (a blocking tool or a write may finish "
                "after it), and the calls that finished after the deadline.", path,
                "Deadline overshoot per provider")
    t = overshoot_table(frames)
    if not t.empty:
        s.tables.append(("overshoot per provider", t))
    elif path is None:
        s.notes.append("No trace among the inputs has a research deadline.")
    sections.append(s)
    return sections


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _code(text: str) -> str:
    """Escaped HTML with `spans` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _template() -> string.Template:
    return string.Template(resources.files(__package__).joinpath("templates", "report.html")
                           .read_text(encoding="utf-8"))


def render_html(sections: list[Section], frames: Frames, title: str, generated: str) -> str:
    """The page: templates/report.html (skeleton and CSS) around the sections."""
    parts = [f'<p class="note">{html.escape(w)}</p>' for w in _page_notes(frames)]
    for s in sections:
        parts.append(f'<h2 id="{_slug(s.title)}">{html.escape(s.title)}</h2>')
        if s.intro:
            parts.append(f"<p>{_code(s.intro)}</p>")
        for n in s.notes:
            parts.append(f'<p class="note">{_code(n)}</p>')
        image = [f'<img src="{html.escape(s.image)}" alt="{html.escape(s.alt or s.title)}">'] if s.image else []
        tables = []
        for caption, df in s.tables:
            body = df.to_html(index=False, border=0, escape=True, na_rep="-")
            tables.append(body.replace("<table", f"<table title=\"{html.escape(caption)}\"", 1)
                          .replace(">", f"><caption>{html.escape(caption)}</caption>", 1))
        if s.links:
            items = "".join(f'<li>{_link(label, href)}: {html.escape(text)}</li>' for label, href, text in s.links)
            tables.append(f'<ul class="runs">{items}</ul>')
        parts += image + tables if s.figures_first else tables + image
    return _template().substitute(
        title=html.escape(title), traces=int((frames.runs["source"] == "trace").sum()),
        round_logs=int((frames.runs["source"] == "roundlog").sum()), files=len(frames.files),
        providers=html.escape(", ".join(frames.providers) or "none"), generated=html.escape(generated),
        nav="".join(f'<a href="#{_slug(s.title)}">{html.escape(s.title)}</a>' for s in sections),
        body="".join(part + "\n" for part in parts))


def _link(label: str, href: str | None) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(label)}</a>' if href else html.escape(label)


def render_markdown(sections: list[Section], frames: Frames, title: str, generated: str) -> str:
    n_traces = int((frames.runs["source"] == "trace").sum())
    n_logs = int((frames.runs["source"] == "roundlog").sum())
    lines = [f"# {title}", "", f"{n_traces} trace(s) and {n_logs} round log(s) from {len(frames.files)} file(s); "
             f"providers: {', '.join(frames.providers) or 'none'}; generated {generated}.", ""]
    for w in _page_notes(frames):
        lines += [f"> {w}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.intro:
            lines += [s.intro, ""]
        for n in s.notes:
            lines += [f"> {n}", ""]
        image = [f"![{s.alt or s.title}]({s.image})", ""] if s.image else []
        tables: list[str] = []
        for caption, df in s.tables:
            tables += [f"**{caption}**", "", _md_table(df.fillna("-")), ""]
        if s.links:
            tables += [f"- {f'[{label}](<{href}>)' if href else label}: {text}" for label, href, text in s.links] + [""]
        lines += image + tables if s.figures_first else tables + image
    return "\n".join(lines)


def _page_notes(frames: Frames) -> list[str]:
    notes = [w for w in frames.warnings if w.strip()]
    if not (frames.runs["source"] == "trace").any():
        notes.append(NO_TRACES)
    return notes


def write_report(frames: Frames, out: str | Path, *, title: str = "Imprint research-loop report",
                 select: Sequence[str] = (), max_runs: int = 6, judged: Sequence[Any] = (),
                 rule: str = "", comparison: Path | None = None) -> dict[str, Path]:
    """`judged`: the labelled runs as the gate judged them (`gate.judged_runs`),
    for the accuracy section; `rule`: the stop rule they were replayed with, in words."""
    from imprint_core.settings import atomic_write_text
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in PLOT_NAMES:  # a plot without data this time must not linger from an earlier report
        (out / name).unlink(missing_ok=True)
    sections = build_sections(frames, out, select=select, max_runs=max_runs, judged=judged, rule=rule,
                              comparison=comparison)
    for s in sections:
        if s.image:
            s.image = Path(s.image).name
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    index = out / "index.html"
    summary = out / "summary.md"
    atomic_write_text(index, render_html(sections, frames, title, generated))
    atomic_write_text(summary, render_markdown(sections, frames, title, generated))
    for f in (index, summary):
        f.chmod(0o644)
    written = {"index.html": index, "summary.md": summary}
    for s in sections:
        if s.image:
            written[s.image] = out / s.image
    return written
