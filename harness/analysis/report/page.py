"""`imprint report`: a self-contained HTML page, a Markdown summary and PNG
plots from traces (and round logs), all read through `frames.load_frames`.

The plots answer the record's questions: do the token estimates match what
providers measure; what do `reserve` and `prefix-refund` charge for the same
script; how runs spend their token and time budgets round by round; how
novelty and patience evolve up to the stop; how runs stop and end; how far
they overshoot the deadline.

This module is the page (templates/report.html around the sections, and
its Markdown twin); `sections` says what each section shows,
`inputs` which runs, `tables` and `plots` /
`timelines` its tables and plots.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import string
import time
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from imprint_core.errors import UserInputError

from ..frames.load import Frames
from .sections import Section, build_sections

PLOT_NAMES = ("accuracy-timelines.png", "compare.png", "estimates-scatter.png", "estimates-ratio.png", "policy-compare.png", "budget-per-round.png",
              "novelty-timeline.png", "stops.png", "overshoot.png")

NO_TRACES = ("No traces of our runs among the inputs, only round logs and raw trajectories: they carry no token "
             "estimates, ledgers, budgets, stop reasons of their own or deadlines, so those sections are left out.")


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _code(text: str) -> str:
    """Escaped HTML with `spans` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _template() -> string.Template:
    return string.Template(resources.files(__package__).joinpath("templates", "report.html")
                           .read_text(encoding="utf-8"))


def render_html(sections: list[Section], frames: Frames, title: str, generated: str, notes: Sequence[str] = ()) -> str:
    """The page: templates/report.html (skeleton and CSS) around the sections."""
    parts = [f'<p class="note">{html.escape(w)}</p>' for w in [*notes, *_page_notes(frames)]]
    for s in sections:
        parts.append(f'<h2 id="{_slug(s.title)}">{html.escape(s.title)}</h2>')
        if s.verdict:
            parts.append(f'<p class="verdict {"pass" if s.verdict[0] else "fail"}">{_code(s.verdict[1])}</p>')
        if s.intro:
            parts.append(f"<p>{_code(s.intro)}</p>")
        for n in s.notes:
            parts.append(f'<p class="note">{_code(n)}</p>')
        image = [f'<img src="{html.escape(s.image)}" alt="{html.escape(s.alt or s.title)}">'] if s.image else []
        tables = []
        for caption, df in s.tables:
            body = df.to_html(index=False, border=0, escape=True, na_rep="-")
            # each table in a box that scrolls on its own (the page never does); its cells wrap first
            tables.append('<div class="table-wrap">' + body.replace("<table", f"<table title=\"{html.escape(caption)}\"", 1)
                          .replace(">", f"><caption>{html.escape(caption)}</caption>", 1) + "</div>")
        if s.links:
            items = "".join(f'<li>{_link(label, href)}: {html.escape(text)}</li>' for label, href, text in s.links)
            tables.append(f'<ul class="runs">{items}</ul>')
        parts += image + tables if s.figures_first else tables + image
    return _template().substitute(
        title=html.escape(title), traces=int((frames.runs["source"] == "trace").sum()),
        round_logs=int((frames.runs["source"] == "roundlog").sum()), files=len(frames.files),
        providers=html.escape(", ".join(frames.providers) or "none"), generated=html.escape(generated),
        nav="".join(f'<a href="#{_slug(s.title)}">{html.escape(s.title)}</a>' for s in sections),
        body="".join(part + "\n" for part in parts))


def _link(label: str, href: str | None) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(label)}</a>' if href else html.escape(label)


