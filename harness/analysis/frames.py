"""One loader: our traces, round logs and other agents' raw trajectories as
pandas DataFrames.

`load_frames(paths)` is the only place that turns trace or round-log files
into tables for the reports and the gate (which files are which, and raw
trajectories converted in memory, is `realruns.sources`); everything
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
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from imprint_core.counting import COUNTED_MODES
from imprint_core.errors import UserInputError
from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig
from imprint_core.events import (Answer, BudgetExhausted, FinalSettled, RequestSettled, RoundEnd, RunEnd, RunStart,
                                 Stopped, ToolCallStarted, ToolResultRecorded, call_verdicts)
from imprint_core.trace import E, Trace, read_trace

from ..realruns.rounds import (PATIENCE, USER_TURNS, RoundLog, RuleFactory, read_round_log, record_factory,
                               replay_rule)
from ..realruns.sources import find_inputs, read_raw

REQUEST_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "policy", "source", "id", "role", "context_id",
    "round", "attempt", "outcome", "estimated", "max_output", "reserved", "charged", "refunded", "charged_prompt",
    "charged_output", "prefix_reused", "output_tokens", "measured_prompt", "measured_cached", "measured_output",
    "ratio", "duration", "t", "error", "counting_mode", "counting_used", "counting_exact", "counter",
    *(f"est_{m}" for m in COUNTED_MODES), "reconciled"]
TOOL_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "source", "reply", "round", "index", "call_id", "tool",
    "kind", "status", "blocking", "verdict", "paragraphs", "new_paragraphs", "new_shingles", "repeated_error",
    "started", "finished", "duration", "deadline", "after_deadline", "overrun", "arguments", "text", "segments"]
ROUND_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "source", "reply", "round", "kind", "progress",
    "new_paragraphs", "new_shingles", "patience_counter", "patience", "calls", "errors", "writes", "reserved",
    "charged", "t", "deadline", "stop"]
RUN_COLUMNS = [
    "run", "name", "path", "source", "scenario", "scenario_file", "provider", "provider_kind", "policy",
    "normalization", "patience", "timeout", "token_budget", "question", "stop_reason", "stop_detail",
    "stop_round", "final_mode", "rounds", "requests", "reserved", "charged", "refunded", "final_requests",
    "final_estimated", "final_measured_prompt", "writes", "evidence", "paused", "deadline", "stop_t", "end_t",
    "overshoot", "budget_requested", "tool_overruns", "max_tool_overrun", "complete", "warnings", "labels",
    "reward", "t0", "stop_rule"]


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
    `paths` (`realruns.sources.find_inputs`). A named file of no kind is an
    error; one found in a directory is skipped with a warning."""
    found, warnings = find_inputs(paths)
    return [(f, kind) for f, kind, _ in found], warnings


# ---- helpers ------------------------------------------------------------------------------------
def _provider(header: dict, start: RunStart | None) -> tuple[str, str]:
    """(provider label, provider kind). Remote providers are labelled by
    their server where the trace names it: `remote:<server>`."""
    name = str((start.provider if start else None) or header.get("provider") or header.get("provider_kind")
               or "unknown")
    kind = str(header.get("provider_kind") or name.split(":", 1)[0])
    if ":" not in name:
        server = header.get("server")
        if kind == "remote" and server:
            name = f"remote:{server}"
        elif kind not in (name, "unknown") and name in ("remote", "local", "stub"):
            name = kind
    return name, kind


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


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


