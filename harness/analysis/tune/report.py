"""What `imprint tune` writes under its output folder:

- `summary.md`: the recommendation, the reason, what it rests on where that is
  little (`Rule.warnings`), its figures against the
  shipped setting per corpus on dev and held-out, cross-validation;
- `front.md`: the Pareto front of loop recall against premature-stop share,
  per corpus and overall, dev and held-out;
- `front.png`: the same fronts as plots (every setting, the front, the
  shipped setting and the recommendation);
- `split.md`: tasks, runs, useful runs and loops in each part and fold,
  and each fold's choice and its figures on the fold left out;
- `ceiling.md`: the loop recall no novelty setting can beat, per corpus and
  patience (every round inside a labelled loop judged no progress);
- `settings.csv`: every setting's figures per corpus and part;
- `recommendation.json`: the chosen setting, the rule, the reason, the
  warnings, figures;
- `command.txt`: the command line that wrote them.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from imprint_core.files import atomic_write_text

from ...realruns.noveltyconfigs import as_dict
from .ceiling import CEILINGS
from .search import PARTS, Figures, Tuning


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.0f}%"


def figures_text(f: Figures) -> str:
    """Loop recall and premature stops, as one table cell."""
    rec = f"{f.caught}/{f.loops} ({_pct(f.recall)})" if f.loops else "no loops"
    prem = f"{f.premature}/{f.useful} ({_pct(f.premature_share)})" if f.useful else "no useful runs"
    return f"recall {rec} · premature {prem}"


def _scopes(t: Tuning) -> list[str | None]:
    return [*t.corpora, None]


def _name(c: str | None) -> str:
    return c or "overall"


def _label(t: Tuning, si: int) -> str:
    return t.scores.settings[si].label(list(t.grid) or None)


def comparison_rows(t: Tuning) -> list[dict[str, Any]]:
    """Per corpus (and overall) and part: the recommendation's and the shipped setting's figures."""
    rows = []
    for c in _scopes(t):
        for part in PARTS:
            rows.append({"corpus": _name(c), "part": part,
                         "recommended": t.figures(t.best, part, c).to_dict(),
                         "shipped": t.figures(t.shipped, part, c).to_dict()})
    return rows


def recommendation(t: Tuning, command: str = "") -> dict[str, Any]:
    s = t.scores.settings[t.best]
    return {
        "setting": s.to_dict(), "label": s.label(), "feasible": t.feasible, "reason": t.reason,
        "warnings": t.warnings,
        "rule": {"text": t.rule.describe(), "max_premature_share": t.rule.max_premature_share,
                 "strict": list(t.rule.strict), "loop_slack": t.scores.slack},
        "shipped": t.scores.settings[t.shipped].to_dict(),
        "figures": comparison_rows(t),
        "cross_validation": {"folds": t.cv, "pooled": t.cv_summary()},
        "split": {"holdout": t.split.holdout, "folds": t.split.folds, "seed": t.split.seed},
        "grid": {k: [as_dict_value(v) for v in vs] for k, vs in t.grid.items()}, "held_at_default": t.held,
        "patience": t.patiences, "settings": len(t.scores.settings), "runs": len(t.scores.runs),
        "command": command, "ceiling": t.ceiling,
    }


def as_dict_value(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)


def summary_md(t: Tuning, command: str, timing: str) -> str:
    s = t.scores.settings[t.best]
    lines = ["# imprint tune", "", f"`{command}`", "", f"{timing}", "",
             f"**Recommended: {s.label()}**" + ("" if t.feasible else " (no setting meets the constraints)"), "",
             f"Rule: {t.rule.describe()}. A loop counts as caught when the stop lands from its first round to "
             f"{t.scores.slack} round(s) after its last.", "", f"Why: {t.reason}.", "",
             *([f"**Warning: {w}.**" for w in t.warnings] + [""] if t.warnings else []),
             *([ceiling_line(t), ""] if t.ceiling else []),
             f"## Recommended against shipped ({_shipped_words(t)})", "",
             "| corpus | part | recommended | shipped |", "| --- | --- | --- | --- |"]
    for c in _scopes(t):
        for part in PARTS:
            lines.append(f"| {_name(c)} | {part} | {figures_text(t.figures(t.best, part, c))} | "
                         f"{figures_text(t.figures(t.shipped, part, c))} |")
    pooled = t.cv_summary()
    lines += ["", f"## Cross-validation ({t.split.folds} folds of the dev tasks)", "",
              "Each fold's setting is chosen by the same rule on the other folds and scored on the fold left out; "
              "pooled over the folds:", "", "| corpus | recall | premature |", "| --- | --- | --- |"]
    for c in _scopes(t):
        g = pooled[_name(c)]
        lines.append(f"| {_name(c)} | {g['caught']}/{g['loops']} ({_pct(g['recall'])}) | "
                     f"{g['premature']}/{g['useful']} ({_pct(g['premature_share'])}) |")
    chosen = [f.get("label") for f in t.cv if f.get("label")]
    if chosen:
        same = sum(lab == s.label() for lab in chosen)
        lines += ["", f"The folds chose the full-dev recommendation {same} of {len(chosen)} time(s)."]
    details = t.scores.details(t.best, t.part_mask("held-out"))
    if details["premature"] or details["missed_loops"]:
        lines += ["", "## Held-out runs the recommendation gets wrong", ""]
        lines += [f"- premature: {d}" for d in details["premature"]]
        lines += [f"- loop not caught: {d}" for d in details["missed_loops"]]
    held = f"; held at their shipped values: {', '.join(t.held)}" if t.held else ""
    grid = "; ".join(f"{k} = {', '.join(map(str, v))}" for k, v in t.grid.items()) or "shipped config only"
    lines += ["", f"Grid: {grid}" if not t.patiences else f"Grid: {grid}; patience {t.patiences[0]}–{t.patiences[-1]}"
              if t.patiences == list(range(t.patiences[0], t.patiences[-1] + 1)) else
              f"Grid: {grid}; patience {', '.join(map(str, t.patiences))}", "",
              f"{len(t.scores.settings)} settings × {len(t.scores.runs)} labelled runs{held}.", "",
              "Files: `front.md`, `front.png`, `split.md`, `ceiling.md`, `settings.csv`, `recommendation.json`, `command.txt`.", ""]
    return "\n".join(lines)


def front_md(t: Tuning) -> str:
    lines = ["# Pareto fronts: loop recall against premature-stop share", "",
             "A setting is on the front when no other setting catches at least as many loops with at most as many "
             "premature stops and is better in one. Settings that score the same are one row (shown: the "
             "recommended ★ or the shipped setting where it is among them, else the one nearest the shipped setting).",
             ""]
    for part in PARTS:
        for c in _scopes(t):
            front = t.front(part, c)
            lines += [f"## {_name(c)}, {part}", "", "| recall | premature | settings | e.g. |", "| --- | --- | --- | --- |"]
            groups: dict[tuple, list[int]] = {}
            for si in front:
                f = t.figures(si, part, c)
                groups.setdefault((f.caught, f.loops, f.premature, f.useful), []).append(si)
            for (caught, loops, prem, useful), members in groups.items():
                rep = t.best if t.best in members else t.shipped if t.shipped in members else \
                    min(members, key=lambda i: (*t.scores.settings[i].distance(), i))
                marks = (" ★" if t.best in members else "") + (" (shipped)" if t.shipped in members else "")
                lines.append(f"| {caught}/{loops} ({_pct(caught / loops if loops else None)}) | "
                             f"{prem}/{useful} ({_pct(prem / useful if useful else None)}) | {len(members)} | "
                             f"{_label(t, rep)}{marks} |")
            for tag, si in (("recommended", t.best), ("shipped", t.shipped)):
                if si not in front:
                    lines.append(f"| ({tag}: {figures_text(t.figures(si, part, c))}) | | | {_label(t, si)} |")
            lines.append("")
    return "\n".join(lines)


def split_md(t: Tuning) -> str:
    lines = ["# The split by task", "",
             f"A task is held out when the hash of `{t.split.seed}:part:<task>` falls below {t.split.holdout:g}; "
             f"dev tasks fall into {t.split.folds} folds by the hash of `{t.split.seed}:fold:<task>`. A task's runs "
             "are never in two parts (mini-swe-agent: the SWE-bench instance; tau-bench: the task, whose trials "
             "are runs; Who&When: the question, which a Hand-Crafted and an Algorithm-Generated file may share).",
             "", "| corpus | part | tasks | runs | useful runs | loops |", "| --- | --- | --- | --- | --- | --- |"]
    sc = t.scores
    for c in _scopes(t):
        for part in PARTS:
            m = t.part_mask(part, c)
            tasks = len({sc.runs[i].task for i in np.flatnonzero(m)})
            lines.append(f"| {_name(c)} | {part} | {tasks} | {int(m.sum())} | {int(sc.useful[m].sum())} | "
                         f"{int(sc.loops[m].sum())} |")
    lines += ["", "## Cross-validation folds", "", "| fold | tasks | chosen on the other folds | " +
              " | ".join(f"{c} on this fold" for c in t.corpora) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in t.corpora) + " |"]
    for f in t.cv:
        if not f.get("label"):
            lines.append(f"| {f['fold']} | 0 | (empty fold) | " + " | ".join("" for _ in t.corpora) + " |")
            continue
        cells = []
        for c in t.corpora:
            g = f["figures"][c]
            cells.append(figures_text(Figures(g["runs"], g["useful"], g["premature"], g["loops"], g["caught"])))
        lines.append(f"| {f['fold']} | {f['tasks']} | {f['label']}{'' if f['feasible'] else ' (infeasible)'} | "
                     + " | ".join(cells) + " |")
    lines += ["", "## Tasks held out", ""]
    for c in t.corpora:
        held = sorted({r.task for r in sc.runs if r.corpus == c and t.parts[r.task] == "held-out"})
        lines.append(f"- {c} ({len(held)}): {', '.join(held) or 'none'}")
    lines.append("")
    return "\n".join(lines)


def settings_csv(t: Tuning) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    fields = list(t.scores.settings[0].columns())
    head = [*fields, "shipped", "recommended"]
    cols = []
    for c in _scopes(t):
        for part in PARTS:
            for k in ("caught", "loops", "recall", "premature", "useful", "premature_share"):
                cols.append((c, part, k))
    w.writerow(head + [f"{_name(c)}:{p}:{k}" for c, p, k in cols])
    masks = {(c, p): t.part_mask(p, c) for c in _scopes(t) for p in PARTS}
    sums = {key: t.scores.sums(m) for key, m in masks.items()}
    for si, s in enumerate(t.scores.settings):
        row: list[Any] = [*s.columns().values(), s.shipped, si == t.best]
        for c, p, k in cols:
            sm = sums[(c, p)]
            v = {"caught": int(sm["caught"][si]), "loops": sm["loops"], "premature": int(sm["premature"][si]),
                 "useful": sm["useful"]}
            v["recall"] = round(v["caught"] / v["loops"], 4) if v["loops"] else ""
            v["premature_share"] = round(v["premature"] / v["useful"], 4) if v["useful"] else ""
            row.append(v[k])
        w.writerow(row)
    return buf.getvalue()


def plot_fronts(t: Tuning, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    scopes = _scopes(t)
    fig, axes = plt.subplots(len(PARTS), len(scopes), figsize=(3.6 * len(scopes), 3.4 * len(PARTS)),
                             squeeze=False, constrained_layout=True)
    for r, part in enumerate(PARTS):
        for k, c in enumerate(scopes):
            ax = axes[r][k]
            sm = t.scores.sums(t.part_mask(part, c))
            loops, useful = sm["loops"], sm["useful"]
            if not loops and not useful:
                # e.g. regressions · held-out: a regression's task is always dev.
                ax.set_axis_off()
                ax.text(0.5, 0.5, f"{_name(c)} · {part}\nno labelled runs in this part", ha="center", va="center",
                        fontsize=9, color="0.4", transform=ax.transAxes)
                continue
            xs = 100 * sm["premature"] / useful if useful else np.zeros(len(t.scores.settings))
            ys = 100 * sm["caught"] / loops if loops else np.zeros(len(t.scores.settings))
            ax.scatter(xs, ys, s=10, color="0.7", alpha=0.5, label="settings", zorder=1)
            front = t.front(part, c)
            pts = sorted({(xs[i], ys[i]) for i in front})
            if pts:
                fx, fy = zip(*pts)
                ax.step(fx, fy, where="post", color="tab:blue", lw=1.4, zorder=2)
                ax.scatter(fx, fy, s=22, color="tab:blue", label="Pareto front", zorder=3)
            ax.scatter([xs[t.shipped]], [ys[t.shipped]], marker="X", s=70, color="black", label="shipped", zorder=4)
            ax.scatter([xs[t.best]], [ys[t.best]], marker="*", s=150, color="tab:green", edgecolor="black", lw=0.5,
                       label="recommended", zorder=5)
            ax.set_title(f"{_name(c)} · {part}\n{loops} loops, {useful} useful runs", fontsize=9)
            ax.set_xlim(-3, max(20.0, float(np.max(xs)) + 3))
            ax.set_ylim(-3, 103)
            ax.grid(alpha=0.3)
            if r == len(PARTS) - 1:
                ax.set_xlabel("premature stops (% of useful runs)")
            if k == 0:
                ax.set_ylabel("loop recall (% of labelled loops)")
    if axes[0][0].get_legend_handles_labels()[0]:   # the first panel may have held no run to plot
        axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"imprint tune: recommended {t.scores.settings[t.best].label()}", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def ceiling_md(t: Tuning) -> str:
    """The loop recall no novelty setting can beat, per corpus and patience (`ceiling.loop_ceiling`)."""
    shipped = t.scores.settings[t.shipped].patience
    lines = ["# The ceiling on loop recall", "",
             "What a perfect novelty judgement would catch: every round inside a labelled loop judged "
             "\"no progress\", the shipped verdicts everywhere else, over all labelled runs (dev and held-out). "
             "A loop missed here is out of reach of every novelty setting at that patience: it is shorter than "
             "the patience, or made of write rounds (which the record leaves out of the heuristic), or progress "
             "just before it resets the count. Cells: loops caught / labelled loops (stops in useful runs before "
             "their labelled round, if any, in brackets).", ""]
    for name, what in CEILINGS.items():
        rows = [r for r in t.ceiling if r["ceiling"] == name]
        if not rows:
            continue
        pats = sorted({r["patience"] for r in rows})
        lines += [f"## {name}: {what}", "", "| corpus | " + " | ".join(
            f"**{p}**" if p == shipped else str(p) for p in pats) + " |",
            "| --- |" + " --- |" * len(pats)]
        for corpus in dict.fromkeys(r["corpus"] for r in rows):
            cells = {r["patience"]: r for r in rows if r["corpus"] == corpus}
            lines.append(f"| {corpus} | " + " | ".join(
                f"{cells[p]['caught']}/{cells[p]['loops']}" + (f" ({cells[p]['premature']})" if cells[p]["premature"]
                                                               else "") for p in pats) + " |")
        lines.append("")
    lines.append(f"Patience in bold: the shipped one ({shipped}).")
    return "\n".join(lines) + "\n"


def ceiling_line(t: Tuning) -> str:
    shipped = t.scores.settings[t.shipped].patience
    at = [r for r in t.ceiling if r["ceiling"] == "record" and r["patience"] == shipped]
    if not at:
        return ""
    best: dict[str, dict[str, Any]] = {}
    for r in t.ceiling:
        if r["ceiling"] == "record" and r["loops"] and (
                r["corpus"] not in best or r["caught"] > best[r["corpus"]]["caught"]):
            best[r["corpus"]] = r
    figs = "; ".join(f"{r['corpus']} {r['caught']}/{r['loops']}" + (
        f" (at best {best[r['corpus']]['caught']}/{r['loops']}, patience {best[r['corpus']]['patience']})"
        if best[r["corpus"]]["caught"] > r["caught"] else "") for r in at if r["loops"])
    return (f"Ceiling (`ceiling.md`): with every round inside a labelled loop judged no progress, patience "
            f"{shipped} would catch {figs}.")


def _shipped_words(t: Tuning) -> str:
    s = t.scores.settings[t.shipped]
    return f"patience {s.patience}, shipped novelty config" if s.patience is not None else s.label()


def write_outputs(t: Tuning, out: Path, command: str, timing: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "summary.md": summary_md(t, command, timing),
        "front.md": front_md(t),
        "split.md": split_md(t),
        **({"ceiling.md": ceiling_md(t)} if t.ceiling else {}),
        "settings.csv": settings_csv(t),
        "recommendation.json": json.dumps(recommendation(t, command), indent=2, default=str) + "\n",
        "command.txt": command + "\n",
    }
    written = []
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.append(out / name)
    written.append(plot_fronts(t, out / "front.png"))
    return written
