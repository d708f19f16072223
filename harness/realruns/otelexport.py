"""Our traces (`imprint-trace/1`) as OpenTelemetry spans in OTLP JSON, with
the GenAI semantic conventions, so that a run can be looked at in the
viewer a team already uses (Jaeger, Phoenix, Langfuse, any OTLP backend).

One trace per trace file, one export request per line (the OTLP JSON
file exporter's layout). Ids are hashes of the trace file, so exporting
the same file twice gives the same spans.

| our event | span or event | attributes |
| --- | --- | --- |
| the run (header to last event) | span `invoke_agent imprint` (root, INTERNAL) | `gen_ai.operation.name` = `invoke_agent`, `gen_ai.agent.name` = `imprint`, `gen_ai.provider.name`; `imprint.question`, `imprint.policy`, `imprint.normalization`, `imprint.settings.*`, the run's end (`imprint.run.*`) |
| `request_reserved` .. `request_settled`, `final_request` .. `final_settled` | span `chat` (CLIENT), ERROR when the request failed | `gen_ai.operation.name` = `chat`, `gen_ai.request.max_tokens`, `gen_ai.usage.input_tokens` / `output_tokens` / `cache_read.input_tokens` (what the provider measured, where it did); `imprint.tokens.{estimated_prompt,reserved,charged,refunded,measured_prompt,measured_cached,measured_output}`, `imprint.request.{id,role,context_id,attempt,outcome,policy,counter}`, `imprint.round` |
| `tool_call` .. `tool_result` | span `execute_tool <tool>` (INTERNAL), ERROR for an error | `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type` = `function`, `gen_ai.tool.call.arguments` (JSON), `gen_ai.tool.call.result`; `imprint.round`, `imprint.tool.{kind,status,chars,after_deadline,blocking,segments}`, `imprint.tool.novelty.*` |
| `round_end`, `stop`, and every other event | event `imprint.<type>` on the root span | its fields as `imprint.<field>` |

A tool call that never got a result (the run was cut) is a span with
`imprint.tool.status` = `no_result`. The importer (`--format otel`)
reads `imprint.round`, `imprint.tool.kind`, `imprint.tool.status` and
`imprint.tool.segments` back, so that export, import and replay give the
stop that replaying the trace gives.
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from imprint_core.events import (Event, FinalRequest, FinalSettled, RequestReserved, RequestSettled, RunEnd, RunStart,
                                 ToolCallStarted, ToolResultRecorded)
from imprint_core.errors import UserInputError
from imprint_core.trace import read_trace

from ..conventions import write_output

SCOPE = "imprint"
KIND_INTERNAL, KIND_CLIENT = 1, 3
"""OTLP's span kinds (`SPAN_KIND_INTERNAL`, `SPAN_KIND_CLIENT`)."""
STATUS_ERROR = 2
NO_RESULT = "no_result"
"""`imprint.tool.status` of a call whose result the trace lacks."""


def any_value(v: Any) -> dict:
    """A Python value as an OTLP JSON `AnyValue` (ints as decimal text, as int64 are)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, bool, int, float)) for x in v):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": json.dumps(v, ensure_ascii=False, sort_keys=True)}


def attributes(pairs: Iterable[tuple[str, Any]]) -> list[dict]:
    """OTLP attributes from (key, value) pairs; None values are left out."""
    return [{"key": k, "value": any_value(v)} for k, v in pairs if v is not None]


class _Clock:
    """Run-clock seconds as Unix nanoseconds: the header's wall time is t = 0."""

    def __init__(self, wall: str | None):
        try:
            base = datetime.fromisoformat(wall) if wall else None
        except ValueError:
            base = None
        base = base.replace(tzinfo=base.tzinfo or timezone.utc) if base else datetime(1970, 1, 1, tzinfo=timezone.utc)
        self.base = int(base.timestamp()) * 1_000_000_000 + base.microsecond * 1000

    def __call__(self, t: float | None) -> str:
        return str(self.base + int(round((t or 0.0) * 1e9)))


