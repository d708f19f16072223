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

Thresholds live in a TOML file (default `reports/gate.toml`). Exit 0 when
every condition holds, 1 when one fails, 2 on unusable input.
"""
from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from imprint_core.errors import UserInputError
from imprint_core.novelty import NORMALIZATIONS
from imprint_core.settings import SPECS

from ..realruns.labels import (LOOP_SLACK, Judgement, Labels, RunLabel, Tally, corpus_name, judge, load_labels,
                               read_user_file)
from ..realruns.noveltyfields import describe, make_config
from ..realruns.regressions import CORPUS as REGRESSIONS
from ..ratios import ratio_stats
from ..realruns.rounds import PATIENCE, USER_TURNS
from .frames import Frames, load_frames

# table -> key -> (type, check, expected)
_NUM = (int, float)
SCHEMA: dict[str, dict[str, tuple[Any, Any, str]]] = {
    "inputs": {
        "traces": (list, None, "a list of paths"),
        "latest_run": (bool, None, "true or false"),
        "runs_dir": (str, None, "a path"),
        "round_logs": (list, None, "a list of paths"),
        "labels": (list, None, "a list of label files"),
    },
    "premature_stops": {
        "patience": (int, lambda v: PATIENCE.min <= v <= PATIENCE.max,
                     f"an integer within {PATIENCE.min}–{PATIENCE.max}"),
        "normalization": (str, lambda v: v in NORMALIZATIONS, "one of " + ", ".join(NORMALIZATIONS)),
        "user_turns": (str, lambda v: v in USER_TURNS, "one of " + ", ".join(USER_TURNS)),
        "max_premature": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "max_premature_share": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "strict": (list, None, "a list of corpus names (labels files without `labels-` and `.yaml`)"),
        "per_run": (list, None, "a list of corpus names whose every labelled run must hold"),
        "min_loop_recall": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1 (read as loop_recall_goal)"),
        "loop_recall_goal": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "rule": (str, lambda v: bool(v.strip()), "a stop rule (`imprint rules`)"),
        "rule_params": (dict, None, "a table of the rule's parameters"),
        "loop_slack": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "novelty": (dict, None, "a table of NoveltyConfig fields"),
    },
    "divergence": {
        "min_requests": (int, lambda v: v >= 1, "an integer of 1 or more"),
        "median_min": (_NUM, lambda v: v > 0, "a positive number"),
        "median_max": (_NUM, lambda v: v > 0, "a positive number"),
        "p95_max": (_NUM, lambda v: v > 0, "a positive number"),
        "max_undercount_share": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "exclude": (list, None, "a list of provider names or patterns"),
        "providers": (dict, None, "a table of per-provider thresholds"),
        "exact": (dict, None, "a table of thresholds for exact counting modes"),
        "max_overruns": (int, lambda v: v >= 0, "an integer of 0 or more"),
    },
    "loop_recall_baseline": {},   # one table per corpus: BASELINE_KEYS
    "overruns": {
        "deliberate": (list, None, "a list of scenario names that overrun on purpose"),
        "max_count": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "max_overrun_sec": (_NUM, lambda v: v >= 0, "a number of seconds, 0 or more"),
    },
}
BASELINE_KEYS = {"recall": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
                 "caught": (int, lambda v: v >= 0, "an integer of 0 or more"),
                 "loops": (int, lambda v: v >= 0, "an integer of 0 or more"),
                 "commit": (str, None, "the commit that measured it"),
                 "rule": (str, None, "the rule it was measured with")}
PROVIDER_KEYS = ("min_requests", "median_min", "median_max", "p95_max", "max_undercount_share")
DEFAULTS: dict[str, dict[str, Any]] = {
    "inputs": {"traces": ["traces"], "latest_run": True, "runs_dir": "traces/runs", "round_logs": [], "labels": []},
    "premature_stops": {"patience": PATIENCE.default, "normalization": "default", "user_turns": "reset", "max_premature": 0,
                        "max_premature_share": 0.10, "strict": [], "per_run": [REGRESSIONS],
                        "loop_recall_goal": 0.8, "loop_slack": LOOP_SLACK,
                        "novelty": {}, "rule": SPECS["chat.research_stop_rule"].default, "rule_params": {}},
    "loop_recall_baseline": {},
    "divergence": {"min_requests": 5, "median_min": 0.9, "median_max": 1.5, "p95_max": 2.0,
                   "max_undercount_share": 0.05, "exclude": [], "providers": {},
                   "exact": {"median_min": 0.98, "median_max": 1.02, "p95_max": 1.02, "max_undercount_share": 0.0},
                   "max_overruns": 0},
    "overruns": {"deliberate": [], "max_count": 0, "max_overrun_sec": 0.0},
}


# ---- the config ------------------------------------------------------------------------------------
def _split_dotted(header: str) -> tuple[str, ...]:
    """`a."b.c".d` -> ('a', 'b.c', 'd')."""
    parts, cur, quote = [], "", None
    for ch in header:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return tuple(parts)


def _line_of(text: str, table: Sequence[str], key: str | None) -> int | None:
    """The line of `key` in `[table]` (or of the table header itself)."""
    current: tuple[str, ...] = ()
    header_line = None
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        m = re.match(r"^\[\s*([^\[\]]+?)\s*\]", line)
        if m:
            current = _split_dotted(m.group(1))
            if current == tuple(table):
                header_line = no
                if key is None:
                    return no
            continue
        if current == tuple(table) and key is not None:
            m = re.match(r"^(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=", line)
            if m and m.group(1).strip("\"'") == key:
                return no
    return header_line


@dataclass
class GateConfig:
    path: str
    inputs: dict[str, Any]
    premature_stops: dict[str, Any]
    divergence: dict[str, Any]
    overruns: dict[str, Any]
    loop_recall_baseline: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def thresholds_for(self, provider: str, exact: bool = False) -> dict[str, Any]:
        """The band a provider's estimates are held to; an exact counting mode
        (a tokenizer) is held to `[divergence.exact]` instead."""
        out = {k: self.divergence[k] for k in PROVIDER_KEYS}
        for pattern, over in self.divergence["providers"].items():
            if fnmatch.fnmatchcase(provider, pattern):
                out.update(over)
        if exact:
            out.update(self.divergence["exact"])
        return out


def _check_value(value: Any, spec: tuple[Any, Any, str], file: str, line: int | None, key: str) -> None:
    typ, check, expected = spec
    ok = isinstance(value, typ) and not (isinstance(value, bool) and typ is not bool)
    if ok and check is not None:
        ok = bool(check(value))
    if not ok:
        raise UserInputError(f"{value!r} is not valid", file=file, line=line, key=key, expected=expected)


def parse_config(text: str, name: str) -> GateConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        problem = re.sub(r" \(at line .*$", "", str(exc))
        raise UserInputError(f"not valid TOML: {problem}", file=name,
                             line=int(m.group(1)) if m else None) from None
    out = {t: dict(v) for t, v in DEFAULTS.items()}
    out["divergence"]["providers"] = {}
    for table, body in data.items():
        if table not in SCHEMA:
            raise UserInputError("unknown table", file=name, line=_line_of(text, [table], None) or _line_of(text, [], table),
                                 key=table, expected=", ".join(SCHEMA))
        if not isinstance(body, dict):
            raise UserInputError("must be a table", file=name, line=_line_of(text, [], table), key=table)
        for key, value in body.items():
            line = _line_of(text, [table], key)
            if table == "loop_recall_baseline":
                out[table][key] = _baseline(value, name, text, key, line)
                continue
            if key not in SCHEMA[table]:
                raise UserInputError("unknown key", file=name, line=line, key=f"{table}.{key}",
                                     expected=", ".join(SCHEMA[table]))
            _check_value(value, SCHEMA[table][key], name, line, f"{table}.{key}")
            if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                raise UserInputError("must be a list of strings", file=name, line=line, key=f"{table}.{key}")
            if table == "divergence" and key == "providers":
                for prov, over in value.items():
                    pline = (_line_of(text, ["divergence", "providers", prov], None)
                             or _line_of(text, ["divergence", "providers"], prov) or line)
                    if not isinstance(over, dict):
                        raise UserInputError("must be a table of thresholds", file=name, line=pline,
                                             key=f"divergence.providers.{prov}", expected=", ".join(PROVIDER_KEYS))
                    for k, v in over.items():
                        kline = _line_of(text, ["divergence", "providers", prov], k) or pline
                        if k not in PROVIDER_KEYS:
                            raise UserInputError("unknown key", file=name, line=kline,
                                                 key=f"divergence.providers.{prov}.{k}", expected=", ".join(PROVIDER_KEYS))
                        _check_value(v, SCHEMA["divergence"][k], name, kline, f"divergence.providers.{prov}.{k}")
            if table == "divergence" and key == "exact":
                for k, v in value.items():
                    kline = _line_of(text, ["divergence", "exact"], k) or line
                    if k not in PROVIDER_KEYS:
                        raise UserInputError("unknown key", file=name, line=kline, key=f"divergence.exact.{k}",
                                             expected=", ".join(PROVIDER_KEYS))
                    _check_value(v, SCHEMA["divergence"][k], name, kline, f"divergence.exact.{k}")
                value = {**DEFAULTS["divergence"]["exact"], **value}
            if table == "premature_stops" and key == "novelty":
                if "normalization" in value:
                    raise UserInputError("set normalization as premature_stops.normalization", file=name, line=line,
                                         key="premature_stops.novelty.normalization")
                for k, v in value.items():
                    kline = _line_of(text, ["premature_stops", "novelty"], k) or line
                    try:
                        make_config({k: v}, key=f"premature_stops.novelty.{k}")
                    except UserInputError as exc:
                        raise UserInputError(exc.message, file=name, line=kline, key=f"premature_stops.novelty.{k}",
                                             expected=exc.expected) from None
            if table == "premature_stops" and key == "min_loop_recall":
                key = "loop_recall_goal"   # its older name
            out[table][key] = value
    d = out["divergence"]
    if d["median_min"] > d["median_max"]:
        raise UserInputError("median_min is above median_max", file=name, line=_line_of(text, ["divergence"], "median_min"),
                             key="divergence.median_min", expected=f"at most {d['median_max']}")
    cfg = GateConfig(name, out["inputs"], out["premature_stops"], out["divergence"], out["overruns"],
                     out["loop_recall_baseline"])
    # The replay settings are the shipped defaults unless the file pins others on purpose: say so.
    ps = out["premature_stops"]
    for key, setting in (("patience", "chat.research_no_progress_rounds"), ("rule", "chat.research_stop_rule")):
        if key in data.get("premature_stops", {}) and ps[key] != SPECS[setting].default:
            cfg.warnings.append(f"{name}:{_line_of(text, ['premature_stops'], key)}: premature_stops.{key} = "
                                f"{ps[key]!r} differs from the shipped default {setting} = "
                                f"{SPECS[setting].default!r}: the gate judges another rule than the one shipped")
    return cfg


def _baseline(value: Any, name: str, text: str, corpus: str, line: int | None) -> dict[str, Any]:
    where = f"loop_recall_baseline.{corpus}"
    tline = _line_of(text, ["loop_recall_baseline", corpus], None) or line
    if not isinstance(value, dict):
        raise UserInputError("must be a table", file=name, line=tline, key=where,
                             expected="recall, caught, loops, commit, rule")
    for k, v in value.items():
        kline = _line_of(text, ["loop_recall_baseline", corpus], k) or tline
        if k not in BASELINE_KEYS:
            raise UserInputError("unknown key", file=name, line=kline, key=f"{where}.{k}", expected=", ".join(BASELINE_KEYS))
        _check_value(v, BASELINE_KEYS[k], name, kline, f"{where}.{k}")
    if "recall" not in value:
        raise UserInputError("required key is missing", file=name, line=tline, key=f"{where}.recall",
                             expected="the share of labelled loops the shipped rule caught")
    return dict(value)


def load_config(path: str | Path) -> GateConfig:
    return parse_config(read_user_file(path, "the gate config"), str(path))


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
    for label in labels.runs.values():
        name = corpus_name(label.file) if label.file else "labels"
        if name in per_run and label.name not in seen:
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
                           "figure": f"{src.premature} of {src.useful} useful runs ({share:.1%})",
                           "threshold": f"≤ {ps['max_premature']} (strict)" if strict
                           else f"≤ {ps['max_premature_share']:.0%}", "passed": ok})
            c.passed &= ok
        if src.loops:
            # Loop recall is the rule's quality, not an invalidation condition:
            # it gates only against the baseline pinned for the shipped rule, so
            # a change that catches fewer labelled loops fails; the goal is shown.
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
                           "figure": f"{src.caught} of {src.loops} loops caught ({recall:.0%})",
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
    rule_words = (f"the record's rule at patience {ps['patience']}, {describe(novelty_config(cfg))}"
                  if ps["rule"] == "record" and not ps["rule_params"] else
                  f"rule {ps['rule']}" + "".join(f", {k}={v}" for k, v in ps["rule_params"].items()))
    c.details.append(f"round logs and raw trajectories replayed by {rule_words}, user turns {ps['user_turns']}; a "
                     f"loop is caught by a stop from its first round to {ps['loop_slack']} round(s) after its last")
    return c


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
    """Judged on the counting mode each run's budget used (issue 14). Runs
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
    from .token_overruns import token_overrun_details, token_overrun_row, token_overruns
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
    return [premature_stops(frames, labels, cfg, expect_all), divergence(frames, cfg), overruns(frames, cfg)], frames, \
        list(cfg.warnings) + list(frames.warnings)
