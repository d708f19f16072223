"""Regression runs: runs that the stop rule once got wrong, kept with their
label so that the gate and the tuner judge them every time (ADR 0102's
remedy for its first invalidation condition: "add regression traces").

A regression is two things, written by `imprint regress add`:

- its run as an `imprint-rounds/1` round log, `<store>/<name>.jsonl` (the
  store is `traces/regressions/`), whatever it came from: one of our traces,
  a round log, or another agent's raw trajectory;
- its label in the regressions labels file
  (`scenarios/labels/regressions.yaml`), keyed `<store folder>/<name>`
  (`regressions/<name>`, a path tail that only the stored file has), with a
  note, the source, the date and what the rule did with it then
  (`when_added`).

Nothing is written until everything is checked: the label against the run
(its rounds exist, a loop's period fits), the name (free, and claimed by no
other labels file), the run's content (not a run already stored), and the
labels file (valid, and still valid with the entry appended). The entry is
appended as text, so the file's comments and entries stay as they were.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from imprint_core.errors import UserInputError
from imprint_core.files import write_files

from .. import conventions

from .importers.convert import render_round_log
from .labels import LABELS_FORMAT, Labels, RunLabel, Verdict, parse_labels, read_user_file
from .roundlogs import RoundLog, read_round_log
from .runfiles import RunFile, load_runs

CORPUS = "regressions"
"""The corpus (and gate source) name of the regressions labels file."""
STORE = "traces/regressions"
LABELS_FILE = "scenarios/labels/regressions.yaml"
LOOP_SPEC = "START-END or START-END:PERIOD (e.g. 16-23 or 16-23:2)"
NAME_EXPECTED = "letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100)"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", re.ASCII)
_LOOP = re.compile(r"\s*([0-9]{1,9})\s*-\s*([0-9]{1,9})\s*(?::\s*([0-9]{1,9})\s*)?", re.ASCII)
_EMPTY_RUNS = re.compile(r"^runs:[ \t]*\{[ \t]*\}[ \t]*(#.*)?$", re.MULTILINE)

HEADER = f"""\
# Regression runs (`imprint regress add`): runs the stop rule once got wrong.
# Each is stored as a round log, traces/regressions/<name>.jsonl, and keyed
# here as regressions/<name>. `imprint check` judges every one on its own
# (reports/gate.toml: premature_stops.per_run), `imprint tune` tunes on them as
# a corpus of their own, and `imprint regress list` shows what the current
# rule does with each. Entries are appended by `imprint regress add`.
format: {LABELS_FORMAT}
runs: {{}}
"""


# ---- the label as given on the command line ---------------------------------------------------------------
def parse_loop(spec: str) -> tuple[int, int, int | None]:
    """`START-END[:PERIOD]` as (start, end, period or None); anything else
    is a UserInputError on `--loop`."""
    m = _LOOP.fullmatch(spec)
    if m is None:
        raise UserInputError(f"{spec!r} is not a loop", key="--loop", expected=LOOP_SPEC)
    a, b = int(m.group(1)), int(m.group(2))
    period = int(m.group(3)) if m.group(3) is not None else None
    if a < 1:
        raise UserInputError(f"{spec!r}: rounds are numbered from 1", key="--loop", expected=LOOP_SPEC)
    if b < a:
        raise UserInputError(f"{spec!r}: the loop ends before it starts", key="--loop", expected="START <= END")
    if period is not None and not 1 <= period < a:
        raise UserInputError(f"{spec!r}: with period {period}, round {a} would repeat round {a - period}",
                             key="--loop", expected=f"a period of 1 to {a - 1}: each round repeats the one PERIOD "
                                                    "rounds before it" if a > 1 else "no period: round 1 repeats nothing")
    return a, b, period


def loop_spec(a: int, b: int, period: int | None) -> str:
    return f"{a}-{b}" + (f":{period}" if period is not None else "")


@dataclass
class Regression:
    """A label to add: useful until a round, or loops (start, end, period)."""
    name: str
    useful_until: int | None = None
    loops: list[tuple[int, int, int | None]] = field(default_factory=list)
    note: str = ""
    source: str = ""
    added: str = ""
    when_added: Verdict | None = None

    def describe(self) -> str:
        parts = [f"useful until round {self.useful_until}"] if self.useful_until is not None else []
        parts += [f"loop {loop_spec(*lp)}" for lp in self.loops]
        return ", ".join(parts)

    def as_label(self, key: str) -> RunLabel:
        """The label that the labels file will read back (file and line aside)."""
        loops = sorted(self.loops, key=lambda x: x[:2])
        return RunLabel(key, self.useful_until, tuple((a, b) for a, b, _ in loops), self.note, "", None,
                        tuple(p for _, _, p in loops), self.source, self.added, self.when_added)


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UserInputError(f"{name!r} cannot name a regression", key="--name", expected=NAME_EXPECTED)
    return name


def default_name(run: RunFile) -> str:
    """The run's file stem, made a valid name."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run.log.path).stem, flags=re.ASCII).lstrip("._-")[:100]
    return stem or "run"


