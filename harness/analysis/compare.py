"""`imprint compare`: stop rules side by side on the labelled corpora.

Every rule is replayed over every labelled run (each reply with the rule
reset, as in the loop) and judged by the one definition of a caught loop
(`realruns.labels.judge`: a stop from the loop's first round to `slack`
rounds after its last). Runs are split by task exactly as `imprint tune`
splits them (`stops.Split`), so a rule's dev and held-out figures are
comparable with the tuner's. Per rule, per corpus and part:

- loop recall and premature stops on useful runs (the gate's two figures);
- stops before a loop (a stop earlier than the loop's first round that
  caught no earlier loop: the loop never ran, but the stop was not its doing);
- the median latency, rounds from a caught loop's first round to the stop;
- rounds spent inside labelled loops before the stop, and the tokens they
  cost, estimated from the round log under the record's accounting (the
  byte estimate, 3 bytes a token, under both settlement policies; see
  `TokenReplay`), with the round at which the record's default token budget
  would have ended the run anyway.

Stops come from `stops.rules_stops`: the record's rule through the tuner's
cached per-round progress (`sweep.compute_progress`), so its cost is tune's;
every other rule replayed directly, a run at a time, all of them over the
same round views.
"""
from __future__ import annotations

import json
import sys
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from imprint_core.budget import POLICIES, TokenBudget, TokenLedger
from imprint_core.counting import ByteEstimateCounter
from imprint_core.loop import LoopConfig
from imprint_core.settings import SPECS
from imprint_core.stoprules import resolve

from ..realruns.labels import LOOP_SLACK, Judgement, Tally, judge
from .sweep.cache import ProgressCache
from .stats import CONFIDENCE, Difference, Rate, mcnemar, paired_differences, rate
from .sweep.progress import TuneRun
from .sweep.stops import PARTS, RuleChoice, Split, rule_stops, rules_stops  # noqa: F401  (RuleChoice, rule_stops: compare's names too)

DEFAULT_RULES = ("record", "record[patience=4]", "round-cap", "identical-batch", "openhands", "gemini-cli",
                 "result-aware-repeat", "any", "outcome-repeat", "repeat-aware")
RESEARCH_MAX_OUTPUT = LoopConfig().research_max_output_tokens   # what each research request reserves for output
SETUP_BYTES = 1_200                # system prompt, question and tool schemas: what every prompt starts with
TOKEN_BUDGET = SPECS["chat.research_token_budget"].default


# ---- tokens a round log would have cost ---------------------------------------------------------------------
@dataclass
class TokenReplay:
    """A round log's requests under the record's accounting, settled by the
    core's `TokenLedger` (one per policy, `settle_counted`): round r's
    prompt is the setup plus every earlier round's calls and results,
    counted by the byte estimate (`ByteEstimateCounter`); its output is its
    calls; each request reserves the prompt plus the loop's research output
    allowance (`LoopConfig.research_max_output_tokens`) and reuses the
    previous request's prompt and output. `budget_end`: the last round the
    default token budget (`TokenBudget.admits`) lets run under each policy
    (None: the run fits). A reply starts a new context, as in the loop; the
    budget's usage runs over the whole run."""
    reserve: list[int]
    prefix_refund: list[int]
    budget_end: dict[str, int | None]


def token_replay(run: TuneRun, budget: int = TOKEN_BUDGET, max_output: int = RESEARCH_MAX_OUTPUT) -> TokenReplay:
    counter = ByteEstimateCounter()
    ledgers = {policy: TokenLedger(sys.maxsize, policy) for policy in POLICIES}   # charges only: never refuses
    limits = {policy: TokenBudget(budget, ledger.totals) for policy, ledger in ledgers.items()}
    charged: dict[str, list[int]] = {policy: [] for policy in POLICIES}
    end: dict[str, int | None] = {policy: None for policy in POLICIES}
    for i, rep in enumerate(run.full):
        context = SETUP_BYTES          # a reply starts a new context (and, in the loop, new budgets)
        before = 0                     # the previous request's prompt + output, in tokens
        for rnd in rep.rounds:
            out_bytes = sum(len(json.dumps({"name": c.tool, "arguments": c.args}, ensure_ascii=False).encode())
                            for c in rnd.calls)
            prompt, output = counter.to_tokens(context), counter.to_tokens(out_bytes)
            for policy, ledger in ledgers.items():
                if end[policy] is None and not limits[policy].admits(prompt + max_output):
                    end[policy] = rnd.number - 1
                r = ledger.reserve(prompt, max_output, context_id=f"reply-{i}")
                charged[policy].append(ledger.settle_counted(r, reused=before, output=output,
                                                             counter=counter.name).charged)
            before = prompt + output
            context += out_bytes + sum(len(c.result.encode()) for c in rnd.calls)
    return TokenReplay(charged["reserve"], charged["prefix-refund"], end)


