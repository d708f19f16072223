"""Round logs (`imprint-rounds/1`): read, replay through the stop rule, export.

Real runs of other agents carry no model and no budgets; replaying them
through the same novelty tracker and patience rule lets the rule be checked
and tuned on runs nobody here wrote.
"""
from __future__ import annotations

import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jsonlines

from imprint_core.errors import UserInputError
from imprint_core.files import json_lines
from imprint_core.novelty import NoveltyConfig, PatienceRule
from imprint_core.stoprules import CallView, RoundView, Rule, RuleChoice, choose
from imprint_core.stoprules.protocol import frozen
from imprint_core.stoprules.guard import RuleFailed
from imprint_core.stoprules.builtin import RecordRule
from imprint_core.events import RoundEnd, ToolResultRecorded
from imprint_core.settings import SPECS
from imprint_core.trace import read_trace
from imprint_core.types import ToolKind

from ..conventions import write_output

ROUNDS_FORMAT = "imprint-rounds/1"
KINDS: tuple[str, ...] = typing.get_args(ToolKind)
STATUSES = ("ok", "error", "empty")
# The no-progress rule's patience: bounds and default are the setting's own.
PATIENCE = SPECS["chat.research_no_progress_rounds"]
# A user turn in a round log starts a new reply (reset, as in the loop) or is ignored.
USER_TURNS = ("reset", "ignore")


@dataclass
class RoundCall:
    """One call as the agent made it: `tool` and `args` are the action it took
    (what repetition rules compare), `result` what came back. `request`, where
    the source has one, is what the agent was asked to do (Magentic-One's
    Orchestrator instruction to WebSurfer, reworded every turn): kept for
    reading, never part of the action."""
    tool: str
    args: dict[str, Any]
    kind: str
    status: str
    result: str
    segments: list[str] | None = None
    request: str | None = None


@dataclass
class Round:
    number: int
    calls: list[RoundCall]


@dataclass
class RoundLog:
    path: str
    source: str
    labels: dict[str, Any]
    rounds: list[Round] = field(default_factory=list)

    @property
    def name(self) -> str:
        return Path(self.path).name


