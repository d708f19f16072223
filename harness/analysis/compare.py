"""`imprint compare`: stop rules side by side on the labelled corpora.

Every rule is replayed over every labelled run (each reply with the rule
reset, as in the loop) and judged by the one definition of a caught loop
(`realruns.labels.judge`: a stop from the loop's first round to `slack`
rounds after its last). Runs are split by task exactly as `imprint tune`
splits them (`tune.Split`), so a rule's dev and held-out figures are
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

The record's rule is computed through the tuner's cached per-round
progress (`sweep.compute_progress`), so its cost is tune's; any other rule
is replayed directly (they are cheap: no text is normalized).
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from imprint_core.counting import DEFAULT_BYTES_PER_TOKEN
from imprint_core.novelty import NoveltyConfig
from imprint_core.settings import SPECS
from imprint_core.stoprules import build, resolve
from imprint_core.stoprules.guard import RuleFailed
from imprint_core.stoprules.builtin import AnyRule

from ..realruns.labels import LOOP_SLACK, Tally, judge
from ..realruns.roundlogs import round_view
from .progresscache import ProgressCache
from .sweep import TuneRun, compute_progress, stop_rounds
from .tune import PARTS, Split

DEFAULT_RULES = ("record", "record[patience=4]", "round-cap", "identical-batch", "openhands", "gemini-cli",
                 "result-aware-repeat", "any", "outcome-repeat", "repeat-aware")
RESEARCH_MAX_OUTPUT = 512          # LoopConfig's research output allowance: what each request reserves
SETUP_BYTES = 1_200                # system prompt, question and tool schemas: what every prompt starts with
TOKEN_BUDGET = SPECS["chat.research_token_budget"].default


@dataclass(frozen=True)
class RuleChoice:
    label: str                      # as the user named it: `gemini-cli[threshold=3]`
    spec: str
    params: dict[str, Any] = field(default_factory=dict)


# ---- tokens a round log would have cost ---------------------------------------------------------------------
@dataclass
class TokenReplay:
    """A round log's requests under the record's accounting: round r's prompt
    is the setup plus every earlier round's calls and results, counted by the
    byte estimate; its output is its calls. `reserve` charges the whole
    reservation (prompt plus `RESEARCH_MAX_OUTPUT`); `prefix-refund` charges
    the prompt past the previous request's prompt and output, plus the
    output. `budget_end`: the last round the default token budget lets run
    under each policy (None: the run fits)."""
    reserve: list[int]
    prefix_refund: list[int]
    budget_end: dict[str, int | None]


def _tokens(nbytes: int) -> int:
    return math.ceil(nbytes / DEFAULT_BYTES_PER_TOKEN)


def token_replay(run: TuneRun, budget: int = TOKEN_BUDGET, max_output: int = RESEARCH_MAX_OUTPUT) -> TokenReplay:
    reserve, prefix = [], []
    end: dict[str, int | None] = {"reserve": None, "prefix-refund": None}
    used = {"reserve": 0, "prefix-refund": 0}
    for rep in run.full:
        context = SETUP_BYTES          # a reply starts a new context (and, in the loop, new budgets)
        before = None                  # the previous request's prompt + output, in tokens
        for rnd in rep.rounds:
            out_bytes = sum(len(json.dumps({"name": c.tool, "arguments": c.args}, ensure_ascii=False).encode())
                            for c in rnd.calls)
            prompt, output = _tokens(context), _tokens(out_bytes)
            charges = {"reserve": prompt + max_output,
                       "prefix-refund": (prompt - before if before is not None else prompt) + output}
            for policy, charge in charges.items():
                if end[policy] is None and used[policy] + prompt + max_output > budget:
                    end[policy] = rnd.number - 1
                used[policy] += charge
            reserve.append(charges["reserve"])
            prefix.append(charges["prefix-refund"])
            before = prompt + output
            context += out_bytes + sum(len(c.result.encode()) for c in rnd.calls)
    return TokenReplay(reserve, prefix, end)


# ---- stops ---------------------------------------------------------------------------------------------------
def _record_fast(choice: RuleChoice) -> tuple[int, NoveltyConfig] | None:
    """A record rule given only patience and novelty fields goes through the
    tuner's cached progress."""
    if resolve(choice.spec).name != "record":
        return None
    info = resolve("record")
    params = dict(choice.params)
    patience = params.pop("patience", info.params["patience"])
    from imprint_core.stoprules import convert
    fields = {k: convert(info, k, v) for k, v in params.items()}
    rule = build("record", {"patience": patience, **fields})   # checks every value
    return rule.patience.patience, rule.config