def check_against(reg: Regression, log: RoundLog, origin: str) -> None:
    """The label fits the run: its rounds exist (and a loop's period, which
    `parse_loop` checked against the loop's start, then does too)."""
    n = len(log.rounds)
    if n == 0:
        raise UserInputError("the run has no rounds: there is nothing to stop", file=origin)
    if reg.useful_until is not None and not 1 <= reg.useful_until <= n:
        raise UserInputError(f"round {reg.useful_until} is not a round of the run, which has {n}", file=origin,
                             key="--useful-until", expected=f"a round from 1 to {n}")
    for a, b, p in reg.loops:
        if b > n:
            raise UserInputError(f"loop {loop_spec(a, b, p)} ends after the run's last round, {n}", file=origin,
                                 key="--loop", expected=f"rounds from 1 to {n}")


# ---- the labels file ----------------------------------------------------------------------------------------
def render_entry(key: str, reg: Regression) -> str:
    """The entry under `runs:`, indented two spaces (YAML that reads back as `reg`)."""
    body: dict[str, Any] = {}
    if reg.useful_until is not None:
        body["should_not_stop_before"] = reg.useful_until
    if reg.loops:
        body["loops"] = [{"start": a, "end": b, **({"period": p} if p is not None else {})} for a, b, p in reg.loops]
    for k in ("note", "source", "added"):
        if getattr(reg, k):
            body[k] = getattr(reg, k)
    if reg.when_added is not None:
        body["when_added"] = reg.when_added.to_dict()
    entry = {key: body}
    text = yaml.safe_dump(entry, default_flow_style=None, sort_keys=False, allow_unicode=True, width=10 ** 6)
    if yaml.safe_load(text) != entry:   # PyYAML writes some line breaks (U+0085) raw and reads them back as spaces
        text = yaml.safe_dump(entry, default_flow_style=None, sort_keys=False, allow_unicode=False, width=10 ** 6)
    # split on newlines only: str.splitlines() also cuts at U+0085 and U+2028, which YAML keeps inside a scalar
    return "".join("  " + line + "\n" for line in text.rstrip("\n").split("\n"))


def read_labels_file(path: Path) -> tuple[str, Labels]:
    """The file's text and labels; a missing file reads as the empty one `HEADER` starts."""
    text = read_user_file(path, "labels") if path.exists() else HEADER
    return text, parse_labels(text, str(path))


def with_entry(text: str, labels: Labels, path: Path, key: str, reg: Regression) -> str:
    """`text` with the entry appended, checked by reading it back: every
    label already there unchanged, and the new one as meant."""
    if key in labels.runs:
        old = labels.runs[key]
        raise UserInputError(f"{key} is already labelled (line {old.line})", file=str(path), key=f"runs.{key}",
                             expected="a new --name")
    new = _EMPTY_RUNS.sub("runs:", text, count=1) if len(_EMPTY_RUNS.findall(text)) == 1 else text
    new = (new if new.endswith("\n") or not new else new + "\n") + render_entry(key, reg)
    try:
        back = parse_labels(new, str(path))
    except UserInputError:
        back = None
    want = reg.as_label(key)
    if back is None or set(back.runs) != set(labels.runs) | {key} \
            or any(back.runs[k] != lab for k, lab in labels.runs.items()) \
            or replace(back.runs[key], file="", line=None) != want:
        raise UserInputError("cannot append a label: `runs:` must be the file's last key, a block mapping "
                             "(or `runs: {}`)", file=str(path), key="runs",
                             expected="the layout `imprint regress add` writes")
    return new


