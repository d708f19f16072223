"""`imprint check`: ADR 0102's invalidation conditions as a release gate.

1. premature stops and loop recall, per labelled source (corpus): the share
   of its labelled useful runs that the no-progress rule stopped before their
   labelled round (none at all on `strict` sources), and the share of its
   labelled loops that a stop caught (traces: the stop they recorded; round
   logs and raw trajectories: replayed at the configured patience and
   novelty config); on a `per_run` source (by default `regressions`, the runs
   of `imprint regress add`) every labelled run must hold on its own: no
   premature stop and every loop caught, each run that fails named;
2. estimate divergence: per provider, the median and p95 of estimated /
   measured prompt tokens and the share of under-counts (estimate below the
   measurement), over every request whose usage the provider reported;
3. deadline overruns: blocking tools (and writes, which always run to the
   end) that finished after the research deadline: their count and the
   largest overrun.

Thresholds live in a TOML file (default `reports/gate.toml`), read and
checked by `gate.config`. Exit 0 when every condition holds, 1 when one
fails, 2 on unusable input.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from imprint_core.errors import UserInputError

from ..stats import rate
from ...ratios import ratio_stats
from ...realruns.labels import LOOP_SLACK, Judgement, Labels, RunLabel, Tally, corpus_name, judge, load_labels
from ...realruns.noveltyconfigs import describe, make_config
from ..frames.load import Frames, load_frames
from .config import GateConfig


# ---- the conditions ----------------------------------------------------------------------------------
@dataclass
class Condition:
    number: int
    name: str
    passed: bool
    rows: list[dict[str, Any]] = field(default_factory=list)   # figure, threshold, passed per line
    details: list[str] = field(default_factory=list)
    no_data: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "name": self.name, "passed": self.passed, "no_data": self.no_data,
                "rows": self.rows, "details": self.details}


DETAILS_PER_SOURCE = 10


@dataclass
class _Source(Tally):
    premature_runs: list[str] = field(default_factory=list)
    missed_loops: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)     # per-run sources: the runs that do not hold


@dataclass
class JudgedRun:
    """A labelled run and what the stop rule did with it."""
    row: Any                  # its row of `Frames.runs`
    label: RunLabel
    stop: int | None          # the no-progress stop round (None: no such stop)
    judgement: Judgement

    @property
    def holds(self) -> bool:
        """No premature stop and every labelled loop caught."""
        return not self.judgement.premature and self.judgement.loops_caught == self.judgement.loops

    @property
    def source(self) -> str:
        return corpus_name(self.label.file) if self.label.file else "labels"

    def problems(self) -> list[str]:
        """Why the label does not hold, in words (empty when it holds)."""
        how = "replayed" if self.row.source == "roundlog" else "recorded"
        out = []
        if self.judgement.premature:
            out.append(f"{how} no_progress stop at round {self.stop}, labelled useful until round "
                       f"{self.label.should_not_stop_before}")
        if self.judgement.loops_caught < self.judgement.loops:
            spans = ", ".join(f"{a}-{b}" for a, b in self.label.loops)
            out.append(f"loop(s) {spans} not caught ({how} stop: "
                       f"{'none' if self.stop is None else f'round {self.stop}'})")
        return out


def judged_runs(frames: Frames, labels: Labels, slack: int = LOOP_SLACK) -> list[JudgedRun]:
    """Every run of `frames` that `labels` labels, judged (`realruns.labels.judge`)."""
    out = []
    for r in frames.runs.itertuples(index=False):
        label = labels.for_run(r.name, r.run, r.path)
        if label is None:
            continue
        stop = int(r.stop_round) if r.stop_reason == "no_progress" and pd.notna(r.stop_round) else None
        out.append(JudgedRun(r, label, stop, judge(label, stop, int(r.rounds) if pd.notna(r.rounds) else None, slack)))
    return out


def premature_stops(frames: Frames, labels: Labels, cfg: GateConfig, expect_all: bool = False) -> Condition:
    """Per source (a labels file: `labels-tau-bench.yaml` is tau-bench): premature
    stops on its labelled useful runs, and the recall of its labelled loops (a
    loop is caught when the stop lands from its first round to `loop_slack`
    rounds after its last; `realruns.labels.judge`). A `per_run` source is
    judged run by run instead: each of its labelled runs must hold, and with
    `expect_all` (the gate's default inputs) a labelled run missing from the
    inputs fails too."""
    ps = cfg.premature_stops
    sources: dict[str, _Source] = {}
    seen: set[str] = set()
    for jr in judged_runs(frames, labels, ps["loop_slack"]):
        src = sources.setdefault(jr.source, _Source())
        src.add(jr.label, jr.judgement)
        seen.add(jr.label.name)
        problems = jr.problems()
        if jr.judgement.premature:
            src.premature_runs.append(f"{jr.row.run}: {problems[0]}")
        if jr.judgement.loops_caught < jr.judgement.loops:
            src.missed_loops.append(f"{jr.row.run}: {problems[-1]}")
        if problems:
            src.failing.append(f"{jr.row.run} FAILS: {'; '.join(problems)}")
    per_run = set(ps["per_run"])
    missing: dict[str, list[str]] = {}
    labelled: dict[str, int] = {}
    for label in labels.runs.values():
        name = corpus_name(label.file) if label.file else "labels"
        labelled[name] = labelled.get(name, 0) + 1
        if label.name not in seen and (name in per_run or expect_all and name in cfg.loop_recall_baseline):
            missing.setdefault(name, []).append(label.name)
            sources.setdefault(name, _Source())
    c = Condition(1, "premature no-progress stops on labelled useful runs; recall of labelled loops", True)
    useful = sum(src.useful for src in sources.values())
    for name, src in sorted(sources.items()):
        if name in per_run:
            gone = missing.get(name, [])
            held = src.runs - len(src.failing)
            ok = not src.failing and not (gone and expect_all)
            c.rows.append({"subject": f"{name}: runs that hold", "value": held,
                           "figure": f"{held} of {src.runs} labelled runs" + (f", {len(gone)} not among the inputs"
                                                                               if gone else ""),
                           "threshold": "all, each on its own", "passed": ok})
            c.passed &= ok
            c.details += [f"{name}: {d}" for d in src.failing]
            c.details += [f"{name}: {g} FAILS: labelled in {labels.runs[g].file}:{labels.runs[g].line} but not among "
                          "the inputs (its round log is missing)" if expect_all else
                          f"{name}: {g}: not among the inputs; not judged" for g in gone]
            continue
        if src.useful:
            strict = name in ps["strict"]
            share = src.premature_share or 0.0
            ok = src.premature <= ps["max_premature"] if strict else share <= ps["max_premature_share"] + 1e-12
            c.rows.append({"subject": f"{name}: premature stops", "value": share,
                           "figure": rate(src.premature, src.useful).of("useful runs"),
                           "threshold": f"≤ {ps['max_premature']} (strict)" if strict
                           else f"≤ {ps['max_premature_share']:.0%}", "passed": ok})
            c.passed &= ok
        gone = missing.get(name, [])
        if gone:
            # A baseline was pinned on all of the source's labelled runs: part of them (a run of part of
            # the scenario library, a corpus that is missing) says nothing about it, and the labels have
            # not changed. It fails, so that a gate that did not judge the source never passes.
            base = cfg.loop_recall_baseline[name]
            c.rows.append({"subject": f"{name}: loop recall", "value": None,
                           "figure": f"not judged: {len(gone)} of its {labelled[name]} labelled runs not among "
                                     "the inputs", "threshold": f"≥ baseline {base['recall']:.0%}, on all of them",
                           "passed": False, "goal": ps["loop_recall_goal"], "goal_met": False,
                           "baseline": base["recall"]})
            c.passed = False
            shown = ", ".join(gone[:DETAILS_PER_SOURCE]) + (f" and {len(gone) - DETAILS_PER_SOURCE} more"
                                                             if len(gone) > DETAILS_PER_SOURCE else "")
            c.details.append(f"{name}: loop recall not judged: {shown} not among the inputs (a run of part of "
                             "the scenario library, or a corpus that is missing): judge a complete run "
                             "(`imprint run`, then `imprint check`, or --run DIR)")
        elif src.loops:
            # Loop recall is the rule's quality, not an invalidation condition:
            # it gates only against the baseline pinned for the shipped rule, so
            # a change that catches fewer labelled loops fails; the goal is shown.
            # Its figure is stated as `compare --decide` states rates (`stats.rate`:
            # count, share and Wilson interval).
            recall = src.recall or 0.0
            base = cfg.loop_recall_baseline.get(name)
            goal = f"goal ≥ {ps['loop_recall_goal']:.0%}, not gated"
            if base is None:
                ok, threshold = True, f"no baseline pinned ({goal})"
            else:
                ok = recall >= base["recall"] - 1e-12
                pinned = f"{base.get('caught', '?')}/{base.get('loops', '?')}" if "caught" in base else ""
                threshold = (f"≥ baseline {base['recall']:.0%}" + (f" ({pinned}" if pinned else " (")
                             + (f", {base['commit']}" if base.get("commit") else "") + f"); {goal}")
            c.rows.append({"subject": f"{name}: loop recall", "value": recall,
                           "figure": rate(src.caught, src.loops).of("loops caught"),
                           "threshold": threshold, "passed": ok, "goal": ps["loop_recall_goal"],
                           "goal_met": recall >= ps["loop_recall_goal"] - 1e-12,
                           "baseline": base["recall"] if base else None})
            c.passed &= ok
            if base is not None and "loops" in base and base["loops"] != src.loops:
                c.details.append(f"{name}: the labels changed since the loop-recall baseline was pinned "
                                 f"({base['loops']} labelled loops then, {src.loops} now): re-measure it "
                                 "(`imprint check --json`) and pin it in the same commit as the labels")
        for what, items in (("premature", src.premature_runs), ("missed", src.missed_loops)):
            c.details += [f"{name}: {d}" for d in items[:DETAILS_PER_SOURCE]]
            if len(items) > DETAILS_PER_SOURCE:
                c.details.append(f"{name}: … and {len(items) - DETAILS_PER_SOURCE} more {what}")
    if useful == 0:
        c.passed, c.no_data = False, True
        c.rows.insert(0, {"subject": "useful runs", "figure": "none labelled", "value": 0, "threshold": "≥ 1",
                          "passed": False})
        c.details.append("no labelled useful run among the inputs (give --labels, or check the label names)")
    c.details.append(f"round logs and raw trajectories replayed by {_rule_words(cfg)}, user turns "
                     f"{ps['user_turns']}; a loop is caught by a stop from its first round to {ps['loop_slack']} "
                     "round(s) after its last")
    return c


def _rule_words(cfg: GateConfig) -> str:
    """The rule the gate replays with, and the settings it takes from the gate config: the record's patience
    and novelty config, for the record's rule and for a rule built on it (the shipped repeat-aware)."""
    from imprint_core.stoprules import resolve
    ps = cfg.premature_stops
    info = resolve(ps["rule"])
    words = "the record's rule" if info.name == "record" else f"rule {ps['rule']}"
    if "patience" in info.params and "patience" not in ps["rule_params"]:
        words += f" at patience {ps['patience']}"
    extra = [f"{k}={v}" for k, v in ps["rule_params"].items()]
    if (info.name == "record" or "novelty" in info.params) and not ps["rule_params"]:
        extra.insert(0, describe(novelty_config(cfg)))
    return ", ".join([words, *extra])


def novelty_config(cfg: GateConfig):
    """The NoveltyConfig the gate replays with: `normalization` and the `novelty` table."""
    ps = cfg.premature_stops
    return make_config({**ps["novelty"], "normalization": ps["normalization"]},
                       key="premature_stops.novelty")


def _figure(ratios: pd.Series) -> str:
    st = ratio_stats(ratios)
    return (f"median {st.median:.3f}, p95 {st.p95:.3f}, "
            f"under {st.under:.1%} of {st.count}") if st else "no measured requests"


def divergence(frames: Frames, cfg: GateConfig) -> Condition:
    """Judged on the counting mode each run's budget used, since an exact
    count and an estimate are held to different bands. Runs
    that chose another mode than the shipped default of
    `chat.token_counting` (the byte-estimate baselines) are shown, not
    judged: they measure a setting the product does not use unless asked.
    Within the judged runs, requests are grouped by the mode that counted
    them; an exact mode (a tokenizer) is held to `[divergence.exact]`, an
    approximate one (calibrated, byte; and traces from before the modes) to
    the provider's band."""
    from imprint_core.settings import SPECS
    default_mode = SPECS["chat.token_counting"].default
    req = frames.measured_requests()
    c = Condition(2, "estimate / measured prompt tokens per provider and counting mode", True)
    judged = 0
    for provider in sorted(frames.providers):
        rows = req[req["provider"] == provider]
        if any(fnmatch.fnmatchcase(provider, pat) for pat in cfg.divergence["exclude"]):
            c.rows.append({"subject": f"{provider} (excluded)", "figure": _figure(rows["ratio"].dropna()),
                           "value": None, "threshold": "not judged", "passed": None})
            continue
        mode = rows["counting_mode"]
        baseline = rows[mode.notna() & (mode != default_mode)]
        for name, group in baseline.groupby("counting_mode"):
            c.rows.append({"subject": f"{provider} [baseline: chat.token_counting = {name}]",
                           "figure": _figure(group["ratio"].dropna()), "value": None,
                           "threshold": f"not judged (the budget counts with {default_mode!r} unless asked)",
                           "passed": None})
        rows = rows.drop(baseline.index)
        used = rows["counting_used"].where(rows["counting_used"].notna(), "native")
        for name in sorted(used.unique()):
            group = rows[used == name]
            exact = bool(group["counting_exact"].fillna(False).astype(bool).all()) and name != "native"
            label = provider if name == "native" else f"{provider} [{name}{', exact' if exact else ''}]"
            judged += _judge(c, label, group["ratio"].dropna(), cfg.thresholds_for(provider, exact))
    _overruns(c, frames, cfg, default_mode)
    if judged == 0:
        c.passed, c.no_data = False, True
        c.rows.append({"subject": "judged providers", "figure": "none", "value": 0, "threshold": "≥ 1",
                       "passed": False})
        c.details.append("no provider with enough measured usage to judge (local or recorded-server traces needed)")
    return c


def _overruns(c: Condition, frames: Frames, cfg: GateConfig, default_mode: str) -> None:
    """Research requests charged past their reservation (research-loop.md:
    every overrun is shown and judged): judged on the runs whose budget used
    the shipped counting mode, listed for the baselines, as estimates are."""
    from .overruns import token_overrun_details, token_overrun_row, token_overruns
    reqs = frames.requests
    if reqs.empty:
        return
    excluded = reqs["provider"].fillna("").map(
        lambda p: any(fnmatch.fnmatchcase(p, pat) for pat in cfg.divergence["exclude"]))
    mode = reqs["counting_mode"]
    base = mode.notna() & (mode != default_mode)
    judged = reqs[~base & ~excluded]
    row = token_overrun_row(judged, cfg.divergence["max_overruns"])
    c.rows.append(row)
    c.passed &= bool(row["passed"])
    c.details += [f"overrun: {d}" for d in token_overrun_details(judged)]
    shown = token_overruns(reqs[base & ~excluded])
    if len(shown):
        c.rows.append({"subject": "token charges past the reservation [baselines]",
                       "figure": f"{len(shown)} request(s) in {shown['run'].nunique()} run(s), largest "
                                 f"{int(shown['tokens_over'].max())} tokens", "value": None,
                       "threshold": f"not judged (the budget counts with {default_mode!r} unless asked)",
                       "passed": None})
        c.details += [f"overrun (baseline, not judged): {d}" for d in token_overrun_details(reqs[base & ~excluded])]


def _judge(c: Condition, label: str, ratios: pd.Series, th: dict[str, Any]) -> int:
    """One provider (and counting mode) against its band; 1 if judged."""
    n = len(ratios)
    if n < th["min_requests"]:
        c.rows.append({"subject": label, "figure": f"{n} measured request(s)", "value": n,
                       "threshold": f"≥ {th['min_requests']} to judge", "passed": None})
        return 0
    st = ratio_stats(ratios)
    med, p95, under = st.median, st.p95, st.under
    checks = [
        ("median", f"{med:.3f}", med, f"{th['median_min']}–{th['median_max']}",
         th["median_min"] <= med <= th["median_max"]),
        ("p95", f"{p95:.3f}", p95, f"≤ {th['p95_max']}", p95 <= th["p95_max"]),
        ("under-counts", f"{under:.1%} of {n}", under, f"≤ {th['max_undercount_share']:.0%}",
         under <= th["max_undercount_share"]),
    ]
    for what, fig, value, thr, ok in checks:
        c.rows.append({"subject": f"{label}: {what}", "figure": fig, "value": value, "threshold": thr,
                       "passed": ok})
        c.passed &= ok
    c.details.append(f"{label}: {n} requests, worst under-count {st.lowest:.3f}, "
                     f"worst over-count {st.highest:.3f}")
    return 1


def overruns(frames: Frames, cfg: GateConfig) -> Condition:
    tc = frames.tool_calls
    tc = tc[(tc["source"] == "trace") & tc["after_deadline"].astype(bool)]
    tc = tc[(tc["blocking"] == True) | (tc["kind"] == "write")]  # noqa: E712 (a nullable column)
    deliberate = tc["scenario"].isin(cfg.overruns["deliberate"])
    counted = tc[~deliberate]
    count = len(counted)
    largest = float(tc["overrun"].max()) if len(tc) and tc["overrun"].notna().any() else 0.0
    mc, ms = cfg.overruns["max_count"], cfg.overruns["max_overrun_sec"]
    c = Condition(3, "blocking tools finishing after the research deadline", count <= mc and largest <= ms)
    runs = frames.runs[frames.runs["source"] == "trace"]
    c.rows.append({"subject": "count", "figure": f"{count} in {counted['run'].nunique()} of {len(runs)} run(s)",
                   "value": count, "threshold": f"≤ {mc}", "passed": count <= mc})
    c.rows.append({"subject": "largest overrun", "figure": f"{largest:.1f} s", "value": largest,
                   "threshold": f"≤ {ms:g} s", "passed": largest <= ms})
    for r in tc.sort_values("overrun", ascending=False).head(10).itertuples(index=False):
        why = " (deliberate, not counted)" if r.scenario in cfg.overruns["deliberate"] else ""
        c.details.append(f"{r.run}: {r.tool} ({r.kind}) in round {r.round} finished "
                         f"{(r.overrun or 0):.1f} s after the deadline{why}")
    if len(runs) == 0:
        c.passed, c.no_data = False, True
        c.details.append("no traces among the inputs")
    return c


# ---- the gate -------------------------------------------------------------------------------------------
def run_gate(paths: Sequence[str | Path], cfg: GateConfig, label_files: Sequence[str],
             expect_all: bool = False) -> tuple[list[Condition], Frames, list[str]]:
    """The three conditions over `paths`; also the loader's warnings. With
    `expect_all` (the config's own inputs), a labelled run of a `per_run`
    source that is not among them fails condition 1."""
    labels = load_labels(label_files)
    ps = cfg.premature_stops
    frames = load_frames(paths, patience=ps["patience"], novelty=novelty_config(cfg), user_turns=ps["user_turns"],
                         rule=ps["rule"], rule_params=ps["rule_params"])
    if frames.runs.empty:
        raise UserInputError("no traces or round logs found", file=" ".join(str(p) for p in paths))
    return judge_frames(frames, cfg, labels, expect_all), frames, list(cfg.warnings) + list(frames.warnings)


def judge_frames(frames: Frames, cfg: GateConfig, labels: Labels, expect_all: bool = False) -> list[Condition]:
    """The three conditions over frames already loaded as `run_gate` loads
    them (the report judges the frames it draws)."""
    return [premature_stops(frames, labels, cfg, expect_all), divergence(frames, cfg), overruns(frames, cfg)]


def junit_xml(conditions: Sequence[Condition], run_words: str, run_ok: bool, config: str) -> str:
    """The gate as a JUnit XML report for a CI dashboard: a test case per
    line of the gate's table (a `failure` where it fails, `skipped` where it
    is listed and not judged), the judged run as a case of its own, each
    condition's notes in its suite's `system-out`."""
    import xml.etree.ElementTree as ET
    root = ET.Element("testsuites", name=f"imprint check ({config})")
    suites: dict[str, list[tuple[str, bool | None, dict[str, Any]]]] = {"imprint check": [
        ("judged run", run_ok, {"figure": run_words, "threshold": "a complete run"})]}
    for c in conditions:
        suites[f"{c.number}. {c.name}"] = [(str(row["subject"]), row["passed"], row) for row in c.rows] or \
            [("no data", False, {"figure": "no data", "threshold": "-"})]
    details = {f"{c.number}. {c.name}": c.details for c in conditions}
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for suite, cases in suites.items():
        el = ET.SubElement(root, "testsuite", name=suite)
        counts = {"tests": len(cases), "failures": 0, "skipped": 0}
        for name, passed, row in cases:
            case = ET.SubElement(el, "testcase", classname=suite, name=str(name))
            text = f"{row.get('figure', '')} (threshold: {row.get('threshold', '')})"
            if passed is None:
                ET.SubElement(case, "skipped", message=f"not judged: {text}")
                counts["skipped"] += 1
            elif not passed:
                ET.SubElement(case, "failure", message=f"FAILS: {text}", type="gate").text = text
                counts["failures"] += 1
            else:
                ET.SubElement(case, "system-out").text = f"holds: {text}"
        if details.get(suite):
            ET.SubElement(el, "system-out").text = "\n".join(details[suite])
        for k, v in counts.items():
            el.set(k, str(v))
            totals[k] += v
        el.set("errors", "0")
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