def _event_attrs(e: Event, skip: tuple[str, ...] = ()) -> list[dict]:
    d = e.to_dict()
    return attributes((f"imprint.{k}", v) for k, v in d.items() if k not in ("type", "t", "wall") + skip)


def trace_spans(trace_path: str | Path) -> dict:
    """One trace file as one OTLP JSON export request. An event whose fields
    do not have their types (a round that is not a number) fails naming the
    file and the event's line and type."""
    p = Path(trace_path)
    trace = read_trace(p)
    at: list[Event] = [trace.header]
    try:
        return _spans(p, trace, at)
    except (TypeError, ValueError, AttributeError) as exc:
        # the trace writer writes one event a line after the header, no blank lines
        n = next((i + 2 for i, e in enumerate(trace.events) if e is at[-1]), 1)
        raise UserInputError(f"a {at[-1].TYPE!r} event does not fit its type ({exc})", file=str(p), line=n,
                             key=at[-1].TYPE, expected="a trace written by imprint") from None


def _spans(p: Path, trace, at: list[Event]) -> dict:
    trace_id = hashlib.sha256(p.read_bytes()).hexdigest()[:32]
    counter = iter(range(1, 1 << 30))

    def span_id() -> str:
        return hashlib.sha256(f"{trace_id}:{next(counter)}".encode()).hexdigest()[:16]

    clock = _Clock(trace.header.wall)
    root_id = span_id()
    spans: list[dict] = []
    root_events: list[dict] = []
    start = next((e for e in trace.events if isinstance(e, RunStart)), None)
    provider = start.provider if start else None
    end = next((e for e in trace.events if isinstance(e, RunEnd)), None)
    open_requests: dict[int, Event] = {}
    open_final: FinalRequest | None = None
    open_tools: dict[tuple[int, str], ToolCallStarted] = {}

    def span(name: str, kind: int, t0: float | None, t1: float | None, attrs: list[dict],
             error: str | None = None) -> None:
        s = {"traceId": trace_id, "spanId": span_id(), "parentSpanId": root_id, "name": name, "kind": kind,
             "startTimeUnixNano": clock(t0), "endTimeUnixNano": clock(t1 if t1 is not None else t0),
             "attributes": attrs, "status": {"code": STATUS_ERROR, "message": error} if error is not None else {}}
        spans.append(s)

    def request_span(settled: RequestSettled | FinalSettled, opened: Event | None) -> None:
        r = settled.record
        rnd = getattr(settled, "round", 0) or None
        attrs = attributes([
            ("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", provider),
            ("gen_ai.request.max_tokens", r.max_output), ("gen_ai.usage.input_tokens", r.measured_prompt),
            ("gen_ai.usage.output_tokens", r.measured_output),
            ("gen_ai.usage.cache_read.input_tokens", r.measured_cached),
            ("imprint.tokens.estimated_prompt", r.estimated_prompt), ("imprint.tokens.reserved", r.reserved),
            ("imprint.tokens.charged", r.charged), ("imprint.tokens.refunded", r.refunded),
            ("imprint.tokens.measured_prompt", r.measured_prompt),
            ("imprint.tokens.measured_cached", r.measured_cached),
            ("imprint.tokens.measured_output", r.measured_output),
            ("imprint.request.id", r.id), ("imprint.request.role", r.role),
            ("imprint.request.context_id", r.context_id),
            ("imprint.request.attempt", getattr(opened, "attempt", None)), ("imprint.request.outcome", r.outcome),
            ("imprint.request.policy", r.policy), ("imprint.request.counter", r.counter), ("imprint.round", rnd),
            ("imprint.request.interrupted", settled.interrupted)])
        span("chat", KIND_CLIENT, opened.t if opened else settled.t, settled.t, attrs, settled.error)

    def tool_span(res: ToolResultRecorded | None, call: ToolCallStarted | None) -> None:
        first = res or call
        assert first is not None
        novelty = (res.novelty or {}) if res else {}
        attrs = attributes([
            ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", first.tool),
            ("gen_ai.tool.call.id", first.call_id), ("gen_ai.tool.type", "function"),
            ("gen_ai.tool.call.arguments", json.dumps(first.arguments or {}, ensure_ascii=False)),
            ("gen_ai.tool.call.result", (res.text or "") if res else None),
            ("imprint.round", int(first.round)), ("imprint.tool.kind", first.kind),
            ("imprint.tool.status", res.status if res else NO_RESULT),
            ("imprint.tool.chars", res.chars if res else None),
            ("imprint.tool.after_deadline", res.after_deadline if res else None),
            ("imprint.tool.blocking", call.blocking if call else None),
            ("imprint.tool.segments", res.segments if res else None),
            *((f"imprint.tool.novelty.{k}", v) for k, v in sorted(novelty.items()))])
        t0 = res.started if res and res.started is not None else (call.t if call else first.t)
        t1 = res.finished if res and res.finished is not None else first.t
        error = (res.text or "").splitlines()[0] if res and res.text else ""
        span(f"execute_tool {first.tool}", KIND_INTERNAL, t0, max(t0 or 0.0, t1 or 0.0), attrs,
             error if res and res.status == "error" else None)

    for e in trace.events:
        at.append(e)
        if isinstance(e, RequestReserved):
            open_requests[e.id] = e
        elif isinstance(e, RequestSettled):
            request_span(e, open_requests.pop(e.record.id, None))
        elif isinstance(e, FinalRequest):
            open_final = e
        elif isinstance(e, FinalSettled):
            request_span(e, open_final)
            open_final = None
        elif isinstance(e, ToolCallStarted):
            open_tools[(int(e.round), e.call_id)] = e
        elif isinstance(e, ToolResultRecorded):
            tool_span(e, open_tools.pop((int(e.round), e.call_id), None))
        elif not isinstance(e, (RunStart, RunEnd)):
            root_events.append({"timeUnixNano": clock(e.t), "name": f"imprint.{e.TYPE}",
                                "attributes": _event_attrs(e)})
    for call in open_tools.values():
        at.append(call)
        tool_span(None, call)
    last_t = max((e.t or 0.0 for e in trace.events), default=0.0)
    root_attrs = attributes([
        ("gen_ai.operation.name", "invoke_agent"), ("gen_ai.agent.name", "imprint"), ("gen_ai.provider.name", provider),
        ("imprint.question", start.question if start else None), ("imprint.policy", start.policy if start else None),
        ("imprint.normalization", start.normalization if start else None),
        ("imprint.counter", start.counter if start else None),
        *((f"imprint.settings.{k}", v) for k, v in sorted((start.settings if start else {}).items())),
        *((f"imprint.run.{k}", v) for k, v in ((end.to_dict() if end else {}).items()) if k not in ("type", "t", "wall"))])
    root = {"traceId": trace_id, "spanId": root_id, "parentSpanId": "", "name": "invoke_agent imprint",
            "kind": KIND_INTERNAL, "startTimeUnixNano": clock(0.0), "endTimeUnixNano": clock(last_t),
            "attributes": root_attrs, "events": root_events, "status": {}}
    meta = trace.header.meta
    resource = attributes([("service.name", "imprint"), ("imprint.trace_file", p.name),
                           *((f"imprint.{k}", meta[k]) for k in sorted(meta))])
    return {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": {"name": SCOPE}, "spans": [root, *spans]}]}]}


def export_otel(traces: Iterable[str | Path], out: str | Path) -> tuple[Path, int]:
    """Write the traces' spans to `out` (one export request a line), atomically,
    after every trace has been read: a bad trace leaves `out` as it was."""
    paths = [Path(t) for t in traces]
    if not paths:
        raise UserInputError("no traces given", key="TRACE", expected="one or more imprint-trace/1 files")
    for p in paths:
        if p.is_dir():
            raise UserInputError("is a directory, not a trace", file=str(p), expected="an imprint-trace/1 file")
    lines = [json.dumps(trace_spans(p), ensure_ascii=False, separators=(",", ":")) for p in paths]
    return write_output(out, "\n".join(lines) + "\n", key="-o", example="run.otlp.jsonl"), len(lines)
