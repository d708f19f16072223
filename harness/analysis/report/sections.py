"""The report's sections, in the page's order: what each shows, in words,
with its plot, tables, notes and links to runs (`Section`). A section with
nothing to show is left out.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..frames.load import Frames
from .inputs import failing_runs, select_runs, spread
from .plots import plot_estimates, plot_overshoot, plot_policies, plot_stops, provider_colors
from .tables import (accuracy_table, counting_mode_stats, estimate_stats, overshoot_table, runs_table,
                           stop_table)
from .timelines import plot_budget, plot_novelty
from ..gate.overruns import token_overruns


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
    verdict: tuple[bool, str] | None = None    # (passed, words): a banner above everything else in the section

    @property
    def empty(self) -> bool:
        return not (self.image or self.tables or self.notes or self.links or self.verdict)


# ---- the release gate's verdict -------------------------------------------------------------------
@dataclass
class GateVerdict:
    """`imprint check`'s verdict on the report's own inputs: its conditions,
    the run it judged (in words) and whether that run is as it should be."""
    conditions: list[Any]
    run_words: str
    run_ok: bool
    config: str

    @property
    def passed(self) -> bool:
        return self.run_ok and all(c.passed for c in self.conditions)


def shipped_rule_words() -> str:
    """Which stop rule ships, and why, from where the fact lives: the setting's default and the rule's source."""
    from imprint_core.settings import SPECS
    from imprint_core.stoprules import resolve
    info = resolve(SPECS["chat.research_stop_rule"].default)
    return (f"The stop rule shipped (the default of `chat.research_stop_rule`) is `{info.name}`: {info.source}; "
            "it replaced the record's rule by research-loop.md's decision rule (harm not worse, benefit better, "
            "cost at most 2×, judged on held-out runs), with the figures in "
            "docs/adr/0102-amendment-repeat-aware.md.")


def gate_section(g: GateVerdict) -> Section:
    """The page's opening: the gate's verdict, the run it judged, and its
    table, line by line, as `imprint check` prints it."""
    failed = [f"{c.number}. {c.name}" for c in g.conditions if not c.passed]
    words = ("holds: all three conditions hold" if g.passed else
             "FAILS: " + "; ".join(([] if g.run_ok else ["no run judged"]) + [f"condition {f}" for f in failed]))
    rows = []
    for c in g.conditions:
        for i, row in enumerate(c.rows or [{"subject": "-", "figure": "no data", "threshold": "-", "passed": False}]):
            rows.append({"condition": f"{c.number}. {c.name}" if i == 0 else "", "subject": str(row["subject"]),
                         "figure": str(row["figure"]), "threshold": str(row["threshold"]),
                         "verdict": "holds" if row["passed"] else "not judged" if row["passed"] is None else "FAILS"})
    return Section("Release gate",
                   f"`imprint check` on the report's own inputs, against `{g.config}`: ADR 0102's three invalidation "
                   "conditions, one line per corpus, provider and figure. Its notes, run by run, are what "
                   f"`imprint check` prints below its table. {shipped_rule_words()}",
                   verdict=(g.passed, f"Gate {words}. Judged run: {g.run_words}."),
                   tables=[("the gate, line by line", pd.DataFrame(rows))], figures_first=False)


# ---- the stop rule's accuracy on labelled runs ----------------------------------------------------
def _origin(path: Any) -> Path | None:
    """The file a run came from. A raw trajectory converted in memory is
    named as its round log would be (x.jsonl): the raw file beside it
    (x.traj.json.gz), or the file of many runs it came from."""
    if not path or (isinstance(path, float) and math.isnan(path)):
        return None
    p = Path(str(path))
    if not p.is_file():
        beside = sorted(q for q in p.parent.glob(glob_escape(p.stem) + ".*") if q.is_file())
        p = beside[0] if beside else next((a for a in p.parents if a.is_file()), p)
    return p if p.is_file() else None


def git_ignored(path: Path) -> bool | None:
    """Whether git ignores `path` (None: not in a git work tree, or no git)."""
    import subprocess
    path = Path(path).resolve()
    where = path if path.is_dir() else path.parent
    while not where.exists():
        where = where.parent
    try:
        inside = subprocess.run(["git", "-C", str(where), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, timeout=10)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        return subprocess.run(["git", "-C", str(where), "check-ignore", "-q", str(path)],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class Link:
    """A link from the report to a run's file, or why there is none."""
    href: str | None
    note: str = ""