# ---- figures ------------------------------------------------------------------------------------------------
SHIPPED = SPECS["chat.research_stop_rule"].default
"""The rule every other is compared with, run by run: the shipped default
(`chat.research_stop_rule`), at its own parameters."""


@dataclass(frozen=True)
class RunJudged:
    """One rule's stop in one run, judged by the run's label and its outcome."""
    eligible: bool          # a run that can be harmed: it succeeded, or is labelled useful
    harmed: bool            # such a run stopped before its last round (or before its useful end)
    failed: bool
    rounds: int
    saved_rounds: int       # a failed run: rounds after the stop
    tokens: tuple[int, int]         # the run's estimated tokens (reserve, prefix-refund)
    saved_tokens: tuple[int, int]   # a failed run: those of the rounds after the stop
    judgement: Judgement            # the label's verdict (`realruns.labels.judge`)
    loops: tuple[tuple[int, int, bool], ...]   # per labelled loop within the run, in order: first, last, caught

    @property
    def caught(self) -> tuple[bool, ...]:
        return tuple(hit for _, _, hit in self.loops)


@dataclass
class Cell(Tally):
    """The gate's tally (runs, useful, premature, loops, caught, recall,
    premature share), the outcomes' figures (harm, savings) and what compare
    adds to them; `paired`: the paired tests against the shipped rule on the
    same runs (empty for the shipped rule itself)."""
    early: int = 0
    latencies: list[int] = field(default_factory=list)
    loop_rounds: int = 0
    loop_total: int = 0
    tokens_reserve: int = 0
    tokens_prefix: int = 0
    ended_by_budget: int = 0      # looping runs the default budget would have ended before their loop's end
    successes: int = 0
    failures: int = 0
    harm: int = 0
    harm_of: int = 0
    failed_rounds: int = 0
    saved_rounds: int = 0
    failed_tokens: list[int] = field(default_factory=lambda: [0, 0])   # reserve, prefix-refund
    saved_tokens: list[int] = field(default_factory=lambda: [0, 0])
    saving_ci: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    paired: dict[str, Any] = field(default_factory=dict)

    @property
    def median_latency(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None

    @property
    def harm_rate(self) -> Rate:
        return rate(self.harm, self.harm_of)

    @property
    def recall_rate(self) -> Rate:
        return rate(self.caught, self.loops)

    @property
    def premature_rate(self) -> Rate:
        return rate(self.premature, self.useful)

    def saving(self, what: str = "rounds") -> float | None:
        """Share of the failed runs' rounds (or tokens, `reserve` / `prefix-refund`) after the stop."""
        if what == "rounds":
            return self.saved_rounds / self.failed_rounds if self.failed_rounds else None
        i = POLICIES.index(what)
        return self.saved_tokens[i] / self.failed_tokens[i] if self.failed_tokens[i] else None

    def to_dict(self) -> dict[str, Any]:
        out = {"runs": self.runs, "useful": self.useful, "premature": self.premature,
               "premature_share": self.premature_share, "loops": self.loops, "caught": self.caught,
               "recall": self.recall, "stops_before_loop": self.early, "median_latency": self.median_latency,
               "latencies": self.latencies, "loop_rounds_spent": self.loop_rounds, "loop_rounds_total": self.loop_total,
               "loop_tokens_reserve": self.tokens_reserve, "loop_tokens_prefix_refund": self.tokens_prefix,
               "looping_runs_ended_by_budget": self.ended_by_budget,
               "outcome_success": self.successes, "outcome_failure": self.failures,
               "outcome_unknown": self.runs - self.successes - self.failures}
        out |= self.harm_rate.to_dict("harm") | self.recall_rate.to_dict("loop_recall") \
            | self.premature_rate.to_dict("premature")
        out["failed_rounds"] = self.failed_rounds
        out["saved_rounds"] = self.saved_rounds
        for what in ("rounds", *POLICIES):
            key = f"saving_{what.replace('-', '_')}_share"
            lo, hi = self.saving_ci.get(what, (None, None))
            out |= {key: self.saving(what), f"{key}_ci95_low": lo, f"{key}_ci95_high": hi}
        out["vs_shipped"] = self.paired
        return out


def judge_run(run: TuneRun, stop: int | None, tokens: TokenReplay, slack: int) -> RunJudged:
    """A stop judged by the run's label (loops caught, a useful run cut short)
    and by its recorded outcome (a successful run cut short is harm; the
    rounds and tokens after a failed run's stop are saved)."""
    label, rounds = run.label, run.rounds
    success, failed = run.outcome.value == "success", run.outcome.value == "failure"
    j = judge(label, stop, rounds, slack)
    harmed = bool(j.premature) or success and stop is not None and stop < rounds
    after = 0 if stop is None else max(0, rounds - stop)
    charges = (tokens.reserve, tokens.prefix_refund)
    total = tuple(sum(c) for c in charges)
    saved = tuple(sum(c[stop:]) for c in charges) if stop is not None and failed else (0, 0)
    # The same window as `judge`: a stop in the loop or up to `slack` after it, or before a later loop
    # when it caught an earlier one; kept per loop for the paired tests and the latencies.
    loops, caught_before = [], False
    for a, b in label.loops:
        b = min(b, rounds)
        if b < a:
            continue
        hit = stop is not None and (a <= stop <= b + slack or stop < a and caught_before)
        loops.append((a, b, hit))
        caught_before = caught_before or hit
    return RunJudged(success or label.useful, harmed, failed, rounds, after if failed else 0, total, saved, j,
                     tuple(loops))


def add_run(cell: Cell, run: TuneRun, stop: int | None, tokens: TokenReplay, slack: int,
            judged: RunJudged | None = None) -> RunJudged:
    label = run.label
    judged = judged or judge_run(run, stop, tokens, slack)
    j = judged.judgement
    cell.runs += 1
    cell.useful += label.useful
    cell.premature += j.premature
    cell.loops += j.loops
    cell.caught += j.loops_caught
    cell.loop_rounds += j.loop_rounds
    cell.loop_total += j.loop_total
    cell.successes += run.outcome.value == "success"
    cell.failures += judged.failed
    cell.harm += judged.harmed
    cell.harm_of += judged.eligible
    if judged.failed:
        cell.failed_rounds += judged.rounds
        cell.saved_rounds += judged.saved_rounds
        for i in range(2):
            cell.failed_tokens[i] += judged.tokens[i]
            cell.saved_tokens[i] += judged.saved_tokens[i]
    for a, b, caught in judged.loops:
        if caught and stop >= a:
            cell.latencies.append(stop - a)
        if stop is not None and stop < a and not caught:
            cell.early += 1
        last = b if stop is None else min(stop, b)
        for r in range(a, last + 1):
            if r <= len(tokens.reserve):
                cell.tokens_reserve += tokens.reserve[r - 1]
                cell.tokens_prefix += tokens.prefix_refund[r - 1]
    if label.loops:
        end = tokens.budget_end["prefix-refund"]
        if end is not None and end < max(b for _, b in label.loops):
            cell.ended_by_budget += 1
    return judged


@dataclass
class Comparison:
    rules: list[RuleChoice]
    runs: list[TuneRun]
    stops: dict[str, list[int | None]]          # rule label -> stop per run
    parts: dict[str, str]                       # task -> part
    slack: int = LOOP_SLACK
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)   # (rule, corpus or "all", part or "all")
    judged: dict[str, list[RunJudged]] = field(default_factory=dict)       # rule label -> per run
    shipped: str = SHIPPED                      # the label of the rule the others are paired with

    @property
    def corpora(self) -> list[str]:
        return list(dict.fromkeys(r.corpus for r in self.runs))

    def cell(self, rule: str, corpus: str = "all", part: str = "all") -> Cell:
        return self.cells[(rule, corpus, part)]

    def members(self, corpus: str = "all", part: str = "all") -> list[int]:
        """Indices of the runs of a corpus and part ("all": any)."""
        return [i for i, r in enumerate(self.runs)
                if corpus in ("all", r.corpus) and part in ("all", self.parts[r.task])]

    def to_dict(self) -> dict[str, Any]:
        return {"rules": [{"label": c.label, "spec": c.spec, "params": c.params} for c in self.rules],
                "shipped": self.shipped, "confidence": CONFIDENCE,
                "slack": self.slack, "corpora": self.corpora, "parts": ["dev", "held-out", "all"],
                "cells": [{"rule": r, "corpus": c, "part": p, **cell.to_dict()}
                          for (r, c, p), cell in self.cells.items()],
                "runs": [{"corpus": r.corpus, "name": r.name, "task": r.task, "part": self.parts[r.task],
                          "rounds": r.rounds, **r.outcome.to_dict(),
                          "stops": {c.label: self.stops[c.label][i] for c in self.rules}}
                         for i, r in enumerate(self.runs)]}


