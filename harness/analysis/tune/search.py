"""`imprint tune`: search the stop rule's space honestly.

A setting is a patience value and a `NoveltyConfig` (any of its fields, by
name; `realruns.noveltyconfigs`). Over labelled corpora it is scored by

- **loop recall**: labelled loops caught, i.e. the stop lands from the loop's
  first round to `slack` rounds after its last (`realruns.labels.judge`);
- **premature stops**: labelled useful runs stopped before their
  `should_not_stop_before` round, as a share of the useful runs;

per corpus and overall (pooled). The runs are split by **task**, never by
run: a deterministic hash of the task id (SWE-bench instance, tau-bench
task, Who&When question) puts every run of a task in the same part, the dev
part (tuned on) or the held-out part (only reported); the runs of the
regressions corpus (`imprint regress add`) are always dev, and pull every
other run of their task into dev with them (no held-out copy of a run that
was tuned on). The dev part is cut
into k folds by a second hash of the task: cross-validation re-runs the
whole selection on k-1 folds and scores the choice on the fold left out, so
the held-out figures are not the only check of how the choice generalises.

The recommendation rule (`Rule.choose`): among the settings whose premature
share is at most `max_premature_share` on every corpus with useful runs and
zero on the `strict` corpora, the highest minimum loop recall over the
corpora with loops; ties go to the higher pooled recall, then to fewer
premature stops (a stop that cuts a useful run short is a cost the user
sees, however few loop rounds it saves), then to fewer rounds spent inside
labelled loops before the stop (a loop cut short costs less even when the
stop is not inside it), then to the setting nearest the shipped one (fewest
novelty fields changed, then patience nearest the shipped patience). When no
setting meets the constraints, the one that breaks them least is chosen, and
the reason says so.

`Rule.warnings` says when a choice rests on little: on tie-breaks (several
settings share its loop recall, or none catches a loop at all), on a corpus
with fewer than `MIN_CORPUS_RUNS` runs in the part chosen on, or on a
setting that never stops any run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from imprint_core.novelty import NoveltyConfig

from ...realruns.labels import LOOP_SLACK, Tally, judge
from ...realruns.noveltyconfigs import config_key
from .ceiling import loop_ceiling
from ..sweep.cache import ProgressCache
from ..sweep.stops import PARTS, RuleChoice, Split, rule_stops  # noqa: F401  (PARTS, Split: tune's names too)
from ..sweep.progress import ComputeStats, TuneRun, compute_progress, stop_rounds
from ..sweep.table import last_round
from .settings import RuleSetting, Setting, settings_for

MIN_CORPUS_RUNS = 5
"""A corpus with fewer runs in the part a choice is made on decides little: the tuner warns."""


# ---- scores ------------------------------------------------------------------------------------------------------
Figures = Tally
"""One setting over some runs."""


class Scores:
    """Every setting judged on every run, as matrices (settings × runs), so
    that any subset of runs (a corpus, a part, a fold) is a masked sum."""

    def __init__(self, settings: Sequence[Setting], runs: Sequence[TuneRun], stops: np.ndarray, slack: int):
        n_s, n_r = len(settings), len(runs)
        # Settings × runs matrices are most of what a large sweep holds per run
        # (76 settings × 100,000 runs): each takes the narrowest integer type
        # its values fit (sums over them are int64 all the same).
        # the runs as given: a `RunTable` builds each run when read, and a list of them would hold them all
        self.settings, self.runs, self.slack = list(settings), runs if isinstance(runs, Sequence) else list(runs), slack
        self.stops = stops.astype(_narrowest(stops), copy=False)
        premature = np.zeros((n_s, n_r), dtype=np.bool_)
        caught = np.zeros((n_s, n_r), dtype=_narrowest(np.array([len(r.label.loops) for r in runs] or [0])))
        # each loop is clipped to the run's rounds (`judge`): at most rounds × loops inside them
        loop_rounds = np.zeros((n_s, n_r), dtype=_narrowest(np.array([r.rounds * len(r.label.loops) + 1
                                                                       for r in runs] or [0])))
        self.loops = np.zeros(n_r, dtype=np.int64)
        self.useful = np.array([r.label.useful for r in runs], dtype=np.int64)
        for ri, run in enumerate(runs):
            memo: dict[int, tuple[int, int, int, int]] = {}      # this run's verdict by stop round
            for si in range(n_s):
                stop = int(stops[si, ri])
                got = memo.get(stop)
                if got is None:
                    j = judge(run.label, None if stop < 0 else stop, run.rounds, slack)
                    got = memo[stop] = (int(j.premature), j.loops_caught, j.loops, j.loop_rounds)
                premature[si, ri], caught[si, ri], self.loops[ri], loop_rounds[si, ri] = got
        self.premature, self.caught, self.loop_rounds = premature, caught, loop_rounds
        # each run's corpus and task as an index into these lists: a mask is then a lookup, not a walk of the runs
        corpora: dict[str, int] = {}
        tasks: dict[str, int] = {}
        self._corpus = np.zeros(n_r, dtype=np.int32)
        self._task = np.zeros(n_r, dtype=np.int32)
        for ri, run in enumerate(runs):
            self._corpus[ri] = corpora.setdefault(run.corpus, len(corpora))
            self._task[ri] = tasks.setdefault(run.task, len(tasks))
        self.corpora = list(corpora)
        self.tasks = list(tasks)

    def mask(self, corpus: str | None = None, parts: dict[str, str] | None = None, part: str | None = None,
             folds: dict[str, int] | None = None, fold: int | None = None, not_fold: int | None = None) -> np.ndarray:
        m = np.ones(len(self.runs), dtype=bool)
        if corpus is not None:
            m &= self._corpus == (self.corpora.index(corpus) if corpus in self.corpora else -1)
        if part is not None and parts is not None:
            m &= np.array([parts[t] == part for t in self.tasks], dtype=bool)[self._task]
        if folds is not None and fold is not None:
            m &= np.array([folds.get(t) == fold for t in self.tasks], dtype=bool)[self._task]
        if folds is not None and not_fold is not None:
            m &= np.array([folds.get(t) != not_fold for t in self.tasks], dtype=bool)[self._task]
        return m

    def task_count(self, mask: np.ndarray) -> int:
        """Tasks among the runs of `mask`."""
        return len(np.unique(self._task[mask]))

    def sums(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Per setting: premature, caught; and the subset's useful, loops, runs."""
        return {"premature": self.premature[:, mask].sum(axis=1), "caught": self.caught[:, mask].sum(axis=1),
                "loop_rounds": self.loop_rounds[:, mask].sum(axis=1),
                "useful": int(self.useful[mask].sum()), "loops": int(self.loops[mask].sum()),
                "runs": int(mask.sum())}

    def figures(self, si: int, mask: np.ndarray) -> Figures:
        return Figures(int(mask.sum()), int(self.useful[mask].sum()), int(self.premature[si, mask].sum()),
                       int(self.loops[mask].sum()), int(self.caught[si, mask].sum()))

    def details(self, si: int, mask: np.ndarray) -> dict[str, list[str]]:
        """The premature stops and the loops not caught, by run."""
        prem, missed = [], []
        for ri in np.flatnonzero(mask):
            run, stop = self.runs[ri], int(self.stops[si, ri])
            shown = "never" if stop < 0 else f"round {stop}"
            if self.premature[si, ri]:
                prem.append(f"{run.corpus}/{run.name}: stopped at {shown}, useful until "
                            f"{run.label.should_not_stop_before}")
            if self.caught[si, ri] < self.loops[ri]:
                spans = ", ".join(f"{a}-{b}" for a, b in run.label.loops)
                missed.append(f"{run.corpus}/{run.name}: loops {spans}, stopped {shown}")
        return {"premature": prem, "missed_loops": missed}


