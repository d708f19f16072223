"""Run labels for tuning and the gate (`imprint-labels/1`, YAML).

```yaml
format: imprint-labels/1          # optional
description: how the runs were judged   # optional
runs:
  11-0:                            # a run's name: a scenario name, or a round log's file stem
    should_not_stop_before: 10     # a useful run: a no-progress stop before round 10 is premature
  9-2:
    loops: [16, 23]                # rounds 16 to 23 (inclusive) repeat themselves
    note: same payment error five times
  23-3:
    loops: [[5, 6], [10, 12]]      # several loops
  chat_dev/astropy-1:              # a path's tail (`folder/stem`), for stems repeated across folders
    loops: [{start: 8, end: 15, period: 2}]   # A B A B: round 8 repeats 6, 9 repeats 7, ...
  regressions/astropy-2:           # written by `imprint regress add` (harness.realruns.regressionstore)
    should_not_stop_before: 23
    source: ../shared/data/raw/x.traj.json      # where the run came from
    added: '2025-01-31'                          # when it was labelled
    when_added: {stop_round: 9, holds: false, rule: 'patience 4, normalization default'}
```

Each run has `should_not_stop_before`, `loops` or both, and an optional
`note`, `source`, `added` (a date) and `when_added` (what the stop rule did
with the run when it was labelled: its stop round or null, whether the label
held, and the rule). A loop is `[A, B]` or `{start: A, end: B, period: P}`: rounds A to B
only repeat earlier work, each round the one P rounds before it (P optional;
1: the same every round, 2: A B A B). Mistakes name the file, the line and the key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Iterable

from imprint_core.errors import UserInputError

from ..yamlsource import line_of, load_yaml_entries

LABELS_FORMAT = "imprint-labels/1"
RUN_KEYS = ("should_not_stop_before", "loops", "repeats", "note", "source", "added", "when_added")
LOOP_KEYS = ("start", "end", "period")
VERDICT_KEYS = ("stop_round", "holds", "rule")
LOOP_FORMS = "[first round, last round] or {start: A, end: B, period: P}"


@dataclass(frozen=True)
class Verdict:
    """What the stop rule did with a labelled run: its no-progress stop round
    (None: it never stopped), whether the label held (no premature stop, every
    loop caught) and the rule's settings in words."""
    stop_round: int | None
    holds: bool
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"stop_round": self.stop_round, "holds": self.holds, "rule": self.rule}


@dataclass(frozen=True)
class RunLabel:
    name: str
    should_not_stop_before: int | None = None
    loops: tuple[tuple[int, int], ...] = ()
    note: str = ""
    file: str = ""
    line: int | None = None
    periods: tuple[int | None, ...] = ()   # per loop, in order: a round repeats the one P before (None: not given)
    source: str = ""                       # where the run came from (a path), where known
    added: str = ""                        # the date it was labelled (YYYY-MM-DD), where known
    when_added: Verdict | None = None      # what the stop rule did with it then, where recorded
    repeats: tuple[tuple[int, int], ...] = ()   # single repetitions: kept, never judged (README: a repeat is no loop)

    @property
    def useful(self) -> bool:
        return self.should_not_stop_before is not None


@dataclass
class Labels:
    runs: dict[str, RunLabel] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.runs)

    def for_run(self, name: str, run: str | None = None, path: str | None = None) -> RunLabel | None:
        """The label of a run, by its name, its run id, its file name or stem, or
        its path without suffix below some folder (`run-folder/stem`)."""
        parts = (Path(path).parent / Path(path).stem).parts if path else ()
        tails = ["/".join(parts[i:]) for i in range(len(parts) - 1)]
        for key in (name, run, Path(path).name if path else None, Path(path).stem if path else None, *tails):
            if key and key in self.runs:
                return self.runs[key]
        return None

    def merged(self, other: "Labels") -> "Labels":
        out = Labels(dict(self.runs), self.files + other.files)
        for name, lab in other.runs.items():
            if name in out.runs:
                first = out.runs[name]
                raise UserInputError(f"run {name!r} is labelled twice (first in {first.file}:{first.line})",
                                     file=lab.file, line=lab.line, key=f"runs.{name}")
            out.runs[name] = lab
        return out


