"""The report's tables: one DataFrame per question, as `sections`
puts them under its figures.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from imprint_core.counting import COUNTED_MODES

from ...ratios import ratio_stats
from ..frames.load import Frames


# ---- our runs, each once ------------------------------------------------------------------------
SAME_RUN = ["scenario", "provider", "policy", "stop_reason", "stop_round", "final_mode", "rounds", "requests",
            "reserved", "charged", "refunded"]


def trace_runs(frames: Frames) -> pd.DataFrame:
    """The traces of our runs, each session once: a recorded session
    (traces/cassettes/) read beside the run that replayed it gives two
    traces of one session, the same scenario with the same figures."""
    runs = frames.runs[frames.runs["source"] == "trace"]
    if runs.empty:
        return runs
    key = runs[SAME_RUN].astype(str).assign(scenario=runs["scenario"].where(runs["scenario"].notna(), runs["run"]))
    return runs[~key.duplicated()]


# ---- the stop rule's accuracy on labelled runs ----------------------------------------------------
def accuracy_table(judged: Sequence[Any]) -> pd.DataFrame:
    """Per corpus (labels file): premature stops on useful runs and labelled
    loops caught, from the gate's judged runs."""
    from ...realruns.labels import Tally
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


# ---- estimates against measurements ---------------------------------------------------------------
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
    """Every counting mode (`chat.token_counting`) against the same
    measurements, per provider, side by side. Each request records the figure of every mode
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


# ---- stop reasons and final modes -----------------------------------------------------------------
def stop_table(frames: Frames) -> pd.DataFrame:
    runs = trace_runs(frames)
    if runs.empty:
        return pd.DataFrame()
    t = pd.crosstab([runs["provider"], runs["stop_reason"].fillna("(none)")], runs["final_mode"].fillna("(none)"))
    t = t.reset_index()
    t.columns.name = None
    return t


# ---- deadline overshoot ---------------------------------------------------------------------------
def secs(v: float) -> float:
    """Seconds as the overshoot table and plot both show them (to the hundredth)."""
    return round(v, 2)


def overshoot_table(frames: Frames) -> pd.DataFrame:
    runs = trace_runs(frames)
    tc = frames.tool_calls[(frames.tool_calls["source"] == "trace") & frames.tool_calls["after_deadline"].astype(bool)
                           & frames.tool_calls["run"].isin(runs["run"])]
    rows = []
    for provider, g in runs.groupby("provider"):
        timed = g[g["stop_reason"] == "time_budget"]
        over = g["overshoot"].fillna(0)
        t = tc[tc["provider"] == provider]
        worst = g.loc[over.idxmax()] if len(g) and over.max() > 0 else None
        rows.append({"provider": provider, "runs": len(g), "time stops": len(timed),
                     "past the deadline": int((over > 0).sum()),
                     "median (s)": secs(float(over[over > 0].median())) if (over > 0).any() else 0.0,
                     "largest (s)": secs(float(over.max())) if len(over) else 0.0,
                     "largest in": worst["name"] if worst is not None else "-",
                     "late calls": len(t),
                     "largest call overrun (s)": round(float(t["overrun"].max()), 2) if len(t) and t["overrun"].notna().any() else 0.0})
    return pd.DataFrame(rows)


# ---- all runs -------------------------------------------------------------------------------------
def runs_table(frames: Frames) -> pd.DataFrame:
    runs = trace_runs(frames).copy()
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