def rule_stops(choice: RuleChoice, runs: Sequence[TuneRun], *, cache: ProgressCache | None = None,
               jobs: int | None = 1, progress: Callable[[int], None] | None = None) -> list[int | None]:
    """The first stop round of `choice` in every run (None: never)."""
    made = build(choice.spec, choice.params)
    if isinstance(made, AnyRule) and made.specs:
        # The earliest of the members' stops, each member through its own fast path (the record's: cached).
        per = [rule_stops(RuleChoice(n, n, p), runs, cache=cache, jobs=jobs) for n, p in made.specs]
        out = [min((s for s in col if s is not None), default=None) for col in zip(*per)]
        if progress:
            progress(len(runs))
        return out
    fast = _record_fast(choice)
    if fast is not None:
        patience, cfg = fast
        computed, _ = compute_progress(runs, [cfg], jobs=jobs, cache=cache)
        out = [stop_rounds(computed[(0, ri)], run.numbers, [patience])[patience] for ri, run in enumerate(runs)]
        if progress:
            progress(len(runs))
        return out
    info = resolve(choice.spec)          # `made` above already checked the parameters, before any run
    out = []
    for run in runs:
        rule = build(info, choice.params)
        stop = None
        try:
            for i, rep in enumerate(run.full):
                if i:
                    rule.reset()
                for rnd in rep.rounds:
                    if rule.observe(round_view(rnd)):
                        stop = rnd.number
                        break
                if stop is not None:
                    break
        except RuleFailed as exc:     # a user's rule raised (stoprules/guard.py): say in which run
            raise exc.in_run(run.origin or run.name) from None
        out.append(stop)
        if progress:
            progress(1)
    return out


# ---- figures -------------------------------------------------------------------------------------------------
@dataclass
class Cell(Tally):
    """The gate's tally (runs, useful, premature, loops, caught, recall,
    premature share) and what compare adds to it."""
    early: int = 0
    latencies: list[int] = field(default_factory=list)
    loop_rounds: int = 0
    loop_total: int = 0
    tokens_reserve: int = 0
    tokens_prefix: int = 0
    ended_by_budget: int = 0      # looping runs the default budget would have ended before their loop's end

    @property
    def median_latency(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "useful": self.useful, "premature": self.premature,
                "premature_share": self.premature_share, "loops": self.loops, "caught": self.caught,
                "recall": self.recall, "stops_before_loop": self.early, "median_latency": self.median_latency,
                "latencies": self.latencies, "loop_rounds_spent": self.loop_rounds, "loop_rounds_total": self.loop_total,
                "loop_tokens_reserve": self.tokens_reserve, "loop_tokens_prefix_refund": self.tokens_prefix,
                "looping_runs_ended_by_budget": self.ended_by_budget}


def add_run(cell: Cell, run: TuneRun, stop: int | None, tokens: TokenReplay, slack: int) -> None:
    label = run.label
    j = judge(label, stop, run.rounds, slack)
    cell.runs += 1
    cell.useful += label.useful
    cell.premature += j.premature
    cell.loops += j.loops
    cell.caught += j.loops_caught
    cell.loop_rounds += j.loop_rounds
    cell.loop_total += j.loop_total
    caught_before = False
    for a, b in label.loops:
        b = min(b, run.rounds)
        if b < a:
            continue
        caught = stop is not None and (a <= stop <= b + slack or stop < a and caught_before)
        if caught and stop >= a:
            cell.latencies.append(stop - a)
        if stop is not None and stop < a and not caught:
            cell.early += 1
        caught_before = caught_before or caught
        last = b if stop is None else min(stop, b)
        for r in range(a, last + 1):
            if r <= len(tokens.reserve):
                cell.tokens_reserve += tokens.reserve[r - 1]
                cell.tokens_prefix += tokens.prefix_refund[r - 1]
    if label.loops:
        end = tokens.budget_end["prefix-refund"]
        if end is not None and end < max(b for _, b in label.loops):
            cell.ended_by_budget += 1


@dataclass
class Comparison:
    rules: list[RuleChoice]
    runs: list[TuneRun]
    stops: dict[str, list[int | None]]          # rule label -> stop per run
    parts: dict[str, str]                       # task -> part
    slack: int = LOOP_SLACK
    cells: dict[tuple[str, str, str], Cell] = field(default_factory=dict)   # (rule, corpus or "all", part or "all")

    @property
    def corpora(self) -> list[str]:
        return list(dict.fromkeys(r.corpus for r in self.runs))

    def cell(self, rule: str, corpus: str = "all", part: str = "all") -> Cell:
        return self.cells[(rule, corpus, part)]

    def to_dict(self) -> dict[str, Any]:
        return {"rules": [{"label": c.label, "spec": c.spec, "params": c.params} for c in self.rules],
                "slack": self.slack, "corpora": self.corpora, "parts": ["dev", "held-out", "all"],
                "cells": [{"rule": r, "corpus": c, "part": p, **cell.to_dict()}
                          for (r, c, p), cell in self.cells.items()],
                "runs": [{"corpus": r.corpus, "name": r.name, "task": r.task, "part": self.parts[r.task],
                          "rounds": r.rounds, "stops": {c.label: self.stops[c.label][i] for c in self.rules}}
                         for i, r in enumerate(self.runs)]}