# ---- the Pareto front --------------------------------------------------------------------------------------
def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points (recall, premature share) that no other point
    dominates (at least as much recall and at most as many premature stops,
    better in one), ordered by premature share, then recall. Equal points
    are all on the front or all off it."""
    distinct = sorted(set(points), key=lambda p: (p[1], -p[0]))
    front: set[tuple[float, float]] = set()
    best = -np.inf
    for recall, prem in distinct:
        if recall > best:
            front.add((recall, prem))
            best = recall
    return sorted((i for i, p in enumerate(points) if p in front), key=lambda i: (points[i][1], -points[i][0], i))


def _point(recall: float | None, share: float | None) -> tuple[float, float]:
    return (0.0 if recall is None else round(recall, 12), 0.0 if share is None else round(share, 12))


# ---- the recommendation rule ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    max_premature_share: float = 0.10
    strict: tuple[str, ...] = ("tau-bench",)

    def describe(self) -> str:
        strict = f" and none on {', '.join(self.strict)}" if self.strict else ""
        return (f"the highest minimum loop recall over the corpora with labelled loops, among the settings with "
                f"at most {self.max_premature_share:.0%} premature stops on every corpus with useful runs{strict}; "
                "ties: higher pooled recall, fewer premature stops, fewer rounds spent inside labelled loops, "
                "nearer the shipped setting")

    def standing(self, scores: Scores, mask: np.ndarray) -> "_Standing":
        """Every setting's figures on the runs of `mask`, as the choice ranks them."""
        n = len(scores.settings)
        violation = np.zeros(n, dtype=np.int64)
        min_recall = np.full(n, np.inf)
        per: dict[str, dict[str, Any]] = {}
        for c in scores.corpora:
            s = scores.sums(mask & scores.mask(corpus=c))
            per[c] = s
            if s["useful"]:
                allowed = 0 if c in self.strict else int(np.floor(self.max_premature_share * s["useful"] + 1e-9))
                violation += np.maximum(0, s["premature"] - allowed)
            if s["loops"]:
                min_recall = np.minimum(min_recall, s["caught"] / s["loops"])
        min_recall[np.isinf(min_recall)] = 0.0
        total = scores.sums(mask)
        pooled = total["caught"] / total["loops"] if total["loops"] else np.zeros(n)
        feasible = violation == 0
        pool = np.flatnonzero(feasible) if feasible.any() else np.flatnonzero(violation == violation.min())
        return _Standing(scores, violation, min_recall, pooled, total, per, feasible, pool)

    def choose(self, scores: Scores, mask: np.ndarray) -> tuple[int, bool, str]:
        """(setting index, whether it meets the constraints, the reason) on the runs of `mask`."""
        st = self.standing(scores, mask)
        n = len(scores.settings)
        min_recall, total, per, feasible, pool = st.min_recall, st.total, st.per, st.feasible, st.pool
        best = min(pool, key=st.rank)
        s = scores.settings[best]
        figures = "; ".join(
            f"{c}: recall {_pct(per[c]['caught'][best], per[c]['loops'])}, premature "
            f"{_pct(per[c]['premature'][best], per[c]['useful'])}" for c in scores.corpora)
        ties = [int(i) for i in pool if st.rank(int(i))[:4] == st.rank(int(best))[:4]]
        if feasible.any():
            why = (f"{s.label()}: minimum loop recall {min_recall[best]:.0%} over the corpora with loops, the highest "
                   f"of the {int(feasible.sum())} of {n} settings that meet the premature-stop limits ({figures})")
            hopeless = [c for c in scores.corpora if per[c]["loops"] and not per[c]["caught"][pool].any()]
            if hopeless:
                why += (f"; no setting within the limits catches any labelled loop of {', '.join(hopeless)}, so the "
                        "minimum is 0 for all of them and the pooled recall, then fewer premature stops "
                        f"({int(total['premature'][best])} here), then fewer rounds spent inside loops "
                        f"({int(total['loop_rounds'][best])} of {_loop_total(scores, mask)} here), decide")
            if len(ties) > 1:
                why += f"; {len(ties)} settings score the same, and this one is nearest the shipped setting"
        else:
            why = (f"no setting meets the premature-stop limits; {s.label()} breaks them least "
                   f"({int(st.violation[best])} premature stop(s) over the limits; {figures})")
        return int(best), bool(feasible.any()), why

    def warnings(self, scores: Scores, mask: np.ndarray, best: int) -> list[str]:
        """What the choice of `best` on the runs of `mask` rests on, where it is
        little: tie-breaks instead of loop recall, a corpus with fewer than
        MIN_CORPUS_RUNS runs, a setting that never stops any run."""
        st = self.standing(scores, mask)
        out = []
        within = "within the limits " if st.feasible.any() else ""
        tied = sorted((int(i) for i in st.pool if st.rank(int(i))[:2] == st.rank(best)[:2]), key=st.rank)
        decided = f" ({_decided_by(st, tied)} decided)" if len(tied) > 1 else ""
        if st.total["loops"] and not st.total["caught"][st.pool].any():
            out.append(f"no setting {within}catches any of the {st.total['loops']} labelled loops here: loop recall "
                       f"decides nothing, and the choice rests on the tie-breaks{decided}")
        elif len(tied) > 1:
            out.append(f"the choice rests on ties: {len(tied)} of the {len(st.pool)} settings {within}share its "
                       f"loop recall (minimum {st.min_recall[best]:.0%}, pooled {st.pooled[best]:.0%}), and the "
                       f"tie-breaks picked it{decided}")
        for c in scores.corpora:
            n = int((mask & scores.mask(corpus=c)).sum())
            if n < MIN_CORPUS_RUNS:
                out.append(f"corpus {c} contributes {n} run(s) to the runs the choice was made on (fewer than "
                           f"{MIN_CORPUS_RUNS}): its figures, and any limit they meet, rest on too few runs")
        if not (scores.stops[best] >= 0).any():
            out.append(f"the recommended setting ({scores.settings[best].label()}) never stops any of the "
                       f"{len(scores.runs)} run(s): it can stop nothing early only because it stops nothing")
        return out


