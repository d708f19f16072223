"""Tools and the batch executor: deadlines, not-executed results, writes."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from .budget import TimeBudget
from .errors import ToolAbandoned
from .events import ToolCallStarted, ToolResultRecorded
from .novelty import segment
from .novelty.echo import evidence_free
from .trace import TraceWriter
from .types import (CancelToken, Clock, Tool, ToolCall, ToolContext, ToolFunction, ToolOutput,
                    ToolResult, ToolSpec)


@dataclass
class FunctionTool:
    """A tool made from a plain callable `fn(arguments, ctx)`."""
    spec: ToolSpec
    fn: ToolFunction
    blocking: bool = True

    def __call__(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        return self.fn(arguments, ctx)


def _compile_validator(schema: dict):
    """A validator for a tool's parameters, built once per executor (checking
    the schema on every call cost more than the rest of the loop's work)."""
    try:
        import jsonschema
    except ImportError:  # validation is a courtesy to the model, not a dependency
        return None
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return cls(schema)


def _schema_error(validator, arguments: dict) -> str | None:
    if validator is None:
        return None
    error = next(iter(validator.iter_errors(arguments)), None)
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{path}: {error.message}"


def _as_text(value: Any) -> str:
    if isinstance(value, bytes):  # a tool handing back raw bytes: never crash on bad UTF-8
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else str(value)


def _has_units(text: str, segments: tuple | None) -> bool:
    """Whether a result has an evidence unit that is not blank. Text that is
    not a JSON array is split into paragraphs at blank lines, so it has one
    exactly when it is not blank: only an array needs segmenting (splitting
    20 KB into paragraphs to learn that cost more than the call)."""
    if segments is None:
        stripped = text.strip()
        if not (stripped[:1] == "[" and stripped[-1:] == "]"):
            return bool(stripped)
        segments = segment(text)
    return any(_as_text(u).strip() for u in segments)


def distinct_ids(calls: list[ToolCall], round_no: int) -> list[ToolCall]:
    """Providers send duplicate or empty call ids; every call of a batch
    needs its own, or one result would stand for two."""
    seen: set[str] = set()
    out = []
    for i, c in enumerate(calls):
        if not c.id or c.id in seen:
            c = replace(c, id=f"{c.id or 'call'}~r{round_no}.{i}")
        seen.add(c.id)
        out.append(c)
    return out


class ToolExecutor:
    """Runs one batch of calls in order.

    Before each call: cancellation and the deadline. A call that has not
    started when either has passed gets an explicit "not executed" result, so
    every call has exactly one result. A blocking tool or a write that is
    running is allowed to finish; its result is recorded. Exceptions become
    error results. Writes are never deduplicated, skipped or retried.

    Each call's start and result go to the trace as they happen, so an
    executed write is on file even if the process dies mid-batch; the batch's
    results are returned for the loop to judge."""

    def __init__(self, tools: Sequence[Tool], clock: Clock, budget: TimeBudget, cancel: CancelToken,
                 trace: TraceWriter | None = None):
        self.tools = {t.spec.name: t for t in tools}
        self._validators = {name: _compile_validator(t.spec.parameters) for name, t in self.tools.items()}
        self.clock, self.budget, self.cancel = clock, budget, cancel
        self.trace = trace or TraceWriter(None, clock)

    def kind_of(self, call: ToolCall) -> str:
        tool = self.tools.get(call.name)
        return tool.spec.kind if tool else "read"

    def run_batch(self, calls: Sequence[ToolCall], round_no: int) -> list[ToolResult]:
        results: list[ToolResult] = []
        for index, call in enumerate(calls):
            results.append(self._run_one(call, round_no, index))
        return results

    def not_executed(self, call: ToolCall, why: str) -> ToolResult:
        return ToolResult(call.id, call.name, self.kind_of(call), "not_executed",  # type: ignore[arg-type]
                          f"not executed: {why}; no action was taken")

    def _run_one(self, call: ToolCall, round_no: int, index: int) -> ToolResult:
        tool = self.tools.get(call.name)
        kind = tool.spec.kind if tool else "read"
        if self.cancel.cancelled:
            return self._emit(call, round_no, self.not_executed(call, "the reply was cancelled"))
        if self.budget.expired():
            return self._emit(call, round_no, self.not_executed(call, "the research deadline passed"))
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return self._emit(call, round_no, ToolResult(call.id, call.name, "read", "error",
                                                         f"error: unknown tool {call.name!r}; available tools: {known}"))
        if call.invalid_arguments is not None:
            return self._emit(call, round_no, ToolResult(call.id, call.name, kind, "error",
                                                         f"error: arguments are not a JSON object: {call.invalid_arguments}"))
        problem = _schema_error(self._validators[call.name], call.arguments)
        if problem:
            return self._emit(call, round_no, ToolResult(call.id, call.name, kind, "error",
                                                         f"error: invalid arguments: {problem}"))
        self.trace.write(ToolCallStarted(round=round_no, index=index, call_id=call.id, tool=call.name, kind=kind,
                                         arguments=call.arguments, blocking=tool.blocking))
        started = self.clock.now()
        if kind == "ask":
            self.budget.pause()  # amendment 0159: waiting for the user is not research time
        deadline = self.budget.deadline
        try:
            ctx = ToolContext(self.clock, deadline, self.cancel, blocking=tool.blocking, kind=kind, round=round_no)
            out = tool(call.arguments, ctx)
            if not isinstance(out, ToolOutput):
                out = ToolOutput(_as_text(out))
            text = _as_text(out.text)
            # A read that returned no evidence units ("", "[]", no hits), or an envelope of
            # nothing (novelty.echo.evidence_free, the one definition), is empty, not evidence.
            status = out.status or ("ok" if _has_units(text, out.segments)
                                    and not (kind == "read" and evidence_free(text, None)) else "empty")
            result = ToolResult(call.id, call.name, kind, status, text,
                                segments=tuple(_as_text(s) for s in out.segments) if out.segments is not None else None,
                                stop=out.stop)
        except ToolAbandoned as exc:
            result = ToolResult(call.id, call.name, kind, "error", f"error: not completed: {exc}")
        except Exception as exc:  # a tool's failure is evidence of failure, not a crash
            result = ToolResult(call.id, call.name, kind, "error", f"error: tool raised {type(exc).__name__}: {exc}")
        finally:
            if kind == "ask":
                self.budget.resume()
        finished = self.clock.now()
        result = ToolResult(result.call_id, result.name, result.kind, result.status, result.text, result.segments,
                            started_at=started, finished_at=finished,
                            after_deadline=kind != "ask" and finished > self.budget.deadline, stop=result.stop)
        return self._emit(call, round_no, result)

    def _emit(self, call: ToolCall, round_no: int, result: ToolResult) -> ToolResult:
        # Written as soon as it exists: an executed write is never lost. The
        # stop rule's verdict on it follows in the round's `round_end`.
        self.trace.write(ToolResultRecorded(
            round=round_no, call_id=call.id, tool=call.name, kind=result.kind, status=result.status,
            chars=len(result.text), after_deadline=result.after_deadline, started=result.started_at,
            finished=result.finished_at, arguments=call.arguments, text=result.text,
            segments=list(result.segments) if result.segments is not None else None))
        return result