def _shipped_choice(rules: Sequence[RuleChoice]) -> RuleChoice:
    """The shipped rule among `rules` (its name, no parameters), or a new choice of it."""
    for c in rules:
        if not c.params and resolve(c.spec).name == resolve(SHIPPED).name:
            return c
    return RuleChoice(SHIPPED, SHIPPED, {})


Figure = tuple[np.ndarray, np.ndarray, np.ndarray]   # a paired difference's (a, b, den), one value a run


class _Columns:
    """One rule's judgements over every run as columns (the figures the
    intervals and paired tests read, `RunJudged`'s), so that each corpus
    and part takes its runs' values by index."""

    def __init__(self, judged: Sequence[RunJudged]):
        def col(f, dtype=float):
            return np.fromiter(map(f, judged), dtype=dtype, count=len(judged))
        self.harmed, self.eligible = col(lambda j: j.harmed, bool), col(lambda j: j.eligible, bool)
        failed = col(lambda j: j.failed, bool)
        self.saved = {"rounds": col(lambda j: j.saved_rounds), "reserve": col(lambda j: j.saved_tokens[0]),
                      "prefix-refund": col(lambda j: j.saved_tokens[1])}
        self.failed = {"rounds": col(lambda j: j.rounds) * failed, "reserve": col(lambda j: j.tokens[0]) * failed,
                       "prefix-refund": col(lambda j: j.tokens[1]) * failed}
        # each labelled loop of each run, in order: the same loops for every rule (the label's, within the run)
        self.caught = np.array([hit for j in judged for hit in j.caught], dtype=bool)
        self.loop_run = np.array([i for i, j in enumerate(judged) for _ in j.loops], dtype=np.intp)


