"""The fault matrix: every provider kind against every fault, on the virtual
clock. Each cell must end with a defined stop reason, one result per tool
call, every executed write recorded exactly once, a balanced ledger and a
trace that parses. `imprint faults` writes reports/faults.md."""
from __future__ import annotations

import io
import json
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from imprint_core import (CancelToken, Chunk, FunctionTool, LoopConfig, ProviderError, ResearchLoop,
                          ResearchSettings, ScriptedProvider, StopReason, ToolCall, ToolCallEvent, ToolOutput,
                          ToolSpec, Turn, UsageEvent, VirtualClock, read_trace)
from imprint_core.files import json_lines
from imprint_core.files import atomic_write_text
from imprint_core.events import RequestSettled
from imprint_core.trace import EventLog, TraceWriter


PROVIDER_FAULTS = ["http_429", "http_500", "http_503", "connection_reset", "stream_cut", "invalid_tool_json",
                   "unknown_tool", "missing_usage", "empty_choices", "empty_reply"]
TOOL_FAULTS = ["tool_raises", "tool_hangs_past_deadline", "tool_result_10mb", "tool_output_not_utf8"]
FAULTS = PROVIDER_FAULTS + TOOL_FAULTS
SEARCH = ToolSpec("search", "Search the corpus.", {"type": "object", "properties": {"q": {"type": "string"}}},
                  kind="read")
SAVE = ToolSpec("save", "Save a note.", {"type": "object", "properties": {"note": {"type": "string"}}}, kind="write")


@dataclass
class Cell:
    provider: str
    fault: str
    stop_reason: str = "-"
    final_mode: str = "-"
    rounds: int = 0
    requests: int = 0
    failed_requests: int = 0
    tool_errors: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ---- tools --------------------------------------------------------------------------------
_WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "granite", "harbor", "island", "juniper", "kelp",
          "lagoon", "meadow", "nectar", "orchard", "prairie", "quarry", "ridge", "summit", "tundra")


def _evidence_for(q: str) -> str:
    """New evidence for each query that does not quote it: words picked by the
    query's hash (a result that only echoes its query is no evidence)."""
    k = zlib.crc32(q.encode())
    picked = [_WORDS[(k >> (4 * i)) % len(_WORDS)] for i in range(8)]
    return f"Survey notes: the {picked[0]} {picked[1]} site lies past the {picked[2]} {picked[3]}, where " \
           f"{picked[4]} and {picked[5]} samples meet the {picked[6]} {picked[7]} layer."


def _tools(fault: str) -> list[FunctionTool]:
    def search(args: dict, ctx) -> ToolOutput | str | bytes:
        q = str(args.get("q", ""))
        if q == "fault":
            if fault == "tool_raises":
                raise RuntimeError("backend exploded")
            if fault == "tool_hangs_past_deadline":
                ctx.work(10_000.0)  # blocking: allowed to return, far past the deadline
                return "late result"
            if fault == "tool_result_10mb":
                return ("A long page of evidence about the subject. " * 240_000)[:10_000_000]
            if fault == "tool_output_not_utf8":
                return b"caf\xe9 \xff\xfe broken bytes \x80"
        return _evidence_for(str(q))

    def save(args: dict, ctx) -> str:
        return f"saved {args.get('note')}"
    return [FunctionTool(SEARCH, search), FunctionTool(SAVE, save)]


def _round1() -> list[ToolCall]:
    return [ToolCall("r1a", "search", {"q": "alpha"}), ToolCall("r1b", "save", {"note": "first"})]


def _fault_calls(fault: str) -> list[ToolCall]:
    if fault == "invalid_tool_json":
        return [ToolCall("r2a", "search", {}, invalid_arguments='{"q": "beta"')]
    if fault == "unknown_tool":
        return [ToolCall("r2a", "delete_everything", {})]
    if fault in TOOL_FAULTS:
        return [ToolCall("r2a", "search", {"q": "fault"}), ToolCall("r2b", "save", {"note": "second"})]
    return [ToolCall("r2a", "search", {"q": "beta"})]