def _int(value: Any, file: str, line: int | None, key: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserInputError(f"{value!r} is not a round number", file=file, line=line, key=key, expected=what)
    return value


def parse_labels(text: str, name: str) -> Labels:
    """The labels of a labels file's text (`name`: its path, for messages),
    read a run at a time: the file of 100,000 runs is never parsed whole."""
    out = Labels(files=[name])
    has_runs = False
    for path, value, lines in load_yaml_entries(text, name, "runs"):
        if not path:
            if value is None:
                raise UserInputError("empty labels file", file=name, line=1, key="runs",
                                     expected="a `runs:` mapping")
            raise UserInputError("a labels file is a mapping", file=name, line=1,
                                 expected="keys format, description, runs")
        key = path[0]
        if len(path) == 2:
            label = _run_label(path[1], value, name, lines)
            out.runs[label.name] = label
        elif key not in ("format", "description", "runs"):
            raise UserInputError("unknown key", file=name, line=line_of(lines, path), key=str(key),
                                 expected="format, description, runs")
        elif key == "format" and value != LABELS_FORMAT:
            raise UserInputError(f"unsupported format {value!r}", file=name, line=line_of(lines, path),
                                 key="format", expected=LABELS_FORMAT)
        elif key == "runs":
            has_runs = True
            if not isinstance(value, dict):
                raise UserInputError("runs must be a mapping", file=name, line=line_of(lines, path), key="runs",
                                     expected="a mapping from run name to its label")
    if not has_runs:
        raise UserInputError("required key is missing", file=name, line=1, key="runs",
                             expected="a mapping from run name to its label")
    return out


def _run_label(raw_name: Any, body: Any, name: str, lines: dict[tuple, int]) -> RunLabel:
    """One run's label (`runs.NAME` of the file `name`)."""
    run = str(raw_name)
    loc = ("runs", raw_name)
    where = f"runs.{run}"
    line = line_of(lines, loc)
    if not isinstance(body, dict) or not body:
        raise UserInputError("a run's label must be a mapping", file=name, line=line, key=where,
                             expected="should_not_stop_before: N and/or loops: [A, B]")
    for key in body:
        if key not in RUN_KEYS:
            raise UserInputError("unknown key", file=name, line=line_of(lines, loc + (key,)), key=f"{where}.{key}",
                                 expected=", ".join(RUN_KEYS))
    if not {"should_not_stop_before", "loops", "repeats"} & set(body):
        raise UserInputError("a label needs should_not_stop_before, loops or repeats", file=name, line=line,
                             key=where, expected="should_not_stop_before: N and/or loops: [A, B]")
    snsb = None
    if "should_not_stop_before" in body:
        k = loc + ("should_not_stop_before",)
        snsb = _int(body["should_not_stop_before"], name, line_of(lines, k), f"{where}.should_not_stop_before",
                    "a round number (1 or more)")
    loops = _spans(body, "loops", name, lines, loc, where, line)
    repeats = _spans(body, "repeats", name, lines, loc, where, line)
    for key in ("note", "source"):
        if not isinstance(body.get(key, ""), str):
            raise UserInputError(f"{key} must be text", file=name, line=line_of(lines, loc + (key,)),
                                 key=f"{where}.{key}")
    added = body.get("added", "")
    if isinstance(added, date):   # YAML reads an unquoted 2025-01-31 as a date
        added = added.isoformat()
    if not isinstance(added, str) or added and not _DATE.fullmatch(added):
        raise UserInputError(f"{added!r} is not a date", file=name, line=line_of(lines, loc + ("added",)),
                             key=f"{where}.added", expected="YYYY-MM-DD")
    when = _verdict(body["when_added"], name, lines, loc + ("when_added",), f"{where}.when_added") \
        if "when_added" in body else None
    return RunLabel(run, snsb, tuple((a, b) for a, b, _ in loops), body.get("note", ""), name, line,
                    tuple(p for _, _, p in loops), body.get("source", ""), added, when,
                    tuple((a, b) for a, b, _ in repeats))


def _spans(body: dict, what: str, file: str, lines: dict, loc: tuple, where: str,
           line: int | None) -> list[tuple[int, int, int | None]]:
    """`loops` or `repeats` of a run's label: stretches [A, B] or {start, end, period}, sorted."""
    loops: list[tuple[int, int, int | None]] = []
    if what in body:
        k = loc + (what,)
        raw = body[what]
        single = isinstance(raw, dict) or isinstance(raw, list) and len(raw) == 2 \
            and not any(isinstance(x, (list, dict)) for x in raw)
        pairs = [raw] if single else raw
        if not isinstance(pairs, list) or not pairs:
            raise UserInputError(f"{what} must be one stretch or a list of them", file=file, line=line_of(lines, k),
                                 key=f"{where}.{what}", expected=LOOP_FORMS)
        for i, pair in enumerate(pairs):
            kk = f"{where}.{what}" + ("" if single else f"[{i}]")
            ploc = k + (() if single else (i,))
            pline = line_of(lines, ploc)
            period = None
            if isinstance(pair, dict):
                for key in pair:
                    if key not in LOOP_KEYS:
                        raise UserInputError("unknown key", file=file, line=line_of(lines, ploc + (key,)),
                                             key=f"{kk}.{key}", expected=", ".join(LOOP_KEYS))
                for key in ("start", "end"):
                    if key not in pair:
                        raise UserInputError("required key is missing", file=file, line=pline,
                                             key=f"{kk}.{key}", expected="a round number (1 or more)")
                if "period" in pair:
                    period = _int(pair["period"], file, line_of(lines, ploc + ("period",)), f"{kk}.period",
                                  "rounds per repetition (1 or more; 2: A B A B)")
                pair = [pair["start"], pair["end"]]
            if not isinstance(pair, list) or len(pair) != 2:
                raise UserInputError(f"{pair!r} is not a loop", file=file, line=pline, key=kk,
                                     expected=LOOP_FORMS)
            a = _int(pair[0], file, pline, kk, "a round number (1 or more)")
            b = _int(pair[1], file, pline, kk, "a round number (1 or more)")
            if b < a:
                raise UserInputError(f"loop [{a}, {b}] ends before it starts", file=file, line=pline, key=kk,
                                     expected="A <= B")
            if period is not None and period >= a:
                raise UserInputError(f"period {period}: round {a} cannot repeat round {a - period}", file=file,
                                     line=line_of(lines, ploc + ("period",)), key=f"{kk}.period",
                                     expected=f"1 to {a - 1}: each round repeats the one P rounds before it")
            loops.append((a, b, period))
    loops.sort(key=lambda x: x[:2])
    return loops


_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


def _verdict(raw: Any, file: str, lines: dict[tuple, int], loc: tuple, where: str) -> Verdict:
    """`when_added: {stop_round: N or null, holds: true or false, rule: text}`."""
    expected = "{stop_round: N or null, holds: true or false, rule: text}"
    if not isinstance(raw, dict):
        raise UserInputError("when_added must be a mapping", file=file, line=line_of(lines, loc), key=where,
                             expected=expected)
    for key in raw:
        if key not in VERDICT_KEYS:
            raise UserInputError("unknown key", file=file, line=line_of(lines, loc + (key,)), key=f"{where}.{key}",
                                 expected=", ".join(VERDICT_KEYS))
    for key in ("stop_round", "holds"):
        if key not in raw:
            raise UserInputError("required key is missing", file=file, line=line_of(lines, loc), key=f"{where}.{key}",
                                 expected=expected)
    stop = raw["stop_round"]
    if stop is not None:
        stop = _int(stop, file, line_of(lines, loc + ("stop_round",)), f"{where}.stop_round",
                    "a round number, or null when the rule never stopped the run")
    if not isinstance(raw["holds"], bool):
        raise UserInputError(f"{raw['holds']!r} is not true or false", file=file,
                             line=line_of(lines, loc + ("holds",)), key=f"{where}.holds", expected="true or false")
    rule = raw.get("rule", "")
    if not isinstance(rule, str):
        raise UserInputError("rule must be text", file=file, line=line_of(lines, loc + ("rule",)), key=f"{where}.rule")
    return Verdict(stop, raw["holds"], rule)


def read_user_file(path: str | Path, what: str) -> str:
    """A file a person wrote, as text; failures name the file."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(p)) from None
    except OSError as exc:
        raise UserInputError(f"cannot read {what}: {exc.strerror}", file=str(p)) from None


def load_labels(paths: Iterable[str | Path]) -> Labels:
    out = Labels()
    for p in paths:
        out = out.merged(parse_labels(read_user_file(p, "labels"), str(p)))
    return out


def corpus_name(label_file: str | Path) -> str:
    """The corpus a labels file labels, by its name: `labels-tau-bench.yaml` -> `tau-bench`."""
    stem = Path(label_file).name
    for suffix in (".yaml", ".yml"):
        stem = stem.removesuffix(suffix)
    return stem.removeprefix("labels-") or stem


# ---- judging a stop against a label -------------------------------------------------------------------
LOOP_SLACK = 1
"""A labelled loop is caught by a stop from its first round to `LOOP_SLACK`
rounds after its last: a loop's `end` is the last round read as pure
repetition, and the round after it often still repeats in part, so a stop
one round late was still brought on by the loop (and cost one round)."""


@dataclass
class Judgement:
    premature: bool = False          # a useful run stopped before its round
    rounds_lost: int = 0             # rounds of the useful run cut off
    loop_rounds: int = 0             # rounds spent inside labelled loops before the stop
    loop_total: int = 0              # rounds inside labelled loops (what no stop at all spends)
    loops: int = 0
    loops_stopped: int = 0           # loops the stop landed inside (or before their end)
    loops_caught: int = 0            # loops caught: start <= stop <= end + slack (see `judge`)


def judge(label: RunLabel, stop_round: int | None, rounds: int | None = None, slack: int = LOOP_SLACK) -> Judgement:
    """Judge a no-progress stop (None: the rule never stopped the run).
    Rounds past the run's last round cannot be spent, so loops are clipped
    to the rounds the run has (a loop wholly past the end is not counted).

    A loop is caught when the stop lands in it: from its first round to
    `slack` rounds after its last. A later loop of the same run counts as
    caught too when the stop caught an earlier one (it never ran because the
    loop before it was stopped); a stop before a loop that caught none is no
    catch, and neither is no stop or a later one."""
    j = Judgement()
    if label.should_not_stop_before is not None and stop_round is not None \
            and stop_round < label.should_not_stop_before:
        j.premature = True
        j.rounds_lost = label.should_not_stop_before - stop_round
    caught_earlier = False
    for a, b in label.loops:
        if rounds is not None:
            b = min(b, rounds)
        if b < a:
            continue
        j.loops += 1
        j.loop_total += b - a + 1
        end = b if stop_round is None else min(stop_round, b)
        j.loop_rounds += max(0, end - a + 1)
        if stop_round is not None and stop_round <= b:
            j.loops_stopped += 1
        if stop_round is not None and (a <= stop_round <= b + slack or stop_round < a and caught_earlier):
            j.loops_caught += 1
            caught_earlier = True
    return j


@dataclass
class Tally:
    """Judgements added up over runs: useful runs and their premature stops,
    labelled loops and the ones caught."""
    runs: int = 0
    useful: int = 0
    premature: int = 0
    loops: int = 0
    caught: int = 0

    def add(self, label: RunLabel, j: Judgement) -> None:
        self.runs += 1
        self.useful += label.useful
        self.premature += j.premature
        self.loops += j.loops
        self.caught += j.loops_caught

    @property
    def recall(self) -> float | None:
        return self.caught / self.loops if self.loops else None

    @property
    def premature_share(self) -> float | None:
        return self.premature / self.useful if self.useful else None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "useful": self.useful, "premature": self.premature,
                "premature_share": self.premature_share, "loops": self.loops, "caught": self.caught,
                "recall": self.recall}