def _paired_figures(mine: _Columns, base: _Columns, idx: np.ndarray) -> dict[str, Figure]:
    """The shares a rule (`mine`) is paired with the shipped rule (`base`)
    on, over the runs `idx`: the harm rate and the rounds saved on failed runs."""
    return {"harm_rate": (mine.harmed[idx], base.harmed[idx], mine.eligible[idx]),
            "saving_rounds": (mine.saved["rounds"][idx], base.saved["rounds"][idx], mine.failed["rounds"][idx])}


def _paired(mine: _Columns, base: _Columns, idx: np.ndarray, diffs: dict[str, Difference]) -> dict[str, Any]:
    """A rule (`mine`) against the shipped rule (`base`) on the runs `idx`:
    exact McNemar on harm and on loops caught, and paired bootstraps over
    tasks (`diffs`, of `_paired_figures`) of the harm rate and of the rounds
    saved on failed runs."""
    elig = idx[mine.eligible[idx]]
    out = mcnemar(mine.harmed[elig], base.harmed[elig]).to_dict("harm")
    out |= diffs["harm_rate"].to_dict("harm_rate")
    inside = np.zeros(len(mine.harmed), dtype=bool)
    inside[idx] = True
    loops = inside[mine.loop_run]
    out |= mcnemar(mine.caught[loops], base.caught[loops]).to_dict("loops_caught")
    out |= diffs["saving_rounds"].to_dict("saving_rounds")
    return out


def _saving_figures(mine: _Columns, idx: np.ndarray) -> dict[str, Figure]:
    """Each saving share as a paired difference against nothing saved (a
    share's own interval, resampled by task like every other figure)."""
    zero = np.zeros(len(idx))
    return {what: (mine.saved[what][idx], zero, mine.failed[what][idx]) for what in ("rounds", *POLICIES)}


