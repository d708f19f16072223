"""The one rule by which a candidate stop rule replaces the shipped one,
as `../shared/spec/research-loop.md` ("Changing the default stop rule")
states it, applied to a comparison's held-out part (never the part a rule
was tuned on), run by run against the shipped rule on the same runs:

- **harm, not worse**: the one-sided 95% upper bound of the paired
  difference in harm rate (candidate minus shipped; harm: a successful run
  stopped before its last round, or a labelled useful run before its useful
  end) is at most `HARM_MARGIN`, pooled and for each agent family (corpus)
  with at least `FAMILY_MIN_SUCCESSES` runs that can be harmed;
- **benefit, better**: more labelled loops caught (exact McNemar on the
  discordant loops, p < `ALPHA`), or more of the failed runs' rounds saved
  (paired bootstrap over tasks, 95% interval above 0);
- **cost**: judging a round costs at most `COST_LIMIT` times the shipped
  rule's, as `benchmarks/bench_rules.py` measured both in one run.

`imprint compare --decide` prints it; the gate judges loop recall with the
same `mcnemar` and `rate` (`harness.analysis.stats`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError
from imprint_core.stoprules import resolve

from .compare import Comparison

HARM_MARGIN = 0.02
FAMILY_MIN_SUCCESSES = 30
ALPHA = 0.05
COST_LIMIT = 2.0
PART = "held-out"
COST_FILE = "reports/bench/rules.json"
"""Where `benchmarks/bench_rules.py` writes each rule's cost per round."""


@dataclass
class Condition:
    name: str
    holds: bool
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision:
    candidate: str
    shipped: str
    part: str
    conditions: list[Condition]

    @property
    def passed(self) -> bool:
        return all(c.holds for c in self.conditions)

    @property
    def verdict(self) -> str:
        if self.passed:
            return f"{self.candidate} replaces {self.shipped}: every condition holds on the {self.part} part"
        failed = ", ".join(c.name for c in self.conditions if not c.holds)
        return f"{self.candidate} does not replace {self.shipped}: {failed} failed on the {self.part} part"

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "shipped": self.shipped, "part": self.part, "passed": self.passed,
                "verdict": self.verdict,
                "rule": {"harm_margin": HARM_MARGIN, "family_min_successes": FAMILY_MIN_SUCCESSES,
                         "alpha": ALPHA, "cost_limit": COST_LIMIT},
                "conditions": [{"name": c.name, "holds": c.holds, "detail": c.detail, **c.figures}
                               for c in self.conditions]}

    def lines(self) -> list[str]:
        out = [f"verdict: {self.verdict}"]
        for c in self.conditions:
            out.append(f"  [{'holds' if c.holds else 'FAILS'}] {c.name}: {c.detail}")
        return out