def _link_to(path: Any, out: Path, committed: bool) -> Link:
    """A committed report (its folder tracked by git) links no file that git
    ignores (a run folder under traces/runs/: absent from every other
    checkout); a gzip file is said to be a download (a browser saves it
    rather than showing it)."""
    p = _origin(path)
    if p is None:
        return Link(None)
    if committed and git_ignored(p):
        return Link(None, f" (in {Path(os.path.relpath(p.parent.resolve())).as_posix()}, ignored by git: not linked "
                          "from a committed report)")
    href = Path(os.path.relpath(p.resolve(), out.resolve())).as_posix()
    return Link(href, " (↓ .gz: a download)" if p.suffix == ".gz" else "")


def _same_runs(bad: Sequence[Any]) -> dict[int, list[Any]]:
    """A regression stored from a run of another corpus is that run: per
    failing run (by id), the regressions among `bad` that came from its file."""
    by_file: dict[Path, Any] = {}
    for jr in bad:
        if jr.source != "regressions":
            o = _origin(jr.row.path)
            if o is not None:
                by_file.setdefault(o.resolve(), jr)
    out: dict[int, list[Any]] = {}
    for jr in bad:
        if jr.source == "regressions" and jr.label.source:
            twin = by_file.get(Path(jr.label.source).resolve())
            if twin is not None:
                out.setdefault(id(twin), []).append(jr)
    return out


def accuracy_section(frames: Frames, judged: Sequence[Any], out: Path, rule: str, max_runs: int,
                     committed: bool = False) -> Section:
    bad = failing_runs(judged)
    twins = _same_runs(bad)
    stored = {id(r) for rs in twins.values() for r in rs}
    bad = [jr for jr in bad if id(jr) not in stored]       # listed (and plotted) once, under the run it came from
    shown = spread(bad, max_runs)
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
        link = _link_to(jr.row.path, out, committed)
        also = "".join(f"; also the regression {r.label.name}" for r in twins.get(id(jr), []))
        text = "; ".join(jr.problems()) + also + (" (plotted below)" if jr.row.run in plotted else "") + link.note
        s.links.append((f"{jr.source}: {jr.row.run}", link.href, text))
    if not bad:
        s.notes.append(f"Every one of the {len(judged)} labelled run(s) holds.")
    if any("↓ .gz" in text for _, _, text in s.links):
        s.notes.append("A link marked ↓ .gz is a gzip file: the browser saves it rather than showing it; "
                       "`imprint replay FILE` reads it as it is.")
    return s


# ---- the rules compared ---------------------------------------------------------------------------
def compare_section(data: dict, image: str | None, source: str) -> Section:
    """`imprint compare`'s figures (as its compare.json holds them): one row
    per rule pooled over every corpus first, then each corpus, on the
    held-out part (every run where nothing is held out). `source` says where
    the figures came from and when."""
    from ..stats import rate
    cells = data["cells"]

    def share(c: dict, key: str) -> str:
        v, lo, hi = c.get(key), c.get(f"{key}_ci95_low"), c.get(f"{key}_ci95_high")
        return "–" if v is None else f"{v:.1%}" + (f" ({lo:.1%}–{hi:.1%})" if lo is not None else "")

    def row(c: dict) -> dict:
        vs = c.get("vs_shipped") or {}
        harm_of = c.get("harm_of", c.get("useful", 0))
        return {"rule": c["rule"], "corpus": c["corpus"],
                "harm": rate(c.get("harm_count", c.get("premature", 0)), harm_of).text(),
                "Δharm pp (upper 95%)": "–" if vs.get("harm_rate_diff") is None else
                f"{vs['harm_rate_diff'] * 100:+.1f}" + ("" if vs.get("harm_rate_diff_upper95") is None else
                                                         f" ({vs['harm_rate_diff_upper95'] * 100:+.1f})"),
                "rounds saved": share(c, "saving_rounds_share"),
                "loops caught": rate(c["caught"], c["loops"]).text(),
                "Δloops p": "–" if not vs or not c["loops"] else f"{vs['loops_caught_mcnemar_p']:.2g}"}

    held = any(c.get("part") == "held-out" and c.get("corpus") == "all" and c.get("runs", 1) for c in cells)
    part = "held-out" if held else "all"
    order = {r["label"]: i for i, r in enumerate(data.get("rules") or [])}
    mine = sorted((c for c in cells if c.get("part") == part),
                  key=lambda c: (c["corpus"] != "all", c["corpus"], order.get(c["rule"], len(order))))
    pooled = pd.DataFrame([row(c) for c in mine if c["corpus"] == "all"]).drop(columns=["corpus"], errors="ignore")
    detail = pd.DataFrame([row(c) for c in mine if c["corpus"] != "all"])
    if not detail.empty:
        detail = detail[["corpus", "rule", *[k for k in detail.columns if k not in ("corpus", "rule")]]]
    verdicts = [d.get("verdict") for d in data.get("decisions") or [] if d.get("verdict")]
    return Section("Stop rules compared",
                   f"Every labelled run replayed through each stop rule, split by task as `imprint tune` splits, "
                   f"each rule paired with the shipped rule ({data.get('shipped', 'record')}) on the same runs; "
                   f"the {part} part. Harm: successful runs stopped before their end; rounds saved: the failed "
                   "runs' rounds after the stop; 95% intervals (Wilson for counts, a bootstrap over tasks for "
                   "shares). One row per rule pooled over every corpus first, then each corpus "
                   "(`imprint compare --detail` prints the dev part too)."
                   + "".join(f" Decision: {v}." for v in verdicts),
                   image, "Harm against loops caught and against rounds saved, pooled then per corpus, 95% error bars",
                   notes=[source],
                   tables=[(t, df) for t, df in ((f"pooled over every corpus, {part}: one row per rule", pooled),
                                                 (f"per corpus, {part}", detail)) if not df.empty],
                   figures_first=False)