# ---- traces ---------------------------------------------------------------------------------------
def _load_trace(path: Path, rid: str, acc: dict[str, list[dict]], warnings: list[str]) -> None:
    trace = read_trace(path)
    warnings.extend(trace.warnings)
    header = trace.header.meta
    start = _first(trace, RunStart)
    provider, kind = _provider(header, start)
    scenario = header.get("scenario") or path.stem
    settings = start.settings if start else {}
    policy = start.policy if start else None
    base = {"run": rid, "name": scenario, "scenario": scenario, "provider": provider, "provider_kind": kind}
    # How the run counted its prompts (issue 14); a trace from before it
    # counted with its provider's own counter.
    counting = (start.counting if start else None) or {}
    counting_cols = {"counting_mode": counting.get("mode"), "counting_used": counting.get("used"),
                     "counting_exact": counting.get("exact")}

    # Deadline at any moment: the start deadline moved back by every ask's wait.
    deadline0 = _num(start.deadline) if start else None
    pauses: list[tuple[float, float]] = []
    blocking: dict[str, bool] = {}
    for e in trace.events:
        if isinstance(e, ToolCallStarted):
            blocking[str(e.call_id)] = bool(e.blocking)
        elif isinstance(e, ToolResultRecorded) and e.kind == "ask" and e.status != "not_executed":
            s, f = _num(e.started), _num(e.finished)
            if s is not None and f is not None:
                pauses.append((f, f - s))

    def deadline_at(t: float | None) -> float | None:
        if deadline0 is None:
            return None
        return deadline0 + sum(w for f, w in pauses if t is None or f <= t + 1e-9)

    verdicts = call_verdicts(trace.events)
    round_errors: dict[int, int] = {}
    round_calls: dict[int, int] = {}
    round_writes: dict[int, int] = {}
    overruns: list[float] = []
    for e in trace.events:
        if isinstance(e, (RequestSettled, FinalSettled)):
            r = e.record
            est, meas = _num(r.estimated_prompt), _num(r.measured_prompt)
            acc["requests"].append(base | {
                "policy": r.policy, "source": "trace", "id": r.id,
                "role": r.role or ("final" if isinstance(e, FinalSettled) else "coordinator"),
                "context_id": r.context_id, "round": getattr(e, "round", None), "attempt": None,
                "outcome": r.outcome, "estimated": est, "max_output": _num(r.max_output),
                "reserved": _num(r.reserved), "charged": _num(r.charged),
                "refunded": _num(r.refunded), "charged_prompt": _num(r.charged_prompt),
                "charged_output": _num(r.charged_output), "prefix_reused": _num(r.prefix_reused),
                "output_tokens": _num(r.output_tokens), "measured_prompt": meas,
                "measured_cached": _num(r.measured_cached), "measured_output": _num(r.measured_output),
                "ratio": est / meas if est is not None and meas else None,
                "duration": _num(getattr(e, "duration", None)), "t": _num(e.t), "error": e.error,
                **counting_cols, "counter": r.counter, "reconciled": bool(r.reconciled),
                **{f"est_{m}": _num((r.estimates or {}).get(m)) for m in COUNTED_MODES}})
        elif isinstance(e, ToolResultRecorded):
            rnd = int(e.round or 0)
            nov = verdicts.get(str(e.call_id)) or {}
            status = e.status
            started, finished = _num(e.started), _num(e.finished)
            dl = deadline_at(finished)
            after = bool(e.after_deadline)
            overrun = max(0.0, finished - dl) if after and finished is not None and dl is not None else (0.0 if after else None)
            if after and overrun is not None:
                overruns.append(overrun)
            if status == "not_executed":
                verdict = "not_executed"
            elif e.kind != "read":
                verdict = "not_evidence"   # a write's echo or a user's answer is never fingerprinted
            elif status == "error":
                verdict = "repeated_error" if nov.get("repeated_error") else "error"
            elif status == "empty" or not nov.get("paragraphs"):
                verdict = "empty"
            else:
                verdict = "new" if nov.get("new_paragraphs") else "repeat"
            acc["tool_calls"].append(base | {
                "source": "trace", "reply": 1, "round": rnd, "index": None, "call_id": e.call_id,
                "tool": e.tool, "kind": e.kind, "status": status,
                "blocking": blocking.get(str(e.call_id)), "verdict": verdict,
                "paragraphs": nov.get("paragraphs"), "new_paragraphs": nov.get("new_paragraphs"),
                "new_shingles": nov.get("new_shingles"), "repeated_error": nov.get("repeated_error"),
                "started": started, "finished": finished,
                "duration": finished - started if started is not None and finished is not None else None,
                "deadline": dl, "after_deadline": after, "overrun": overrun, "arguments": e.arguments or {},
                "text": e.text or "", "segments": e.segments})
            if status != "not_executed":
                round_calls[rnd] = round_calls.get(rnd, 0) + 1
                if status == "error":
                    round_errors[rnd] = round_errors.get(rnd, 0) + 1
                if e.kind == "write":
                    round_writes[rnd] = round_writes.get(rnd, 0) + 1

    stop = _first(trace, Stopped)
    stop_round = stop.round if stop else None
    for e in trace.of_type(RoundEnd):
        rnd = int(e.round or 0)
        acc["rounds"].append(base | {
            "source": "trace", "reply": 1, "round": rnd, "kind": e.kind,
            "progress": bool(e.progress) if e.progress is not None else None,
            "new_paragraphs": e.new_paragraphs, "new_shingles": e.new_shingles,
            "patience_counter": e.patience_counter, "patience": e.patience,
            "calls": round_calls.get(rnd, 0), "errors": round_errors.get(rnd, 0) + (1 if e.kind == "error" else 0),
            "writes": round_writes.get(rnd, 0), "reserved": _num(e.reserved), "charged": _num(e.charged),
            "t": _num(e.t), "deadline": _num(e.deadline),
            "stop": stop.reason if stop and rnd == stop_round else None})

    end = _first(trace, RunEnd)
    answer = _first(trace, Answer)
    exhausted = _first(trace, BudgetExhausted)
    research = [r for r in acc["requests"] if r["run"] == rid and r["role"] != "final"]
    finals = [r for r in acc["requests"] if r["run"] == rid and r["role"] == "final"]

    def total(key: str) -> float | None:
        if end is not None:
            return _num(getattr(end, key))
        return sum(r[key] or 0 for r in research)

    acc["runs"].append(base | {
        "path": str(path), "source": "trace", "scenario_file": header.get("file"), "policy": policy,
        "normalization": start.normalization if start else None,
        "patience": settings.get("chat.research_no_progress_rounds"),
        "timeout": settings.get("chat.research_timeout_sec"), "token_budget": settings.get("chat.research_token_budget"),
        "question": start.question if start else None,
        "stop_reason": (end.stop_reason if end else None) or (stop.reason if stop else None),
        "stop_detail": stop.detail if stop else None,
        "stop_round": stop_round,
        "final_mode": (end.final_mode if end else None) or (answer.mode if answer else None),
        "rounds": end.rounds if end else stop_round, "requests": end.requests if end else len(research),
        "reserved": total("reserved"), "charged": total("charged"), "refunded": total("refunded"),
        "final_requests": len(finals), "final_estimated": finals[0]["estimated"] if finals else None,
        "final_measured_prompt": finals[0]["measured_prompt"] if finals else None,
        "writes": end.writes if end else None, "evidence": end.evidence if end else None,
        "paused": end.paused if end else None,
        "deadline": deadline_at(None), "stop_t": _num(stop.t) if stop else None,
        "end_t": _num(end.t) if end else None, "overshoot": _num(stop.overshoot) if stop else None,
        "budget_requested": _num(exhausted.requested) if exhausted else None,
        "t0": _num(start.t) if start else None, "tool_overruns": len(overruns),
        "max_tool_overrun": max(overruns) if overruns else None, "complete": end is not None,
        "warnings": len(trace.warnings), "labels": {}, "reward": None,
        "stop_rule": (start.stop_rule if start else None) or settings.get("chat.research_stop_rule") or "record"})


