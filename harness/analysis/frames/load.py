"""One loader: our traces, round logs and other agents' raw trajectories as
pandas DataFrames.

`load_frames(paths)` is the only place that turns trace or round-log files
into tables for the reports and the gate (which files are which, and raw
trajectories converted in memory, is `realruns.runfiles`); everything
downstream works on the four tables of `Frames`:

- `requests`   one row per model request (research requests and the final
               request): estimate, reservation, charge, refund, measured usage.
- `tool_calls` one row per tool result (traces) or call (round logs): kind,
               status, novelty verdict, timing against the deadline, text.
- `rounds`     one row per round: kind, progress, new evidence, patience.
- `runs`       one row per file: provider, policy, stop reason, final mode,
               totals, deadline overshoot.

Round logs (`imprint-rounds/1`, and raw trajectories converted to them)
carry no model, budgets or novelty; they are replayed here through a stop rule (the record's novelty and
patience rule unless another is named), the same code the loop runs, with each
user turn (`labels.user_turn_before_round`) starting a new reply, as it does
in the loop: a user message is a new reply with its own budgets and
patience.

The rows come from `traces` (a trace) and `roundlogs` (a round
log, replayed); the columns are `columns`'.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import jsonlines
import pandas as pd

from imprint_core.errors import UserInputError
from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig

from ...realruns.roundlogs import PATIENCE, USER_TURNS, RoundLog, RuleFactory, read_round_log
from ...realruns.runfiles import find_inputs, read_raw
from .columns import NUMERIC_COLUMNS, REQUEST_COLUMNS, ROUND_COLUMNS, RUN_COLUMNS, TOOL_COLUMNS
from .roundlogs import roundlog_rows
from .traces import trace_rows


@dataclass
class Frames:
    requests: pd.DataFrame
    tool_calls: pd.DataFrame
    rounds: pd.DataFrame
    runs: pd.DataFrame
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def providers(self) -> list[str]:
        """Providers of the trace runs, in a stable order."""
        runs = self.runs[self.runs["source"] == "trace"]
        return sorted(p for p in runs["provider"].dropna().unique())

    def measured_requests(self) -> pd.DataFrame:
        """Requests with an estimate and a positive measured prompt, each
        observation once. A replayed cassette repeats its recording's figures
        (and a rerun of a deterministic local scenario its own), so a scenario
        run beside the committed traces would count each twice: one row per
        (provider, scenario or run, request, attempt, estimate, measurement)."""
        req = self.requests
        req = req[req["measured_prompt"].notna() & (req["measured_prompt"] > 0) & req["estimated"].notna()]
        who = req["scenario"].where(req["scenario"].notna(), req["run"])
        return req[~req.assign(_who=who).duplicated(
            subset=["provider", "_who", "id", "role", "attempt", "estimated", "measured_prompt"])]

    def run(self, run: str) -> dict[str, Any]:
        row = self.runs[self.runs["run"] == run]
        if row.empty:
            raise KeyError(run)
        return row.iloc[0].to_dict()


# ---- finding files ------------------------------------------------------------------------
def find_files(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, str]], list[str]]:
    """(file, kind) for every trace, round log and raw trajectory under
    `paths` (`realruns.runfiles.find_inputs`). A named file of no kind is an
    error; one found in a directory is skipped with a warning."""
    found, warnings = find_inputs(paths)
    return [(f, kind) for f, kind, _ in found], warnings



class _RunIds:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def make(self, path: Path, prefix: str | None) -> str:
        base = f"{prefix or path.parent.name}/{path.stem}"
        rid, n = base, 2
        while rid in self.used:
            rid, n = f"{base}#{n}", n + 1
        self.used.add(rid)
        return rid



# ---- the loader ---------------------------------------------------------------------------------------
def load_frames(paths: Sequence[str | Path] | str | Path, *, patience: int = PATIENCE.default,
                normalization: str = "default", user_turns: str = "reset",
                novelty: NoveltyConfig | None = None, rule: str = "record",
                rule_params: dict[str, Any] | None = None) -> Frames:
    """Load traces, round logs and raw trajectories of other agents (files,
    or directories searched recursively; raw ones converted in memory, see
    `realruns.runfiles`) into DataFrames.

    Round logs and raw trajectories are replayed through a stop rule: the
    record's (`patience`, and `normalization` or a whole `novelty` config,
    which wins) unless `rule` names another (with `rule_params`); each user
    turn starts a new reply (`user_turns`). Traces carry their own
    decisions. Raises UserInputError (file, line, key) for a malformed file."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    factory, norm = _replay_rule(normalization, user_turns, novelty, patience, rule, rule_params)
    found, warnings = find_inputs(paths)
    files = [(f, kind) for f, kind, _ in found]
    named = {f for f, _, n in found if n}
    acc = _tables()
    ids = _RunIds()
    for path, kind in files:
        if kind == "trace":
            try:  # the header's run id; a header that cannot be read is read_trace's to name, below
                with open(path, encoding="utf-8") as fh, jsonlines.Reader(fh) as lines:
                    prefix = lines.read(type=dict).get("run_id")
            except (ValueError, EOFError, OSError, UnicodeDecodeError):  # jsonlines.InvalidLineError is a ValueError
                prefix = None
            trace_rows(path, ids.make(path, prefix), acc, warnings)
        else:
            logs, skipped = ([read_round_log(path)], None) if kind == "roundlog" else \
                read_raw(path, named=path in named)
            if skipped:
                warnings.append(skipped)
            for log in logs:
                roundlog_rows(log, ids.make(Path(log.path), None), acc, factory=factory, rule=rule,
                               normalization=norm, user_turns=user_turns)
    return _frames(acc, [str(p) for p, _ in files], warnings)