def _intervals(comp: Comparison) -> None:
    """Every cell's saving intervals and paired tests. The cells of one
    corpus and part share their runs and tasks, so all their bootstraps are
    drawn at once (`paired_differences`: each as it would be alone)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for label, corpus, part in comp.cells:
        groups.setdefault((corpus, part), []).append(label)
    cols = {label: _Columns(judged) for label, judged in comp.judged.items()}
    base = cols[comp.shipped]
    for (corpus, part), labels in groups.items():
        idx = np.array(comp.members(corpus, part), dtype=np.intp)
        wanted = []
        for label in labels:
            wanted += [(label, "saving", what, fig) for what, fig in _saving_figures(cols[label], idx).items()]
            if label != comp.shipped:
                wanted += [(label, "paired", what, fig)
                           for what, fig in _paired_figures(cols[label], base, idx).items()]
        diffs = paired_differences([fig for *_, fig in wanted], [comp.runs[i].task for i in idx])
        found: dict[tuple[str, str], dict[str, Difference]] = {}
        for (label, kind, what, _), d in zip(wanted, diffs):
            found.setdefault((label, kind), {})[what] = d
        for label in labels:
            cell = comp.cell(label, corpus, part)
            cell.saving_ci = {what: (d.low, d.high) for what, d in found[(label, "saving")].items()}
            if label != comp.shipped:
                cell.paired = _paired(cols[label], base, idx, found[(label, "paired")])


def compared(rules: Sequence[RuleChoice], against: RuleChoice | None = None) -> tuple[list[RuleChoice], RuleChoice]:
    """The rules `compare` replays (`rules`, and first the one the others are
    paired with when not among them: `against`, or the shipped rule), and that one."""
    rules = list(rules)
    shipped = against or _shipped_choice(rules)
    if shipped not in rules:
        rules.insert(0, shipped)
    return rules, shipped


def compare(runs: Sequence[TuneRun], rules: Sequence[RuleChoice], *, split: Split | None = None,
            slack: int = LOOP_SLACK, cache: ProgressCache | None = None, jobs: int | None = 1,
            progress: Callable[[int], None] | None = None, against: RuleChoice | None = None) -> Comparison:
    """Every rule over every run, with the shipped rule among them (added
    first when not named); every cell of (rule, corpus, part) with its
    intervals and, for each other rule, its paired tests against the shipped
    rule on the same runs. `against`: another rule to pair with instead of
    the shipped one (a decision made before a rule shipped, made again after)."""
    split = split or Split()
    runs = list(runs)
    rules, shipped = compared(rules, against)
    dev_tasks = {r.task for r in runs if r.always_dev}
    parts = {r.task: "dev" if r.task in dev_tasks else split.part(r.task) for r in runs}
    stops = rules_stops(rules, runs, cache=cache, jobs=jobs, progress=progress)
    tokens = [token_replay(r) for r in runs]
    out = Comparison(rules, runs, stops, parts, slack, shipped=shipped.label)
    for c in rules:
        judged = out.judged[c.label] = []
        for i, run in enumerate(runs):
            j = judge_run(run, stops[c.label][i], tokens[i], slack)
            judged.append(j)
            for corpus in (run.corpus, "all"):
                for part in (parts[run.task], "all"):
                    add_run(out.cells.setdefault((c.label, corpus, part), Cell()), run, stops[c.label][i],
                            tokens[i], slack, j)
    _intervals(out)
    return out


# ---- output --------------------------------------------------------------------------------------------------
def _frac(a: int, b: int, share: float | None) -> str:
    return f"{a}/{b} ({share:.0%})" if b and share is not None else "–"


def _pp(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f}"


def _share_ci(share: float | None, ci: tuple[float | None, float | None]) -> str:
    if share is None:
        return "–"
    lo, hi = ci
    return f"{share:.1%} ({lo:.1%}–{hi:.1%})" if lo is not None else f"{share:.1%}"


def _p(x: float | None) -> str:
    return "–" if x is None else f"{x:.2g}"


COLUMNS = {
    "runs ✓/✗/?": "runs: successful / failed / outcome unknown",
    "harm": "successful (or labelled useful) runs stopped before their end: k/n (rate, 95% Wilson interval)",
    "Δharm pp (upper 95%) p": "harm rate minus the shipped rule's on the same runs, in percentage points, with the "
                              "one-sided 95% upper bound (paired bootstrap over tasks) and the exact McNemar p",
    "rounds saved": "share of the failed runs' rounds after the stop (95% interval, bootstrap over tasks)",
    "Δsaved pp (95%)": "rounds saved minus the shipped rule's, percentage points (paired bootstrap over tasks)",
    "tokens saved res / pref": "share of the failed runs' estimated tokens after the stop, under reserve / "
                               "prefix-refund settlement",
    "loops caught": "labelled loops caught: k/n (rate, 95% Wilson interval)",
    "Δloops p": "loops caught only by this rule : only by the shipped rule, exact McNemar p",
    "premature": "labelled useful runs stopped before their useful end: k/n (rate)",
    "early": "stops before a loop that caught none (count)",
    "latency (rounds)": "median rounds from a caught loop's first round to the stop",
    "loop tokens reserve / prefix-refund": "estimated tokens spent inside labelled loops before the stop, as "
                                           "`reserve` charges them (every request's whole prompt and output "
                                           "allowance, again each round) / as `prefix-refund` charges them (only "
                                           "the new part of the prompt and the output): the first is often 10 to "
                                           "100 times the second",
}
"""What each column of the table means (the Markdown prints this legend)."""


def row(comp: Comparison, rule: str, corpus: str, part: str) -> dict[str, Any] | None:
    cell = comp.cells.get((rule, corpus, part))
    if cell is None:
        return None
    pr = cell.paired
    lat = cell.median_latency
    unknown = cell.runs - cell.successes - cell.failures
    harm_diff = "–" if not pr else f"{_pp(pr.get('harm_rate_diff'))} ({_pp(pr.get('harm_rate_diff_upper95'))}) " \
                                   f"p={_p(pr.get('harm_mcnemar_p'))}"
    saved_diff = "–" if not pr or pr.get("saving_rounds_diff") is None else \
        f"{_pp(pr['saving_rounds_diff'])} ({_pp(pr['saving_rounds_diff_ci95_low'])}, " \
        f"{_pp(pr['saving_rounds_diff_ci95_high'])})"
    loops_diff = "–" if not pr or not cell.loops else \
        f"{pr['loops_caught_only_candidate']}:{pr['loops_caught_only_shipped']} p={_p(pr['loops_caught_mcnemar_p'])}"
    tok = [cell.saving(w) for w in POLICIES]
    return {"rule": rule, "corpus": corpus, "part": part,
            "runs ✓/✗/?": f"{cell.successes}/{cell.failures}/{unknown}",
            "harm": cell.harm_rate.text(), "Δharm pp (upper 95%) p": harm_diff,
            "rounds saved": _share_ci(cell.saving(), cell.saving_ci.get("rounds", (None, None))),
            "Δsaved pp (95%)": saved_diff,
            "tokens saved res / pref": "–" if tok[0] is None else f"{tok[0]:.1%} / {tok[1]:.1%}",
            "loops caught": cell.recall_rate.text(), "Δloops p": loops_diff,
            "premature": _frac(cell.premature, cell.useful, cell.premature_share),
            "early": str(cell.early) if cell.loops else "–",
            "latency (rounds)": f"{lat:g}" if lat is not None else "–",
            "loop tokens reserve / prefix-refund": f"{cell.tokens_reserve:,} / {cell.tokens_prefix:,}"
            if cell.loops else "–"}


def rows(comp: Comparison, parts: Sequence[str] = ("held-out", "dev", "all"),
         corpora: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Pooled rows first (every corpus together), then each corpus: per rule and part."""
    out = []
    for corpus in corpora if corpora is not None else ["all", *comp.corpora]:
        for part in parts:
            for c in comp.rules:
                r = row(comp, c.label, corpus, part)
                if r is not None:
                    out.append(r)
    return out