# ---- providers ------------------------------------------------------------------------------
def stub_provider(fault: str, clock: VirtualClock):
    err = {"http_429": ProviderError("http_429", "rate limited", processed=False, retryable=True, retry_after=3),
           "http_500": ProviderError("http_5xx", "HTTP 500", retryable=True),
           "http_503": ProviderError("http_5xx", "HTTP 503", retryable=True),
           "connection_reset": ProviderError("connection", "reset by peer", retryable=True),
           "empty_choices": ProviderError("empty_choices", "no choices", retryable=False)}.get(fault)
    turns = [Turn(tool_calls=_round1())]
    if err is not None:
        turns.append(Turn(error=err))
    elif fault == "stream_cut":
        turns.append(Turn(chunks=[Chunk("Looking ", 1.0), Chunk("into ", 1.0)],
                          error=ProviderError("stream_cut", "the stream ended early", retryable=True)))
    elif fault == "empty_reply":  # neither text nor a call: a round without evidence
        turns.append(Turn(text=""))
    turns.append(Turn(tool_calls=_fault_calls(fault), usage=None if fault == "missing_usage" else "auto"))
    turns.append(Turn(text="The answer, from the evidence."))
    return ScriptedProvider(turns, clock=clock, context_window=400_000)


def _sse(chunks: list[dict], done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


def _completion_chunks(calls: list[ToolCall] | None, text: str = "", usage: bool = True) -> list[dict]:
    out = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}]
    for i, c in enumerate(calls or []):
        args = c.invalid_arguments if c.invalid_arguments is not None else json.dumps(c.arguments)
        out.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}}]}}]})
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]})
    if usage:
        out.append({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
    return out


def remote_provider(fault: str, clock: VirtualClock):
    import httpx
    from imprint_core.providers.remote import RemoteProvider
    script: list[Callable[[httpx.Request], httpx.Response]] = []
    ok = lambda chunks, done=True: (lambda req: httpx.Response(200, content=_sse(chunks, done),  # noqa: E731
                                                              headers={"content-type": "text/event-stream"}))
    script.append(ok(_completion_chunks(_round1())))
    if fault == "http_429":
        script.append(lambda req: httpx.Response(429, headers={"retry-after": "3"}, json={"error": "slow down"}))
    elif fault in ("http_500", "http_503"):
        script.append(lambda req: httpx.Response(int(fault[-3:]), json={"error": "server"}))
    elif fault == "connection_reset":
        def reset(req):
            raise httpx.ReadError("connection reset by peer", request=req)
        script.append(reset)
    elif fault == "stream_cut":
        script.append(ok([{"choices": [{"index": 0, "delta": {"content": "Looking "}}]}], done=False))
    elif fault == "empty_choices":
        script.append(lambda req: httpx.Response(200, content=_sse([{"choices": []}], done=True),
                                                 headers={"content-type": "text/event-stream"}))
    elif fault == "empty_reply":  # what transformers serve streams after dropping a call it cannot parse
        script.append(ok([{"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 32}}], done=False))
    script.append(ok(_completion_chunks(_fault_calls(fault), usage=fault != "missing_usage")))
    script.append(ok(_completion_chunks(None, "The answer, from the evidence.")))
    final = ok(_completion_chunks(None, "Final answer."))

    def handler(request: httpx.Request) -> httpx.Response:
        return (script.pop(0) if script else final)(request)
    return RemoteProvider("http://127.0.0.1:8099/v1", "mock-model", clock=clock, stream=True,
                          transport=httpx.MockTransport(handler), context_window=400_000)


class FaultInjector:
    """Wraps any provider and injects one fault into its second request, at
    the event level, so a real local model meets the same faults."""

    def __init__(self, inner, fault: str):
        self.inner, self.fault = inner, fault
        self.name, self.context_window, self.counter = inner.name, inner.context_window, inner.counter
        self.counting_modes = None  # counts natively with the inner provider's counter, whatever it offers
        self.requests = 0

    def generate(self, request) -> Iterator:
        self.requests += 1
        nth, f = self.requests, self.fault
        if nth == 2 and f in ("http_429", "http_500", "http_503", "connection_reset", "empty_choices"):
            kind = {"http_429": "http_429", "connection_reset": "connection", "empty_choices": "empty_choices"}.get(
                f, "http_5xx")
            raise ProviderError(kind, f"injected {f}", processed=f not in ("http_429",),
                                retryable=f != "empty_choices", retry_after=3 if f == "http_429" else None)
        seen = 0
        for event in self.inner.generate(request):
            if nth == 2 and f == "stream_cut" and seen >= 2:
                raise ProviderError("stream_cut", "injected: the stream ended early", retryable=True)
            seen += 1
            if nth == 2 and isinstance(event, ToolCallEvent) and f == "invalid_tool_json":
                event = ToolCallEvent(ToolCall(event.call.id, event.call.name, {}, invalid_arguments='{"q": '))
            if nth == 2 and isinstance(event, ToolCallEvent) and f == "unknown_tool":
                event = ToolCallEvent(ToolCall(event.call.id, "delete_everything", event.call.arguments))
            if nth == 2 and isinstance(event, ToolCallEvent) and f in TOOL_FAULTS:
                event = ToolCallEvent(ToolCall(event.call.id, "search", {"q": "fault"}))
            if isinstance(event, UsageEvent) and f == "missing_usage":
                continue
            if nth == 2 and f == "empty_reply" and not isinstance(event, UsageEvent):
                continue  # the model generated, but nothing it wrote reaches the loop
            yield event


_LOCAL: list[Any] = []


def local_provider(fault: str, clock: VirtualClock):
    """The real model, loaded once for the whole matrix, behind the injector."""
    from ..live.model_folder import load_local_provider
    if not _LOCAL:
        _LOCAL.append(load_local_provider(clock=clock, tool_choice="required"))
    model = _LOCAL[0]
    model.clock = clock
    model.forget()
    return FaultInjector(model, fault)


PROVIDERS: dict[str, Callable[[str, VirtualClock], Any]] = {
    "stub": stub_provider, "remote": remote_provider, "local": local_provider}


# ---- one cell ---------------------------------------------------------------------------------
def check_invariants(loop: ResearchLoop, result, trace_text: str) -> list[str]:
    problems = []
    if not isinstance(result.stop_reason, StopReason):
        problems.append("no defined stop reason")
    events = [value for _, value in json_lines(trace_text)]
    results = Counter(e["call_id"] for e in events if e["type"] == "tool_result")
    asked = [c.id for m in result.messages if m.role == "assistant" for c in m.tool_calls]
    answered = Counter(m.tool_call_id for m in result.messages if m.role == "tool")
    if any(answered[c] != 1 for c in asked) or any(results[c] != 1 for c in asked):
        problems.append("a tool call without exactly one result")
    writes = [e for e in events if e["type"] == "tool_call" and e["kind"] == "write"]
    if any(results[w["call_id"]] != 1 for w in writes) or len(writes) != len(result.writes):
        problems.append("an executed write not recorded exactly once")
    t = loop.ledger.totals
    if t.reserved + t.overrun != t.charged + t.refunded or not all(r.balanced for r in loop.ledger.records):
        problems.append("the ledger does not balance")
    return problems


def run_cell(provider_kind: str, fault: str, *, cancel_after: int | None = None,
             settings: ResearchSettings | None = None) -> Cell:
    clock = VirtualClock()
    cell = Cell(provider_kind, fault if cancel_after is None else f"cancel after event {cancel_after}")
    buf = io.StringIO()
    trace = TraceWriter(buf, clock)
    cancel = CancelToken(clock)
    if cancel_after is not None:
        count = [0]

        def watch(event) -> None:
            count[0] += 1
            if count[0] == cancel_after:
                cancel.cancel()
        trace.subscribe(watch)
    try:
        provider = PROVIDERS[provider_kind](fault, clock)
        loop = ResearchLoop(provider, _tools(fault), settings or ResearchSettings(
            research_timeout_sec=300, research_no_progress_rounds=2, max_tokens=32), clock=clock,
            config=LoopConfig(research_max_output_tokens=32), trace=trace, cancel=cancel)
        result = loop.run("What do the sources say?")
    except Exception as exc:  # a crash is exactly what the matrix exists to catch
        cell.problems.append(f"crashed: {type(exc).__name__}: {exc}")
        return cell
    cell.stop_reason, cell.final_mode, cell.rounds = result.stop_reason.value, result.final_mode.value, result.rounds
    cell.requests = result.research_requests
    cell.failed_requests = sum(r.outcome in ("error", "unsent") for r in result.records)
    events = [value for _, value in json_lines(buf.getvalue())]
    cell.tool_errors = sum(1 for e in events if e["type"] == "tool_result" and e["status"] == "error")
    cell.problems += check_invariants(loop, result, buf.getvalue())
    # read_trace reads a file: a private temporary one, never a file of some checkout
    with tempfile.TemporaryDirectory(prefix="imprint-fault-cell-") as folder:
        tmp = Path(folder) / "cell.jsonl"
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        try:
            read_trace(tmp)
        except Exception as exc:
            cell.problems.append(f"trace does not parse: {exc}")
    return cell


def run_matrix(providers: tuple[str, ...] = ("stub", "remote", "local")) -> list[Cell]:
    cells = [run_cell(p, f) for p in providers for f in FAULTS]
    # Cancellation at every event boundary of a normal stub and remote run.
    for p in [p for p in providers if p in ("stub", "remote")]:
        total, stop_at = _event_count(p)
        for k in range(1, total + 1):
            cell = run_cell(p, "none", cancel_after=k)
            # Before the stop decision a cancellation must win; after it the
            # run has already ended its research and keeps its outcome.
            expected = "cancelled" if k < stop_at else "answered"
            if cell.stop_reason != expected:
                cell.problems.append(f"cancelled after event {k} (answer settled at event {stop_at}): "
                                     f"expected stop reason {expected}, got {cell.stop_reason}")
            cells.append(cell)
    return cells


def _event_count(provider_kind: str) -> tuple[int, int]:
    """Events after the header in a normal run, and the number of the event
    that settles the answering request."""
    clock = VirtualClock()
    buf = io.StringIO()
    trace = TraceWriter(buf, clock)
    loop = ResearchLoop(PROVIDERS[provider_kind]("none", clock), _tools("none"),
                        ResearchSettings(research_no_progress_rounds=2, max_tokens=32), clock=clock,
                        config=LoopConfig(research_max_output_tokens=32), trace=trace)
    log = EventLog(trace)
    loop.run("What do the sources say?")
    events = log.events[1:]
    # The answer is decided once its request has settled: a cancellation
    # after that finds a complete answer, which completes immediately.
    return len(events), max(i for i, e in enumerate(events, start=1)
                            if isinstance(e, RequestSettled) and e.role == "coordinator")


def write_report(cells: list[Cell], path: Path) -> None:
    lines = ["# Fault matrix", "", "Generated by `imprint faults` (and checked by "
             "`tests/harness/scenarios/test_fault_matrix.py`). Each cell runs the research loop on the virtual clock with one "
             "fault: round 1 searches and saves a note, round 2 meets the fault, round 3 answers. A cell passes "
             "when the run ends with a defined stop reason, every tool call has exactly one result, every "
             "executed write is recorded exactly once, the ledger balances (reserved + overrun = charged + refunded) "
             "and the trace parses. `local` is the real SmolLM2 model behind a fault-injecting wrapper.", "",
             "| provider | fault | stop reason | final mode | rounds | requests | failed requests | tool errors | invariants |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in cells:
        lines.append(f"| {c.provider} | {c.fault} | {c.stop_reason} | {c.final_mode} | {c.rounds} | {c.requests} "
                     f"| {c.failed_requests} | {c.tool_errors} | {'hold' if c.ok else 'BROKEN: ' + '; '.join(c.problems)} |")
    ok = sum(c.ok for c in cells)
    lines += ["", f"{ok} of {len(cells)} cells hold every invariant."]
    atomic_write_text(path, "\n".join(lines) + "\n")