def _decided_by(st: "_Standing", tied: list[int]) -> str:
    """Which tie-break set the first of `tied` (ranked) apart from the next."""
    a, b = st.rank(tied[0]), st.rank(tied[1])
    if a[2] != b[2]:
        return f"fewer premature stops, {a[2]} against {b[2]}"
    if a[3] != b[3]:
        return f"fewer rounds spent inside loops, {a[3]} against {b[3]}"
    return "nearness to the shipped setting"


@dataclass
class _Standing:
    """The figures `Rule.choose` ranks the settings by, on some runs."""
    scores: Scores
    violation: np.ndarray
    min_recall: np.ndarray
    pooled: np.ndarray
    total: dict[str, Any]
    per: dict[str, dict[str, Any]]
    feasible: np.ndarray
    pool: np.ndarray

    def rank(self, i: int) -> tuple:
        """Lower is better: recall (minimum, then pooled), then premature stops, then loop rounds spent,
        then nearness to the shipped setting."""
        return (round(-float(self.min_recall[i]), 12), round(-float(self.pooled[i]), 12),
                int(self.total["premature"][i]), int(self.total["loop_rounds"][i]),
                *self.scores.settings[i].distance(), i)


def _narrowest(values: np.ndarray) -> np.dtype:
    """The smallest signed integer type that holds every value (and -1)."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    return next(t for t in (np.int8, np.int16, np.int32, np.int64) if np.iinfo(t).min <= min(lo, -1)
                and hi <= np.iinfo(t).max)


def _loop_total(scores: Scores, mask: np.ndarray) -> int:
    """Rounds inside the labelled loops of these runs: what no stop at all spends."""
    return int(sum(judge(r.label, None, r.rounds).loop_total for r in map(scores.runs.__getitem__, np.flatnonzero(mask))))


def _pct(a: Any, b: Any) -> str:
    return f"{int(a)}/{int(b)} ({100 * int(a) / int(b):.0f}%)" if b else "n/a"


# ---- the whole tuning run ----------------------------------------------------------------------------------
@dataclass
class Tuning:
    scores: Scores
    split: Split
    rule: Rule
    parts: dict[str, str]
    folds: dict[str, int]
    best: int
    feasible: bool
    reason: str
    shipped: int
    grid: dict[str, list[Any]]
    held: list[str]
    patiences: list[int]
    cv: list[dict[str, Any]] = field(default_factory=list)
    stats: ComputeStats | None = None
    ceiling: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def corpora(self) -> list[str]:
        return self.scores.corpora

    def part_mask(self, part: str | None, corpus: str | None = None) -> np.ndarray:
        return self.scores.mask(corpus=corpus, parts=self.parts, part=part)

    def figures(self, si: int, part: str | None, corpus: str | None = None) -> Figures:
        return self.scores.figures(si, self.part_mask(part, corpus))

    def front(self, part: str | None, corpus: str | None = None) -> list[int]:
        """Setting indexes on the Pareto front of (recall, premature share) on these runs."""
        s = self.scores.sums(self.part_mask(part, corpus))
        pts = [_point(s["caught"][i] / s["loops"] if s["loops"] else None,
                      s["premature"][i] / s["useful"] if s["useful"] else None) for i in range(len(self.scores.settings))]
        return pareto_front(pts)

    def cv_summary(self) -> dict[str, dict[str, Any]]:
        """Per corpus and overall: the fold-chosen settings' figures on their left-out folds, pooled."""
        out: dict[str, dict[str, Any]] = {}
        for c in [*self.corpora, None]:
            f = Figures()
            for fold in self.cv:
                g = fold["figures"].get(c or "overall")
                if g is None:
                    continue
                f.runs += g["runs"]
                f.useful += g["useful"]
                f.premature += g["premature"]
                f.loops += g["loops"]
                f.caught += g["caught"]
            out[c or "overall"] = f.to_dict()
        return out