def pooled_part(comp: Comparison) -> str:
    """The part the short tables show: held-out, or every run when nothing is held out."""
    return "held-out" if comp.members("all", "held-out") else "all"


TERMINAL_LEGEND = (
    "Units: harm, loops caught, premature: runs, k/n (rate, 95% Wilson interval); rounds saved and tokens saved: "
    "% of the failed runs' rounds and estimated tokens after the stop; Δ columns: percentage points against the "
    "shipped rule on the same runs; early: stops before a loop (runs); latency: rounds, the median from a caught "
    "loop's first round to the stop; loop tokens: estimated tokens spent inside labelled loops before the stop, "
    "charged under reserve (the whole prompt again each round) / under prefix-refund (only the new part), hence "
    "often 10 to 100 times apart.")
"""The line under `imprint compare`'s terminal table: what its figures count."""


def _table(table: list[dict[str, Any]], drop: Sequence[str] = ()) -> list[str]:
    if not table:
        return ["(no runs)"]
    cols = [c for c in table[0] if c not in drop]
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + \
        ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in table]


def markdown(comp: Comparison, command: str, parts: Sequence[str] = PARTS, decisions: Sequence[Any] = ()) -> str:
    held = sum(comp.parts[r.task] == "held-out" for r in comp.runs)
    outcomes = {v: sum(r.outcome.value == v for r in comp.runs) for v in ("success", "failure", "unknown")}
    lines = ["# Stop rules compared on the labelled corpora", "",
             f"Made by `{command}`.", "",
             f"{len(comp.runs)} runs in {len(comp.corpora)} corpora ({', '.join(comp.corpora)}): "
             f"{outcomes['success']} successful, {outcomes['failure']} failed and {outcomes['unknown']} of unknown "
             f"outcome as their sources recorded them; {sum(bool(r.label.loops) for r in comp.runs)} with labelled "
             f"loops. Split by task as `imprint tune` splits them (held-out: {held} runs). Every rule is paired with "
             f"the shipped rule (`{comp.shipped}`) on the same runs. A loop is caught by a stop from its first round to "
             f"{comp.slack} round(s) after its last. Tokens: the record's byte estimate, {RESEARCH_MAX_OUTPUT} output "
             f"tokens reserved a request. Intervals are {CONFIDENCE:.0%}.", ""]
    for d in decisions:
        lines += ["## Decision", "", f"`--decide {d.candidate}` on the {d.part} part, by the rule of "
                  "`research-loop.md` (\"Changing the default stop rule\"):", "", f"**{d.verdict}.**", ""]
        lines += [f"- {'holds' if c.holds else '**fails**'}: {c.name}. {c.detail}" for c in d.conditions]
        lines.append("")
    lines += ["## Pooled (every corpus)", ""] + _table(rows(comp, ("held-out", "dev", "all"), ["all"]), ("corpus",))
    lines += ["", f"## Per corpus, held-out part", ""] + _table(rows(comp, ("held-out",), comp.corpora), ("part",))
    lines += ["", "## Per corpus and part", ""] + _table(rows(comp, PARTS, comp.corpora))
    lines += ["", "## Columns", ""] + [f"- **{k}**: {v}." for k, v in COLUMNS.items()]
    lines += ["", "## Rules", ""]
    for c in comp.rules:
        info = resolve(c.spec)
        shown = {k: v for k, v in info.params.items() if k != "novelty"} | c.params
        lines.append(f"- `{c.label}`: {info.summary} Parameters: "
                     + (", ".join(f"{k}={v!r}" for k, v in shown.items()) or "none") + f". Source: {info.source}.")
    looping = [r for r in comp.runs if r.label.loops]
    if comp.rules:
        ended = comp.cell(comp.rules[0].label).ended_by_budget
        lines += ["", f"Under the record's default token budget ({TOKEN_BUDGET:,} reservations, prefix-refund), "
                      f"{ended} of {len(looping)} looping runs would have been ended by the budget before their "
                      "last labelled loop ended, whatever the stop rule."]
    return "\n".join(lines) + "\n"