def _need(obj: dict, key: str, types: type | tuple, file: str, line: int, where: str, expected: str) -> Any:
    if key not in obj:
        raise UserInputError("required key is missing", file=file, line=line, key=f"{where}{key}", expected=expected)
    value = obj[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise UserInputError(f"wrong type {type(value).__name__}", file=file, line=line, key=f"{where}{key}",
                             expected=expected)
    return value


def read_round_log(path: str | Path) -> RoundLog:
    """A round log file; one named `*.jsonl.gz` is gunzipped and gets the
    path it would have uncompressed (`run.jsonl`), which labels are keyed by."""
    p = str(path)
    try:
        data = Path(p).read_bytes()
        if p.lower().endswith(".gz"):
            import gzip
            import zlib
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as exc:
                raise UserInputError(f"not readable gzip data ({exc})", file=p) from None
            p = p[:-3]
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from None
    except OSError as exc:
        raise UserInputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return parse_round_log(raw, p)


def parse_round_log(raw: str, p: str) -> RoundLog:
    """A round log from its text; `p` names it in errors and becomes its path."""
    objs: list[tuple[int, dict]] = []
    try:
        for no, obj in json_lines(raw):
            if not isinstance(obj, dict):
                raise UserInputError("each line must be a JSON object", file=p, line=no)
            objs.append((no, obj))
    except jsonlines.InvalidLineError as exc:
        cause = exc.__cause__
        why = (f"not valid JSON: {cause.msg} at column {cause.colno}" if isinstance(cause, json.JSONDecodeError)
               else f"not readable JSON: {cause}")     # an UnreadableJSON: too deep, too many digits
        raise UserInputError(why, file=p, line=exc.lineno) from None
    if not objs:
        raise UserInputError("empty file: no header", file=p, line=1, key="format", expected=ROUNDS_FORMAT)
    no, header = objs[0]
    if header.get("format") != ROUNDS_FORMAT:
        raise UserInputError(f"unsupported format {header.get('format')!r}", file=p, line=no, key="format",
                             expected=ROUNDS_FORMAT)
    unknown = set(header) - {"format", "source", "labels"}
    if unknown:
        raise UserInputError("unknown header key", file=p, line=no, key=sorted(unknown)[0],
                             expected="format, source, labels")
    labels = header.get("labels", {})
    if not isinstance(labels, dict):
        raise UserInputError("labels must be an object", file=p, line=no, key="labels", expected="a JSON object")
    log = RoundLog(p, str(header.get("source", "")), labels)
    for no, obj in objs[1:]:
        unknown = set(obj) - {"round", "calls"}
        if unknown:
            raise UserInputError("unknown key", file=p, line=no, key=sorted(unknown)[0], expected="round, calls")
        number = _need(obj, "round", int, p, no, "", "an integer round number")
        expected_no = len(log.rounds) + 1
        if number != expected_no:
            raise UserInputError(f"round {number} out of order", file=p, line=no, key="round",
                                 expected=f"round {expected_no}")
        calls_raw = _need(obj, "calls", list, p, no, "", "a list of calls")
        calls = []
        for i, c in enumerate(calls_raw):
            where = f"calls[{i}]."
            if not isinstance(c, dict):
                raise UserInputError("a call must be an object", file=p, line=no, key=f"calls[{i}]")
            extra = set(c) - {"tool", "args", "kind", "status", "result", "segments", "request"}
            if extra:
                raise UserInputError("unknown key", file=p, line=no, key=where + sorted(extra)[0],
                                     expected="tool, args, kind, status, result, segments, request")
            tool = _need(c, "tool", str, p, no, where, "a tool name")
            args = c.get("args", {})
            if not isinstance(args, dict):
                raise UserInputError("args must be an object", file=p, line=no, key=where + "args", expected="a JSON object")
            kind = _need(c, "kind", str, p, no, where, "one of " + ", ".join(KINDS))
            if kind not in KINDS:
                raise UserInputError(f"unknown kind {kind!r}", file=p, line=no, key=where + "kind",
                                     expected="one of " + ", ".join(KINDS))
            status = _need(c, "status", str, p, no, where, "one of " + ", ".join(STATUSES))
            if status not in STATUSES:
                raise UserInputError(f"unknown status {status!r}", file=p, line=no, key=where + "status",
                                     expected="one of " + ", ".join(STATUSES))
            result = c.get("result", "")
            if not isinstance(result, str):
                raise UserInputError("result must be a string", file=p, line=no, key=where + "result",
                                     expected="the tool's result text")
            segs = c.get("segments")
            if segs is not None and not (isinstance(segs, list) and all(isinstance(s, str) for s in segs)):
                raise UserInputError("segments must be a list of strings", file=p, line=no, key=where + "segments")
            request = c.get("request")
            if request is not None and not isinstance(request, str):
                raise UserInputError("request must be a string", file=p, line=no, key=where + "request",
                                     expected="what the agent was asked to do, as text")
            calls.append(RoundCall(tool, args, kind, status, result, segs, request))
        log.rounds.append(Round(number, calls))
    return log


@dataclass
class ReplayResult:
    file: str
    rounds: int
    stop_round: int | None
    stop_reason: str | None
    progress_rounds: list[int]
    patience_by_round: list[int] = field(default_factory=list)
    detail: str | None = None       # the rule's reason for its stop
    tracks_progress: bool = False   # whether the rule notes progress (the record's does; a repetition rule not)

    def to_dict(self) -> dict[str, Any]:
        out = {"file": self.file, "rounds": self.rounds, "stop_round": self.stop_round,
               "stop_reason": self.stop_reason, "progress_rounds": self.progress_rounds}
        if self.detail:
            out["stop_detail"] = self.detail
        return out


def call_view(c: RoundCall) -> CallView:
    # Frozen once and kept: every rule replayed over the log sees the same
    # read-only arguments without a copy per rule and round.
    c.args = frozen(c.args)
    return CallView(c.tool, c.args, c.kind, c.status, c.result, tuple(c.segments) if c.segments is not None else None)


def round_view(rnd: Round) -> RoundView:
    """A round of a log as the loop would show it to its stop rule."""
    return RoundView.of(rnd.number, (call_view(c) for c in rnd.calls))


RuleFactory = Callable[[], Rule]


def record_choice(patience: int | None = None, config: NoveltyConfig | None = None,
                  normalization: str | None = None) -> RuleChoice:
    """The record's rule as a choice: `--patience`, `--normalization` and a
    novelty config are shorthand for its parameters."""
    params: dict[str, Any] = {}
    if patience is not None:
        params["patience"] = patience
    if config is not None:
        params["novelty"] = config
    if normalization is not None:
        params["normalization"] = normalization
    return choose("record", params)


@dataclass
class RuleReplay:
    """A run replayed through a stop rule: the first stop (None: none), its
    reason, and per round the reply it belongs to, its kind and the rule's notes."""
    stop_round: int | None
    reason: str | None
    rounds: list[tuple[int, RoundView, dict[str, Any]]] = field(default_factory=list)


def replay_rule(log: RoundLog, factory: RuleFactory, user_turns: str = "reset", *, to_end: bool = True) -> RuleReplay:
    """Every round of `log` through one rule, reset at the start of each
    reply. The rule keeps observing after its first stop when `to_end`
    (figures for every round); only the first stop counts."""
    rule = factory()
    out = RuleReplay(None, None)
    try:
        for reply_no, reply in enumerate(replies(log, user_turns), start=1):
            if reply_no > 1:
                rule.reset()
            for rnd in reply.rounds:
                view = round_view(rnd)
                why = rule.observe(view)
                out.rounds.append((reply_no, view, dict(rule.notes())))
                if why and out.stop_round is None:
                    out.stop_round, out.reason = rnd.number, why
                    if not to_end:
                        return out
    except RuleFailed as exc:     # a user's rule raised (stoprules/guard.py): say in which run
        raise exc.in_run(log.path) from None
    return out


def round_progress(log: RoundLog, config: NoveltyConfig) -> list[tuple[str, bool]]:
    """Per round of one reply: its kind (read, write, ask) and whether it
    made progress, by the record's rule. Computed once per novelty config;
    patience values reuse it: the tuner's private fast path, which
    `apply_patience` or `sweep.stop_rounds` turns into the stops `replay`
    gives (a test holds the two together)."""
    rule = RecordRule(PATIENCE.max, config)
    out = []
    for rnd in log.rounds:
        view = round_view(rnd)
        rule.observe(view)
        out.append((view.kind, bool(rule.notes()["progress"])))
    return out


def apply_patience(progress: list[tuple[str, bool]], patience: int) -> tuple[int | None, list[int]]:
    """The round at which the rule stops (None: never), and the counter per round."""
    rule = PatienceRule(patience)
    counters = []
    for i, (kind, made) in enumerate(progress, start=1):
        stop = rule.update(write=kind == "write", progress=made)
        counters.append(rule.counter)
        if stop:
            return i, counters
    return None, counters


def replay(log: RoundLog, rule: RuleChoice | None = None, user_turns: str = "reset", *,
           patience: int | None = None, normalization: str | None = None,
           config: NoveltyConfig | None = None) -> ReplayResult:
    """`log` through the rule `rule` chooses (default: the record's; `patience`,
    `normalization` and `config` are shorthand for its parameters): the one
    replay road, the rule reset at each reply as the loop, the gate and the
    tuner reset it (`replay_with`)."""
    if rule is not None and (patience, normalization, config) != (None, None, None):
        raise TypeError("replay: give a rule choice or the record's shorthand, not both")
    return replay_with(log, rule or record_choice(patience, config, normalization), user_turns)


def replay_with(log: RoundLog, rule: RuleChoice | RuleFactory, user_turns: str = "reset") -> ReplayResult:
    """`log` through a rule (a choice, or a factory of fresh rules), reset at
    each reply; progress rounds where the rule notes them."""
    r = replay_rule(log, rule.build if isinstance(rule, RuleChoice) else rule, user_turns)
    return ReplayResult(log.path, len(log.rounds), r.stop_round, "no_progress" if r.stop_round else None,
                        [v.index for _, v, n in r.rounds if n.get("progress")],
                        [n.get("patience_counter") for _, _, n in r.rounds if n.get("patience_counter") is not None],
                        r.reason, any("progress" in n for _, _, n in r.rounds))


def reply_starts(log: RoundLog, user_turns: str = "reset") -> list[int]:
    """First round of each reply. With `reset`, every round that a user turn
    preceded starts a new reply (fresh patience and novelty store)."""
    n = len(log.rounds)
    if n == 0:
        return []
    starts = {1}
    if user_turns == "reset":
        turns = log.labels.get("user_turn_before_round") or []
        starts |= {int(r) for r in turns if isinstance(r, int) and not isinstance(r, bool) and 1 <= r <= n}
    return sorted(starts)


def replies(log: RoundLog, user_turns: str = "reset") -> list[RoundLog]:
    """The log cut into replies, each a RoundLog of its own rounds."""
    starts = reply_starts(log, user_turns)
    out = []
    for i, s in enumerate(starts):
        e = starts[i + 1] - 1 if i + 1 < len(starts) else len(log.rounds)
        out.append(RoundLog(log.path, log.source, log.labels, log.rounds[s - 1:e]))
    return out


def trace_to_round_log(trace_path: str | Path) -> str:
    """One of our traces as a round log: each round's executed calls with
    their kind, status and full result text."""
    trace = read_trace(trace_path)
    rounds: dict[int, list[dict]] = {}
    for e in trace.events:
        if isinstance(e, ToolResultRecorded) and e.status != "not_executed":
            status = e.status if e.status in STATUSES else "error"
            call = {"tool": e.tool, "args": e.arguments or {}, "kind": e.kind, "status": status,
                    "result": e.text or ""}
            if e.segments is not None:
                call["segments"] = e.segments
            rounds.setdefault(int(e.round), []).append(call)
        elif isinstance(e, RoundEnd):
            rounds.setdefault(int(e.round), [])
    header = {"format": ROUNDS_FORMAT, "source": f"imprint trace {Path(trace_path).name}",
              "labels": {"scenario": trace.header.meta.get("scenario")}}
    lines = [json.dumps(header, ensure_ascii=False)]
    for n, number in enumerate(sorted(rounds), start=1):
        lines.append(json.dumps({"round": n, "calls": rounds[number]}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def export_round_log(trace_path: str | Path, out: str | Path) -> Path:
    text = trace_to_round_log(trace_path)
    return write_output(out, text, key="-o", example="run.jsonl")