def render_markdown(sections: list[Section], frames: Frames, title: str, generated: str,
                    notes: Sequence[str] = ()) -> str:
    n_traces = int((frames.runs["source"] == "trace").sum())
    n_logs = int((frames.runs["source"] == "roundlog").sum())
    lines = [f"# {title}", "", f"{n_traces} trace(s) and {n_logs} round log(s) from {len(frames.files)} file(s); "
             f"providers: {', '.join(frames.providers) or 'none'}; generated {generated}.", ""]
    for w in [*notes, *_page_notes(frames)]:
        lines += [f"> {w}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.verdict:
            lines += [f"**{s.verdict[1]}**", ""]
        if s.intro:
            lines += [s.intro, ""]
        for n in s.notes:
            lines += [f"> {n}", ""]
        image = [f"![{s.alt or s.title}]({s.image})", ""] if s.image else []
        tables: list[str] = []
        for caption, df in s.tables:
            tables += [f"**{caption}**", "", _md_table(df.fillna("-")), ""]
        if s.links:
            tables += [f"- {f'[{label}](<{href}>)' if href else label}: {text}" for label, href, text in s.links] + [""]
        lines += image + tables if s.figures_first else tables + image
    return "\n".join(lines)


def _page_notes(frames: Frames) -> list[str]:
    notes = [w for w in frames.warnings if w.strip()]
    if not (frames.runs["source"] == "trace").any():
        notes.append(NO_TRACES)
    return notes


REPORT_FILES = frozenset(PLOT_NAMES) | {"index.html", "summary.md"}
"""What a report writes into its folder; anything else there (a screenshot) is kept."""


def write_report(frames: Frames, out: str | Path, *, title: str = "Imprint research-loop report",
                 select: Sequence[str] = (), max_runs: int = 6, judged: Sequence[Any] = (),
                 rule: str = "", comparison: Any = None, notes: Sequence[str] = (),
                 gate: Any = None) -> dict[str, Path]:
    """`judged`: the labelled runs as the gate judged them (`gate.judged_runs`),
    for the accuracy section; `rule`: the stop rule they were replayed with, in words;
    `comparison`: a compare.json, or a callable computing the comparison
    (`sections.build_sections`); `gate`: the gate's verdict on these
    inputs (`sections.GateVerdict`), the page's opening;
    `notes`: lines for the top of the page.

    The report is written whole in a staging folder beside `out`, then
    swapped in (`swap_in`): killed at any point, `out` holds the old report
    or the new one, complete, never a page pointing at missing or cut plots.
    A plot without data this time does not linger from the old report; the
    folder's other files are carried over."""
    from imprint_core.files import clean_stale, staging_dir, swap_in
    out = Path(out)
    if out.is_symlink():
        out = out.resolve()                         # the folder it names is replaced, the link kept
    if out.exists() and not out.is_dir():
        raise UserInputError("a file stands where the report's folder goes", file=str(out), key="--out",
                             expected="a folder (created, or its report replaced)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(out.parent)                     # what a killed report left beside it
        stage = staging_dir(out.parent, "report")
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing="write the report", key="--out",
                                           expected="a folder that can be written") from None
    try:
        from .sections import git_ignored
        committed = git_ignored(out) is False          # a folder git tracks: links only to what every checkout has
        sections = build_sections(frames, stage, select=select, max_runs=max_runs, judged=judged, rule=rule,
                                  comparison=comparison, gate=gate, committed=committed)
        for s in sections:
            if s.image:
                s.image = Path(s.image).name
        generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        for name, text in (("index.html", render_html(sections, frames, title, generated, notes)),
                           ("summary.md", render_markdown(sections, frames, title, generated, notes))):
            (stage / name).write_text(text, encoding="utf-8")
            (stage / name).chmod(0o644)
        _carry_over(out, stage)
        _sync(stage)
        swap_in(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    written = {"index.html": out / "index.html", "summary.md": out / "summary.md"}
    for s in sections:
        if s.image:
            written[s.image] = out / s.image
    return written


def _carry_over(old: Path, stage: Path) -> None:
    """Hard-link (else copy) into the staging folder what the old folder holds
    that a report does not write, so that the swap keeps it."""
    if not old.is_dir():
        return
    for entry in old.iterdir():
        if entry.name in REPORT_FILES or (stage / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, stage / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, stage / entry.name)


def _link_or_copy(src: Any, dst: Any) -> None:
    try:
        if Path(src).is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _sync(folder: Path) -> None:
    """The staged files on disk before the swap names them: a power cut after it finds them whole."""
    for f in folder.iterdir():
        if f.is_file() and not f.is_symlink():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