def _first(trace: Trace, cls: type[E]) -> E | None:
    found = trace.of_type(cls)
    return found[0] if found else None


# ---- round logs -----------------------------------------------------------------------------------
def _load_roundlog(log: RoundLog, rid: str, acc: dict[str, list[dict]], *, factory: RuleFactory, rule: str,
                   normalization: str, user_turns: str) -> None:
    path = Path(log.path)
    name = path.stem
    source = log.source
    base = {"run": rid, "name": name, "scenario": None, "provider": None, "provider_kind": None}
    # The same replay the tuner, compare and `imprint replay` use: one rule,
    # reset at each reply, seeing each round as the loop would.
    replayed = replay_rule(log, factory, user_turns)
    stop_round = replayed.stop_round
    patience = None
    for reply_no, view, notes in replayed.rounds:
        number = view.index
        verdicts = notes.get("verdicts") or {}
        for i, c in enumerate(view.calls):
            v = verdicts.get(i)
            if v is None:
                verdict = "not_evidence" if c.kind != "read" else None
            elif c.status == "error":
                verdict = "repeated_error" if v.repeated_error else "error"
            elif c.status == "empty" or not v.paragraphs:
                verdict = "empty"
            else:
                verdict = "new" if v.new_paragraphs else "repeat"
            acc["tool_calls"].append(base | {
                "source": "roundlog", "reply": reply_no, "round": number, "index": i, "call_id": f"{number}.{i}",
                "tool": c.tool, "kind": c.kind, "status": c.status, "blocking": None, "verdict": verdict,
                "paragraphs": v.paragraphs if v else None, "new_paragraphs": v.new_paragraphs if v else None,
                "new_shingles": v.new_shingles if v else None,
                "repeated_error": v.repeated_error if v and c.status == "error" else None, "started": None,
                "finished": None, "duration": None, "deadline": None, "after_deadline": False, "overrun": None,
                "arguments": c.args, "text": c.result, "segments": list(c.segments) if c.segments is not None else None})
        patience = notes.get("patience", patience)
        acc["rounds"].append(base | {
            "source": "roundlog", "reply": reply_no, "round": number, "kind": view.kind,
            "progress": notes.get("progress"), "new_paragraphs": notes.get("new_paragraphs"),
            "new_shingles": notes.get("new_shingles"), "patience_counter": notes.get("patience_counter"),
            "patience": notes.get("patience"), "calls": len(view.calls),
            "errors": sum(c.status == "error" for c in view.calls), "writes": sum(c.kind == "write" for c in view.calls),
            "reserved": None, "charged": None, "t": None, "deadline": None,
            "stop": "no_progress" if number == stop_round else None})
    reward = _num(log.labels.get("reward"))
    acc["runs"].append(base | {
        "path": str(path), "source": "roundlog", "scenario_file": None, "policy": None,
        "normalization": normalization if rule == "record" else None, "patience": patience, "timeout": None,
        "token_budget": None, "question": None, "stop_reason": "no_progress" if stop_round else None,
        "stop_detail": f"replayed: {replayed.reason}" if stop_round else None,
        "stop_round": stop_round, "final_mode": None, "rounds": len(log.rounds), "requests": None,
        "reserved": None, "charged": None, "refunded": None, "final_requests": 0, "final_estimated": None,
        "final_measured_prompt": None, "writes": sum(c.kind == "write" for r in log.rounds for c in r.calls),
        "evidence": None, "paused": None, "deadline": None, "stop_t": None, "end_t": None, "overshoot": None,
        "budget_requested": None, "t0": None, "tool_overruns": 0, "max_tool_overrun": None, "complete": True, "warnings": 0,
        "labels": dict(log.labels) | {"source": source}, "reward": reward, "stop_rule": rule})