def cross_validate(scores: Scores, split: Split, parts: dict[str, str], folds: dict[str, int],
                   rule: Rule) -> list[dict[str, Any]]:
    """For each fold of the dev tasks: choose on the other folds, score the choice on this one."""
    dev = scores.mask(parts=parts, part="dev")
    out = []
    for k in range(split.folds):
        train = dev & scores.mask(folds=folds, not_fold=k)
        test = dev & scores.mask(folds=folds, fold=k)
        if not test.any() or not train.any():
            out.append({"fold": k, "tasks": 0, "setting": None, "feasible": None, "figures": {}})
            continue
        best, ok, _ = rule.choose(scores, train)
        figs = {c: scores.figures(best, test & scores.mask(corpus=c)).to_dict() for c in scores.corpora}
        figs["overall"] = scores.figures(best, test).to_dict()
        tasks = scores.task_count(test)
        out.append({"fold": k, "tasks": tasks, "setting": best, "label": scores.settings[best].label(),
                    "feasible": ok, "figures": figs})
    return out


def tune(runs: Sequence[TuneRun], configs: Sequence[NoveltyConfig], patiences: Sequence[int], *,
         grid: dict[str, list[Any]] | None = None, held: Sequence[str] = (), split: Split = Split(),
         rule: Rule = Rule(), slack: int = LOOP_SLACK, jobs: int | None = None, scheduler: Any = None,
         cache: ProgressCache | None = None, share: bool = True) -> Tuning:
    """Sweep every setting over the labelled runs, split them by task, choose on dev, report the rest.
    `share`: the configs share each text's normalization and shingles (`sweep.compute_progress`)."""
    settings = settings_for(configs, patiences)
    all_configs = list(dict.fromkeys(s.key for s in settings))
    by_key = {s.key: s.config for s in settings}
    progress, stats = compute_progress(runs, [by_key[k] for k in all_configs], jobs=jobs, scheduler=scheduler,
                                       cache=cache, share=share)
    cindex = {k: i for i, k in enumerate(all_configs)}
    # a round number, in the narrowest type that holds the runs' last (settings × runs, the sweep's largest array)
    stops = np.full((len(settings), len(runs)), -1, dtype=_narrowest(np.array([last_round(runs)])))
    wanted = sorted({s.patience for s in settings})
    for ri, run in enumerate(runs):
        per_config: dict[int, dict[int, int | None]] = {}
        for si, s in enumerate(settings):
            ci = cindex[s.key]
            if ci not in per_config:
                per_config[ci] = stop_rounds(progress[(ci, ri)], run.numbers, wanted)
            stop = per_config[ci][s.patience]
            stops[si, ri] = -1 if stop is None else stop
    out = _choose(Scores(settings, runs, stops, slack), runs, split, rule, grid, held, patiences, stats)
    scores, shipped = out.scores, out.shipped
    base = cindex[config_key(scores.settings[shipped].config)]
    out.ceiling = loop_ceiling(runs, (progress[(base, ri)] for ri in range(len(runs))), list(patiences), slack)
    return out


