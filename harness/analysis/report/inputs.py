"""Which runs the report shows: the labelled runs the stop rule got wrong
(spread over the corpora), the pair of runs that compares the settlement
policies, and the runs worth a panel in the per-round plots.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import pandas as pd

from ..frames.load import Frames

STOP_ORDER = ["answered", "no_progress", "token_budget", "time_budget", "context_full", "cancelled"]


def failing_runs(judged: Sequence[Any]) -> list[Any]:
    """The judged runs whose label does not hold: premature stops first, then
    missed loops, corpus by corpus."""
    bad = [jr for jr in judged if not jr.holds]
    return sorted(bad, key=lambda jr: (jr.source, not jr.judgement.premature))


def spread(runs: list[Any], limit: int) -> list[Any]:
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


# ---- reserve against prefix-refund ----------------------------------------------------------------
_POLICY_WORDS = re.compile(r"(^|[-_])(policy|reserve|prefix|refund|prefix-refund)(?=$|[-_])")


def scenario_key(name: Any) -> str:
    """A scenario's name without its policy words: a scenario run under both
    policies keeps its name, and the library's twin files are named for it
    (policy-reserve, policy-prefix-refund)."""
    return _POLICY_WORDS.sub("", str(name))


def policy_pairs(frames: Frames) -> list[tuple[dict, dict, str]]:
    """(reserve run, prefix-refund run, how matched) per provider: the same
    scenario under both policies, by name (`scenario_key`), on the same
    question and token budget. Only scenarios run under both are paired: a
    run under one policy alone is never set beside another scenario's."""
    from .tables import trace_runs
    runs = trace_runs(frames)
    runs = runs[runs["policy"].notna()]
    pairs = []
    for provider, g in runs.groupby("provider"):
        groups: dict[Any, dict[str, list[dict]]] = {}
        for r in g.to_dict("records"):
            key = (scenario_key(r["name"]), r["question"], r.get("token_budget"))
            groups.setdefault(key, {}).setdefault(r["policy"], []).append(r)
        both = [(by["reserve"][0], by["prefix-refund"][0]) for by in groups.values()
                if by.get("reserve") and by.get("prefix-refund")]
        if both:
            a, b = max(both, key=lambda ab: (ab[0]["requests"] or 0) + (ab[1]["requests"] or 0))
            pairs.append((a, b, "the same scenario"))
    return pairs


def unpaired(frames: Frames) -> list[str]:
    """The scenarios run under one policy only that name a policy (a
    `reserve` twin whose other half is not among the inputs)."""
    from .tables import trace_runs
    runs = trace_runs(frames)
    runs = runs[runs["policy"].notna()]
    paired = {(a["provider"], a["name"]) for a, b, _ in policy_pairs(frames)} | \
        {(b["provider"], b["name"]) for a, b, _ in policy_pairs(frames)}
    return sorted({f"{r['name']} ({r['provider']}, {r['policy']})" for r in runs.to_dict("records")
                   if r["policy"] == "reserve" and (r["provider"], r["name"]) not in paired})


# ---- runs worth a panel ---------------------------------------------------------------------------
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