def rule_costs(path: str | Path) -> dict[str, float]:
    """ms per round by rule label, from `bench_rules.py`'s output."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        costs = data["per_round"]["ms_per_round"]
    except OSError as exc:
        raise UserInputError(f"cannot read the rules' costs: {exc.strerror}", file=str(p),
                             expected="the output of `python benchmarks/bench_rules.py`") from None
    except (ValueError, KeyError, TypeError):
        raise UserInputError("not the output of benchmarks/bench_rules.py", file=str(p), key="per_round.ms_per_round",
                             expected="per_round.ms_per_round: {rule: ms}") from None
    return {str(k): float(v) for k, v in costs.items() if isinstance(v, (int, float))}


def _cost_of(costs: dict[str, float], label: str, spec: str) -> tuple[float | None, str]:
    if label in costs:
        return costs[label], label
    name = resolve(spec).name          # a rule's parameters hardly move its cost per round: its name's figure
    return costs.get(name), name


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.1f} pp"


def decide(comp: Comparison, candidate: str, costs: dict[str, float] | None = None,
           cost_source: str = COST_FILE, part: str = PART) -> Decision:
    """The verdict on `candidate` (a rule label of `comp`) against the shipped rule."""
    labels = [c.label for c in comp.rules]
    if candidate not in labels:
        raise UserInputError(f"{candidate!r} is not among the compared rules", key="--decide",
                             expected="one of " + ", ".join(labels))
    if candidate == comp.shipped:
        raise UserInputError(f"{candidate!r} is the shipped rule itself", key="--decide",
                             expected="a candidate other than " + comp.shipped)
    conds: list[Condition] = []
    # harm, pooled and per family
    scopes = [("all", comp.cells.get((candidate, "all", part)))]
    scopes += [(corpus, comp.cells.get((candidate, corpus, part))) for corpus in comp.corpora]
    worst, details, figures = 0.0, [], {}
    ok = True
    for corpus, cell in scopes:
        if cell is None:
            continue
        if corpus != "all" and cell.harm_of < FAMILY_MIN_SUCCESSES:
            continue
        upper = cell.paired.get("harm_rate_diff_upper95")
        base = comp.cells[(comp.shipped, corpus, part)]
        holds = upper is not None and upper <= HARM_MARGIN or upper is None and cell.harm_of == 0
        ok = ok and holds
        where = "pooled" if corpus == "all" else corpus
        details.append(f"{where}: {cell.harm}/{cell.harm_of} against {base.harm}/{base.harm_of}, "
                       f"difference {_pct(cell.paired.get('harm_rate_diff'))} (upper 95% {_pct(upper)})"
                       + ("" if holds else " > limit"))
        figures[where] = {"harm": cell.harm, "harm_of": cell.harm_of, "shipped_harm": base.harm,
                          "harm_rate_diff": cell.paired.get("harm_rate_diff"), "harm_rate_diff_upper95": upper,
                          "harm_mcnemar_p": cell.paired.get("harm_mcnemar_p")}
        if upper is not None:
            worst = max(worst, upper)
    if not details:
        ok = False
        details.append("no run that can be harmed in this part")
    conds.append(Condition("harm not worse", ok,
                           f"upper bound of the paired harm-rate difference at most {HARM_MARGIN:.0%} "
                           f"(pooled, and each family with ≥{FAMILY_MIN_SUCCESSES} such runs): " + "; ".join(details),
                           {"scopes": figures}))
    # benefit
    pooled = comp.cells[(candidate, "all", part)]
    base = comp.cells[(comp.shipped, "all", part)]
    pr = pooled.paired
    more_loops = pr.get("loops_caught_only_candidate", 0) > pr.get("loops_caught_only_shipped", 0) \
        and pr.get("loops_caught_mcnemar_p", 1.0) < ALPHA
    low = pr.get("saving_rounds_diff_ci95_low")
    more_saved = low is not None and low > 0
    conds.append(Condition(
        "benefit better", more_loops or more_saved,
        f"loops caught {pooled.caught}/{pooled.loops} against {base.caught}/{base.loops} "
        f"(discordant {pr.get('loops_caught_only_candidate', 0)}:{pr.get('loops_caught_only_shipped', 0)}, "
        f"exact McNemar p={pr.get('loops_caught_mcnemar_p', 1.0):.3g}, needs < {ALPHA}); "
        f"failed runs' rounds saved {_share(pooled.saving())} against {_share(base.saving())}, difference "
        f"{_pct(pr.get('saving_rounds_diff'))} (95% {_pct(low)} to {_pct(pr.get('saving_rounds_diff_ci95_high'))}, "
        f"needs above 0)",
        {"loops_caught": pooled.caught, "loops": pooled.loops, "shipped_loops_caught": base.caught,
         "loops_caught_mcnemar_p": pr.get("loops_caught_mcnemar_p"), "saving_rounds_share": pooled.saving(),
         "shipped_saving_rounds_share": base.saving(), "saving_rounds_diff": pr.get("saving_rounds_diff"),
         "saving_rounds_diff_ci95_low": low, "saving_rounds_diff_ci95_high": pr.get("saving_rounds_diff_ci95_high")}))
    # cost
    choice = next(c for c in comp.rules if c.label == candidate)
    shipped = next(c for c in comp.rules if c.label == comp.shipped)
    if costs is None:
        conds.append(Condition("cost", False, f"not measured (no {cost_source})"))
    else:
        mine, key = _cost_of(costs, choice.label, choice.spec)
        theirs, key0 = _cost_of(costs, shipped.label, shipped.spec)
        if mine is None or not theirs:
            conds.append(Condition("cost", False, f"{key if mine is None else key0} not measured in {cost_source} "
                                                  "(run `python benchmarks/bench_rules.py`)"))
        else:
            ratio = mine / theirs
            conds.append(Condition("cost", ratio <= COST_LIMIT,
                                   f"{mine:.3f} ms a round against {theirs:.3f} ms = {ratio:.2f}× "
                                   f"(at most {COST_LIMIT:g}×; {cost_source}, measured as {key!r} and {key0!r})",
                                   {"ms_per_round": mine, "shipped_ms_per_round": theirs, "ratio": ratio}))
    return Decision(candidate, comp.shipped, part, conds)


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"