# ---- the loader ---------------------------------------------------------------------------------------
def load_frames(paths: Sequence[str | Path] | str | Path, *, patience: int = PATIENCE.default,
                normalization: str = "default", user_turns: str = "reset",
                novelty: NoveltyConfig | None = None, rule: str = "record",
                rule_params: dict[str, Any] | None = None) -> Frames:
    """Load traces, round logs and raw trajectories of other agents (files,
    or directories searched recursively; raw ones converted in memory, see
    `realruns.sources`) into DataFrames.

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
            prefix = None
            try:
                with open(path, encoding="utf-8") as fh:
                    prefix = json.loads(fh.readline()).get("run_id")
            except (ValueError, OSError, UnicodeDecodeError):
                prefix = None
            _load_trace(path, ids.make(path, prefix), acc, warnings)
        else:
            logs, skipped = ([read_round_log(path)], None) if kind == "roundlog" else \
                read_raw(path, named=path in named)
            if skipped:
                warnings.append(skipped)
            for log in logs:
                _load_roundlog(log, ids.make(Path(log.path), None), acc, factory=factory, rule=rule,
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
        _load_roundlog(log, ids.make(Path(log.path), None), acc, factory=factory, rule=rule, normalization=norm,
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
    if rule == "record" and not rule_params:
        return record_factory(patience, novelty or NoveltyConfig(normalization=normalization)), normalization
    from imprint_core.stoprules import build, resolve
    info = resolve(rule)
    params = dict(rule_params or {})
    build(info, params)   # a mistake in the rule or its parameters is reported once, before any file is read
    return (lambda: build(info, params)), normalization


def _tables() -> dict[str, list[dict]]:
    return {"requests": [], "tool_calls": [], "rounds": [], "runs": []}


def _frames(acc: dict[str, list[dict]], files: list[str], warnings: list[str]) -> Frames:
    return Frames(
        requests=_frame(acc["requests"], REQUEST_COLUMNS),
        tool_calls=_frame(acc["tool_calls"], TOOL_COLUMNS),
        rounds=_frame(acc["rounds"], ROUND_COLUMNS),
        runs=_frame(acc["runs"], RUN_COLUMNS),
        files=files, warnings=warnings)


_NUMERIC = {"estimated", "max_output", "reserved", "charged", "refunded", "charged_prompt", "charged_output",
            "prefix_reused", "output_tokens", "measured_prompt", "measured_cached", "measured_output", "ratio",
            "duration", "t", "started", "finished", "deadline", "overrun", "overshoot", "max_tool_overrun",
            "stop_t", "end_t", "final_estimated", "final_measured_prompt", "budget_requested", "t0"}


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for c in columns:
        if c in _NUMERIC:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    return df
