"""Our traces into rows of the four tables (`frames.Frames`): requests
with their estimates and measurements, tool results with their novelty
verdicts and timing against the deadline (moved back by every wait for the
user), rounds, and one row for the run with its totals and its stop.
"""
from __future__ import annotations

from pathlib import Path

from imprint_core.counting import COUNTED_MODES
from imprint_core.events import (Answer, BudgetExhausted, FinalSettled, RequestSettled, RoundEnd, RunEnd, RunStart,
                                 Stopped, ToolCallStarted, ToolResultRecorded, call_verdicts)
from imprint_core.trace import E, Trace, read_trace

from .columns import num


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



def trace_rows(path: Path, rid: str, acc: dict[str, list[dict]], warnings: list[str]) -> None:
    """Append the rows of the trace at `path` (run id `rid`) to the tables in `acc`, its warnings to `warnings`."""
    trace = read_trace(path)
    warnings.extend(trace.warnings)
    header = trace.header.meta
    start = _first(trace, RunStart)
    provider, kind = _provider(header, start)
    scenario = header.get("scenario") or path.stem
    settings = start.settings if start else {}
    policy = start.policy if start else None
    base = {"run": rid, "name": scenario, "scenario": scenario, "provider": provider, "provider_kind": kind}
    # How the run counted its prompts (`chat.token_counting`); a trace from
    # before the counting modes counted with its provider's own counter.
    counting = (start.counting if start else None) or {}
    counting_cols = {"counting_mode": counting.get("mode"), "counting_used": counting.get("used"),
                     "counting_exact": counting.get("exact")}

    # Deadline at any moment: the start deadline moved back by every ask's wait.
    deadline0 = num(start.deadline) if start else None
    pauses: list[tuple[float, float]] = []
    blocking: dict[str, bool] = {}
    for e in trace.events:
        if isinstance(e, ToolCallStarted):
            blocking[str(e.call_id)] = bool(e.blocking)
        elif isinstance(e, ToolResultRecorded) and e.kind == "ask" and e.status != "not_executed":
            s, f = num(e.started), num(e.finished)
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
            est, meas = num(r.estimated_prompt), num(r.measured_prompt)
            acc["requests"].append(base | {
                "policy": r.policy, "source": "trace", "id": r.id,
                "role": r.role or ("final" if isinstance(e, FinalSettled) else "coordinator"),
                "context_id": r.context_id, "round": getattr(e, "round", None), "attempt": None,
                "outcome": r.outcome, "estimated": est, "max_output": num(r.max_output),
                "reserved": num(r.reserved), "charged": num(r.charged),
                "refunded": num(r.refunded), "charged_prompt": num(r.charged_prompt),
                "charged_output": num(r.charged_output), "prefix_reused": num(r.prefix_reused),
                "output_tokens": num(r.output_tokens), "measured_prompt": meas,
                "measured_cached": num(r.measured_cached), "measured_output": num(r.measured_output),
                "ratio": est / meas if est is not None and meas else None,
                "duration": num(getattr(e, "duration", None)), "t": num(e.t), "error": e.error,
                **counting_cols, "counter": r.counter, "reconciled": bool(r.reconciled),
                **{f"est_{m}": num((r.estimates or {}).get(m)) for m in COUNTED_MODES}})
        elif isinstance(e, ToolResultRecorded):
            rnd = int(e.round or 0)
            nov = verdicts.get(str(e.call_id)) or {}
            status = e.status
            started, finished = num(e.started), num(e.finished)
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
            "writes": round_writes.get(rnd, 0), "reserved": num(e.reserved), "charged": num(e.charged),
            "t": num(e.t), "deadline": num(e.deadline),
            "stop": stop.reason if stop and rnd == stop_round else None})

    end = _first(trace, RunEnd)
    answer = _first(trace, Answer)
    exhausted = _first(trace, BudgetExhausted)
    research = [r for r in acc["requests"] if r["run"] == rid and r["role"] != "final"]
    finals = [r for r in acc["requests"] if r["run"] == rid and r["role"] == "final"]

    def total(key: str) -> float | None:
        if end is not None:
            return num(getattr(end, key))
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
        "deadline": deadline_at(None), "stop_t": num(stop.t) if stop else None,
        "end_t": num(end.t) if end else None, "overshoot": num(stop.overshoot) if stop else None,
        "budget_requested": num(exhausted.requested) if exhausted else None,
        "t0": num(start.t) if start else None, "tool_overruns": len(overruns),
        "max_tool_overrun": max(overruns) if overruns else None, "complete": end is not None,
        "warnings": len(trace.warnings), "labels": {}, "reward": None,
        "stop_rule": (start.stop_rule if start else None) or settings.get("chat.research_stop_rule") or "record"})



def _first(trace: Trace, cls: type[E]) -> E | None:
    found = trace.of_type(cls)
    return found[0] if found else None