def tune_rule(runs: Sequence[TuneRun], rule_spec: str, grid: dict[str, list[Any]], *, split: Split = Split(),
              rule: "Rule" = None, slack: int = LOOP_SLACK, jobs: int | None = 1,
              cache: ProgressCache | None = None) -> "Tuning":
    """The same search, split, choice and cross-validation as `tune`, over the
    parameter grid of any stop rule (`imprint tune --rule NAME --grid P=V1,V2`).
    Each setting is replayed over every run (`stops.rule_stops`; the
    record's rule through the cached per-round progress)."""
    import itertools
    from imprint_core.stoprules import convert, resolve
    rule = rule or Rule()
    info = resolve(rule_spec)
    names = list(grid)
    values = {n: [convert(info, n, v, key="--grid") for v in grid[n]] for n in names}
    defaults = tuple((n, info.params.get(n)) for n in names)
    settings = [RuleSetting(info.name if info.origin == "built-in" else rule_spec, tuple(zip(names, combo)), defaults)
                for combo in itertools.product(*(values[n] for n in names))]
    if not any(s.shipped for s in settings):
        settings.append(RuleSetting(settings[0].rule if settings else rule_spec, defaults, defaults))
    stops = np.full((len(settings), len(runs)), -1, dtype=np.int64)
    for si, st in enumerate(settings):
        got = rule_stops(RuleChoice(st.key, rule_spec, dict(st.params)), runs, cache=cache, jobs=jobs)
        stops[si] = [-1 if x is None else x for x in got]
    return _choose(Scores(settings, runs, stops, slack), runs, split, rule, grid, [], [], ComputeStats())


def _choose(scores: Scores, runs: Sequence[TuneRun], split: Split, rule: "Rule", grid: dict | None,
            held: Sequence[str], patiences: Sequence[int], stats: ComputeStats | None) -> "Tuning":
    """The split by task, the choice on dev and the cross-validation, for any settings' stops."""
    tasks = sorted({r.task for r in runs})
    always_dev = {r.task for r in runs if r.always_dev}
    parts = {t: "dev" if t in always_dev else split.part(t) for t in tasks}
    folds = {t: split.fold(t) for t in tasks if parts[t] == "dev"}
    dev = scores.mask(parts=parts, part="dev")
    if not dev.any():
        dev = np.ones(len(runs), dtype=bool)
    best, feasible, reason = rule.choose(scores, dev)
    shipped = next(i for i, s in enumerate(scores.settings) if s.shipped)
    out = Tuning(scores, split, rule, parts, folds, best, feasible, reason, shipped, dict(grid or {}), list(held),
                 list(patiences), stats=stats, warnings=rule.warnings(scores, dev, best))
    out.cv = cross_validate(scores, split, parts, folds, rule)
    return out