def _point(cell: Cell, x_of, y_of, dx: float = 0.0, dy: float = 0.0) -> tuple[float, ...] | None:
    """One rule's point and its intervals' ends in percent (x: harm, y: the
    other figure), drawn `dx`, `dy` percentage points off its place: (x, y,
    x low, x high, y low, y high); None without both figures."""
    x, xlo, xhi = x_of(cell)
    y, ylo, yhi = y_of(cell)
    if x is None or y is None:
        return None
    px, py = x * 100 + dx, y * 100 + dy
    return (px, py, px - max(0, (x - xlo) * 100), px + max(0, (xhi - x) * 100),
            py - max(0, (y - ylo) * 100), py + max(0, (yhi - y) * 100))


PERCENT_TICKS = range(0, 101, 20)
MARKER_SIZE, CAP_SIZE, BAR_WIDTH, ALPHA = 6.0, 4.0, 0.8, 0.85
"""Points, as `errorbar(markersize=6, capsize=2, elinewidth=0.8, alpha=0.85)` drew them."""


def _draw_points(ax, points: Sequence[tuple[tuple[float, ...], str, Any]]) -> None:
    """Each (point, marker, colour) as `errorbar` draws it (bars, caps, then
    the markers above them), as two collections for the panel instead of
    seven artists a rule: the plot's cost was its thousands of artists."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.markers import MarkerStyle
    from matplotlib.transforms import IdentityTransform
    if not points:
        return
    bars, caps, where, colors = [], [], [], []
    for (x, y, x0, x1, y0, y1), _, color in points:
        bars += [((x0, y), (x1, y)), ((x, y0), (x, y1))]
        caps += [("|", x0, y), ("|", x1, y), ("_", x, y0), ("_", x, y1)]
    ax.add_collection(LineCollection(bars, colors=[c for *_, c in points for _ in range(2)], linewidths=BAR_WIDTH,
                                     alpha=ALPHA, zorder=2), autolim=False)
    items = [(m, x, y, CAP_SIZE, c, False) for (*_, c), four in zip(points, zip(*[iter(caps)] * 4))
             for m, x, y in four]
    items += [(m, p[0], p[1], MARKER_SIZE, c, True) for p, m, c in points]
    paths = []
    for m, *_ in items:
        style = MarkerStyle(m)
        paths.append(style.get_path().transformed(style.get_transform()))
    ax.add_collection(PathCollection(
        paths, sizes=[s * s for *_, s, _, _ in items], offsets=[(x, y) for _, x, y, *_ in items],
        offset_transform=ax.transData, transform=IdentityTransform(), edgecolors=[c for *_, c, _ in items],
        facecolors=[c if filled else "none" for *_, c, filled in items], linewidths=1.0, alpha=ALPHA,
        zorder=2.1), autolim=False)


def _legend_handle(marker: str, color):
    """What `errorbar` would have returned for the legend: a marker with its
    bars and caps, drawn by the legend only."""
    from matplotlib.collections import LineCollection
    from matplotlib.container import ErrorbarContainer
    from matplotlib.lines import Line2D
    line = Line2D([], [], marker=marker, linestyle="none", color=color, markersize=MARKER_SIZE, alpha=ALPHA)
    cap = Line2D([], [], marker="|", linestyle="none", color=color, markersize=CAP_SIZE, alpha=ALPHA)
    bars = LineCollection([], colors=[color], linewidths=BAR_WIDTH, alpha=ALPHA)
    return ErrorbarContainer((line, (cap,), (bars,)), has_xerr=True, has_yerr=True)


DODGE_RADIUS = 3.0
"""Percentage points: how far apart markers that would coincide are drawn."""


def dodge(points: Sequence[tuple[float, float] | None], near: float = 2.0,
          radius: float = DODGE_RADIUS) -> list[tuple[float, float]]:
    """Offsets (dx, dy) that spread markers that would hide one another
    (within `near` points of each other, as at (0, 0) where many rules catch
    nothing and harm nothing) evenly on a circle of `radius` around their
    place; a marker alone keeps its place."""
    import math
    groups: dict[tuple[int, int], list[int]] = {}
    for i, pt in enumerate(points):
        if pt is not None:
            groups.setdefault((round(pt[0] / near), round(pt[1] / near)), []).append(i)
    out = [(0.0, 0.0)] * len(points)
    for members in groups.values():
        if len(members) > 1:
            for k, i in enumerate(members):
                a = math.pi / 2 + 2 * math.pi * k / len(members)
                out[i] = (radius * math.cos(a), radius * math.sin(a))
    return out


def _harm_xy(cell: Cell):
    ci = cell.harm_rate.interval
    return (cell.harm_rate.share, *ci) if ci else (None, None, None)


def _recall_xy(cell: Cell):
    ci = cell.recall_rate.interval
    return (cell.recall_rate.share, *ci) if ci else (None, None, None)


def _saving_xy(cell: Cell):
    lo, hi = cell.saving_ci.get("rounds", (None, None))
    s = cell.saving()
    return (s, lo if lo is not None else s, hi if hi is not None else s)


def plot(comp: Comparison, path, part: str = "held-out") -> None:
    """Harm against loops caught and against rounds saved on failed runs, side
    by side, pooled first and then per corpus, on `part`; error bars are the
    95% intervals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.layout_engine import TightLayoutEngine
    if not comp.members("all", part):
        part = "all"            # nothing held out (`--holdout 0`): every run
    panels = [(corpus, metric) for corpus in ["all", *comp.corpora]
              for metric in ((_recall_xy, "loops caught (%)"), (_saving_xy, "failed runs' rounds saved (%)"))]
    ncols = 4                           # two corpora a row, each with its two panels side by side
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols, 3.4 * nrows), squeeze=False)
    markers = "osD^v<>Ph*X"
    legend = []
    for k, (corpus, (y_of, ylabel)) in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        cells = [comp.cells.get((c.label, corpus, part)) for c in comp.rules]
        where = []
        for cell in cells:
            x, y = (_harm_xy(cell)[0], y_of(cell)[0]) if cell is not None else (None, None)
            where.append(None if x is None or y is None else (x * 100, y * 100))
        offsets = dodge(where)
        drawn = {i: (p, markers[i % len(markers)], plt.cm.tab20(i % 20)) for i, cell in enumerate(cells)
                 if cell is not None and (p := _point(cell, _harm_xy, y_of, *offsets[i])) is not None}
        _draw_points(ax, list(drawn.values()))
        if k == 0:
            # the legend names every rule drawn once, with the marker and colour it has in every panel
            legend = [(_legend_handle(m, color), comp.rules[i].label) for i, (_, m, color) in drawn.items()]
        total = comp.cells.get((comp.rules[0].label, corpus, part)) if comp.rules else None
        title = ("pooled" if corpus == "all" else corpus) + f" ({part})"
        if total is not None:
            title += f"\n{total.harm_of} can be harmed, {total.loops} loops, {total.failures} failed"
        # y given: matplotlib would otherwise look for decorations above each axes (none here) at every layout
        ax.set_title(title, fontsize=8, y=1.0)
        ax.set_xlabel("harm (% of successful runs)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        # the ticks the default locator gives these limits, fixed: it also made two outside them, and
        # every tick is several artists to lay out and draw on each of the panels
        ax.set_xticks(PERCENT_TICKS, [str(t) for t in PERCENT_TICKS])
        ax.set_yticks(PERCENT_TICKS, [str(t) for t in PERCENT_TICKS])
        ax.set_xlim(-6, 106)
        ax.set_ylim(-6, 106)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    if legend:
        fig.legend(*zip(*legend), loc="lower center", ncol=min(len(legend), 4), fontsize=8, frameon=False,
                   title=f"rules ({part} part; markers that would coincide are spread {DODGE_RADIUS:g} points "
                         "around their place)", title_fontsize=8)
    # The layout engine run once, not left on the figure: savefig would lay it out again in a pass of its own.
    TightLayoutEngine(rect=(0, 0.06 if nrows < 4 else 0.035, 1, 1)).execute(fig)
    fig.savefig(path, dpi=100)
    plt.close(fig)