def stored_comparison(comparison: Path, out: Path) -> tuple[dict, str | None, str]:
    """A compare.json named with `--compare`: its figures, its plot copied
    beside the report, and where and when they came from."""
    import shutil
    import time
    from imprint_core.errors import UserInputError
    try:
        data = json.loads(comparison.read_text(encoding="utf-8"))
        data["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserInputError(f"not a compare.json of `imprint compare`: {exc}", file=str(comparison),
                             key="cells") from None
    image = None
    png = comparison.with_name("compare.png")
    if png.exists():
        shutil.copyfile(png, out / "compare.png")
        image = str(out / "compare.png")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(comparison.stat().st_mtime))
    return data, image, (f"These figures are not this report's runs: read from {comparison}, written {when} by "
                         f"`{data.get('command', 'imprint compare')}`.")


# ---- all sections ---------------------------------------------------------------------------------
def build_sections(frames: Frames, out: Path, *, select: Sequence[str] = (), max_runs: int = 6,
                   judged: Sequence[Any] = (), rule: str = "", comparison: Path | Any | None = None,
                   gate: GateVerdict | None = None, committed: bool = False) -> list[Section]:
    """The report's sections: the gate's verdict first (`gate`), then the
    stop rule's accuracy when labelled runs are among the inputs (`judged`:
    the gate's `judged_runs`), then the rules compared (`comparison`: a
    compare.json to read, or a callable that computes the figures into the
    folder given, returning (data, image, where they came from)). A section
    with nothing to show is left out, never shown empty."""
    sections: list[Section] = []
    if gate is not None:
        sections.append(gate_section(gate))
    if judged:
        sections.append(accuracy_section(frames, judged, out, rule, max_runs, committed))
    if comparison is not None:
        data, image, source = comparison(out) if callable(comparison) else stored_comparison(Path(comparison), out)
        if data:
            sections.append(compare_section(data, image, source))
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
    sections.append(_with_table(s, "the pair", table, "No run under `reserve` among these traces."))

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
    sections.append(_with_table(s, "runs by stop reason and final mode", stop_table(frames),
                                "No trace among the inputs records a stop."))

    path = plot_overshoot(frames, out, colors)
    s = Section("Deadline overshoot",
                "How far past the research deadline each run stopped (a blocking tool or a write may finish "
                "after it), and the calls that finished after the deadline.", path,
                "Deadline overshoot per provider")
    sections.append(_with_table(s, "overshoot per provider", overshoot_table(frames),
                                "No trace among the inputs has a research deadline."))
    return sections


def _with_table(s: Section, caption: str, table: pd.DataFrame, none: str) -> Section:
    """`s` with `table` under its plot; with the note `none` when it has neither."""
    if not table.empty:
        s.tables.append((caption, table))
    elif s.image is None:
        s.notes.append(none)
    return s