def replay_frames(logs: Sequence[RoundLog], *, patience: int = PATIENCE.default, user_turns: str = "reset",
                  novelty: NoveltyConfig | None = None, rule: str = "record",
                  rule_params: dict[str, Any] | None = None) -> Frames:
    """Round logs already in memory (each named by its `path`, which need not
    exist), replayed exactly as `load_frames` replays the files it reads."""
    factory, norm = _replay_rule("default", user_turns, novelty, patience, rule, rule_params)
    acc, ids = _tables(), _RunIds()
    for log in logs:
        roundlog_rows(log, ids.make(Path(log.path), None), acc, factory=factory, rule=rule, normalization=norm,
                       user_turns=user_turns)
    return _frames(acc, [log.path for log in logs], [])


def _replay_rule(normalization: str, user_turns: str, novelty: NoveltyConfig | None, patience: int, rule: str,
                 rule_params: dict[str, Any] | None) -> tuple[RuleFactory, str]:
    if novelty is not None:
        normalization = novelty.normalization
    if normalization not in NORMALIZATIONS:
        raise UserInputError(f"unknown normalization {normalization!r}", key="normalization",
                             expected="one of " + ", ".join(NORMALIZATIONS))
    if user_turns not in USER_TURNS:
        raise UserInputError(f"unknown user-turn handling {user_turns!r}", key="user_turns",
                             expected="one of " + ", ".join(USER_TURNS))
    from imprint_core.stoprules import choose
    # One choice, built as the loop builds its rule: the gate's patience and
    # novelty config fill the parameters the rule takes and `rule_params` leaves out.
    choice = choose(rule, rule_params, defaults={"patience": patience,
                                                "novelty": novelty or NoveltyConfig(normalization=normalization)},
                    key="rule_params")
    return choice.build, normalization


def _tables() -> dict[str, list[dict]]:
    return {"requests": [], "tool_calls": [], "rounds": [], "runs": []}


def _frames(acc: dict[str, list[dict]], files: list[str], warnings: list[str]) -> Frames:
    return Frames(
        requests=_frame(acc["requests"], REQUEST_COLUMNS),
        tool_calls=_frame(acc["tool_calls"], TOOL_COLUMNS),
        rounds=_frame(acc["rounds"], ROUND_COLUMNS),
        runs=_frame(acc["runs"], RUN_COLUMNS),
        files=files, warnings=warnings)


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c in columns:
        if c in NUMERIC_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    return df