# ---- the store ---------------------------------------------------------------------------------------------------
def content_digest(log: RoundLog) -> str:
    """What makes two runs the same run: every round's calls (tool, arguments,
    kind, status, result, segments) and where user turns start replies."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps(log.labels.get("user_turn_before_round") or []).encode())
    for rnd in log.rounds:
        h.update(b"\x1e")
        for c in rnd.calls:
            h.update(json.dumps([c.tool, c.args, c.kind, c.status, c.result, c.segments], ensure_ascii=False,
                                sort_keys=True).encode() + b"\x1f")
    return h.hexdigest()


def stored_runs(store: Path) -> list[RoundLog]:
    """The round logs of the store, by name; a broken one is an error naming it."""
    if not store.is_dir():
        return []
    return [read_round_log(p) for p in sorted(store.glob("*.jsonl"))]


def read_run(spec: str) -> RunFile:
    """One run: FILE (a trace, a round log, or a raw trajectory of one run), or
    FILE#RUN for one run of a file of many (a tau-bench results file)."""
    path, _, which = spec.partition("#") if "#" in spec and not Path(spec).exists() else (spec, "", "")
    if Path(path).is_dir():
        raise UserInputError("is a folder: give one run's file", file=path)
    runs, _ = load_runs([path])
    if which:
        chosen = [r for r in runs if Path(r.log.path).stem == which]
        if not chosen:
            raise UserInputError(f"no run {which!r} in the file", file=path,
                                 expected="one of " + ", ".join(Path(r.log.path).stem for r in runs[:10]))
        return chosen[0]
    if len(runs) != 1:
        raise UserInputError(f"holds {len(runs)} runs; name one as FILE#RUN", file=path,
                             expected="e.g. " + ", ".join(f"{path}#{Path(r.log.path).stem}" for r in runs[:3]))
    return runs[0]


def key_of(store: Path, name: str) -> str:
    """A regression's label key: the stored file's path tail `<store folder>/<name>`."""
    return f"{store.name}/{name}"


def check_new(store: Path, name: str, log: RoundLog, others: Labels, own: Labels | None = None) -> None:
    """The name is free (no stored file, no label elsewhere that would claim
    the stored file) and the run's content is not stored yet. With `own`
    (the labels file's labels), a stored round log without its label is a
    crash's orphan, not a stored regression: it is replaced."""
    target = store / f"{name}.jsonl"
    left = set(orphans(store, own)) if own is not None else set()
    # The same run first: stored under any name, another --name would not help (and was suggested).
    digest = content_digest(log)
    for stored in stored_runs(store):
        if Path(stored.path) not in left and content_digest(stored) == digest:
            raise UserInputError(f"this run is already stored as the regression {Path(stored.path).stem!r}",
                                 file=stored.path,
                                 expected="a run not stored yet (`imprint regress list` shows them)")
    if target.exists() and target not in left:
        raise UserInputError(f"a regression named {name!r} is already stored", file=str(target), key="--name",
                             expected="another --name")
    claimed = others.for_run(name, key_of(store, name), str(target))
    if claimed is not None:
        raise UserInputError(f"{claimed.name!r} in {claimed.file}:{claimed.line} would take the run named {name!r} "
                             "for its own", key="--name", expected="a name no other labels file uses")


def locked(labels_path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the labels file's lock while a regression is checked and written:
    two `regress add` at once each read, change and replace the file, and one
    of the labels was lost."""
    return conventions.locked(labels_path, command="regress add", what="labels file", key="--labels",
                              expected="a labels folder that can be written")


def orphans(store: Path, labels: Labels) -> list[Path]:
    """Stored round logs without a label: what a crash between writing the
    round log and the label leaves. They are not stored regressions: the
    next `regress add` of the run replaces one."""
    if not store.is_dir():
        return []
    return [p for p in sorted(store.glob("*.jsonl")) if key_of(store, p.stem) not in labels.runs]


def write(store: Path, name: str, log: RoundLog, labels_path: Path, labels_text: str) -> Path:
    """The round log and the labels file as one unit (write_files): both, or
    neither. The round log is renamed into place first, so a crash between
    the two renames leaves an orphan (see `orphans`), never a label without
    its run."""
    target = store / f"{name}.jsonl"
    root = Path(os.path.commonpath([store.resolve(), labels_path.resolve().parent]))
    try:
        write_files(root, {target.resolve().relative_to(root): render_round_log(log),
                           labels_path.resolve().relative_to(root): labels_text}, tag="regress")
    except OSError as exc:
        where = Path(exc.filename).resolve() if exc.filename else None
        labels_side = where is not None and (where == labels_path.resolve() or where in labels_path.resolve().parents)
        raise UserInputError.from_os_error(exc, doing="store the regression",
                                           key="--labels" if labels_side else "--store",
                                           expected="a store and a labels folder that can be written",
                                           file=str(target)) from None
    return target