def compare(runs: Sequence[TuneRun], rules: Sequence[RuleChoice], *, split: Split | None = None,
            slack: int = LOOP_SLACK, cache: ProgressCache | None = None, jobs: int | None = 1,
            progress: Callable[[int], None] | None = None) -> Comparison:
    split = split or Split()
    runs = list(runs)
    dev_tasks = {r.task for r in runs if r.always_dev}
    parts = {r.task: "dev" if r.task in dev_tasks else split.part(r.task) for r in runs}
    stops = {c.label: rule_stops(c, runs, cache=cache, jobs=jobs, progress=progress) for c in rules}
    tokens = [token_replay(r) for r in runs]
    out = Comparison(list(rules), runs, stops, parts, slack)
    for c in rules:
        for i, run in enumerate(runs):
            for corpus in (run.corpus, "all"):
                for part in (parts[run.task], "all"):
                    add_run(out.cells.setdefault((c.label, corpus, part), Cell()), run, stops[c.label][i],
                            tokens[i], slack)
    return out


# ---- output --------------------------------------------------------------------------------------------------
def _frac(a: int, b: int, share: float | None) -> str:
    return f"{a}/{b} ({share:.0%})" if b and share is not None else "–"


def rows(comp: Comparison, parts: Sequence[str] = PARTS) -> list[dict[str, Any]]:
    out = []
    for c in comp.rules:
        for corpus in [*comp.corpora, "all"]:
            for part in parts:
                cell = comp.cells.get((c.label, corpus, part))
                if cell is None:
                    continue
                lat = cell.median_latency
                out.append({"rule": c.label, "corpus": corpus, "part": part,
                            "loop recall": _frac(cell.caught, cell.loops, cell.recall),
                            "premature": _frac(cell.premature, cell.useful, cell.premature_share),
                            "stops before a loop": str(cell.early) if cell.loops else "–",
                            "median latency": f"{lat:g}" if lat is not None else "–",
                            "loop rounds spent": f"{cell.loop_rounds}/{cell.loop_total}" if cell.loops else "–",
                            "loop tokens (reserve / prefix-refund)":
                                f"{cell.tokens_reserve:,} / {cell.tokens_prefix:,}" if cell.loops else "–"})
    return out


def markdown(comp: Comparison, command: str, parts: Sequence[str] = PARTS) -> str:
    table = rows(comp, parts)
    cols = list(table[0]) if table else []
    lines = ["# Stop rules compared on the labelled corpora", "",
             f"Made by `{command}`.", "",
             f"{len(comp.runs)} labelled runs in {len(comp.corpora)} corpora ({', '.join(comp.corpora)}), split by "
             f"task as `imprint tune` splits them (held-out: "
             f"{sum(comp.parts[r.task] == 'held-out' for r in comp.runs)} runs). A loop is caught by a stop from its "
             f"first round to {comp.slack} round(s) after its last; latency is rounds from a caught loop's first "
             f"round to the stop; loop rounds and tokens are those spent inside labelled loops before the stop "
             f"(tokens: the record's byte estimate, {RESEARCH_MAX_OUTPUT} output tokens reserved a request).", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in table]
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


def plot(comp: Comparison, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    corpora = comp.corpora
    fig, axes = plt.subplots(1, len(corpora), figsize=(4.2 * len(corpora), 4.2), squeeze=False)
    markers = "osD^v<>Ph*X"
    for ax, corpus in zip(axes[0], corpora):
        for i, c in enumerate(comp.rules):
            for part, filled in (("dev", True), ("held-out", False)):
                cell = comp.cells.get((c.label, corpus, part))
                if cell is None or cell.recall is None and cell.premature_share is None:
                    continue
                x = (cell.premature_share or 0.0) * 100
                y = (cell.recall or 0.0) * 100
                color = plt.cm.tab10(i % 10)
                ax.scatter([x], [y], marker=markers[i % len(markers)], s=60,
                           facecolors=color if filled else "none", edgecolors=color,
                           label=f"{c.label}" if part == "dev" else None)
        total = comp.cells.get((comp.rules[0].label, corpus, "all")) if comp.rules else None
        missing = [w for w, n in (("no labelled loops: recall drawn at 0", total.loops if total else 0),
                                  ("no useful runs: premature drawn at 0", total.useful if total else 0)) if not n]
        ax.set_title(f"{corpus}  (filled: dev, hollow: held-out)" + "".join(f"\n{m}" for m in missing), fontsize=9)
        ax.set_xlabel("premature stops (% of useful runs)")
        ax.set_ylabel("loop recall (% of labelled loops)")
        ax.set_xlim(-5, 105)
        ax.set_ylim(-5, 105)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
