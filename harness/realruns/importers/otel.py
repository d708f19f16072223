"""OpenTelemetry traces of agents, as OTLP JSON: one export request
(`{"resourceSpans": [...]}`) per file, or one per line as the SDK's and
the collector's file exporters write them, read into spans by `otlp`.
The spans of one trace (one `traceId`) become one run, named
`<traceId>.jsonl` (our own exports: `<scenario>.jsonl`, the name it ran
under) under a folder named after the file; a trace without an
agent, model or tool span (an HTTP server's own spans beside the agent's)
is no run.

Two dialects of attributes are read, and our own exporter's on top:

| attribute | dialect | becomes |
| --- | --- | --- |
| `gen_ai.operation.name` = `chat`, `text_completion`, `generate_content` | GenAI | a model span: it opens a turn |
| `gen_ai.operation.name` = `execute_tool` | GenAI | a tool span: one call |
| `gen_ai.tool.name` | GenAI | the call's tool (required on a tool span) |
| `gen_ai.tool.call.id` | GenAI | pairs the call with the model's request for it |
| `gen_ai.tool.call.arguments` (JSON text or a map) | GenAI | the call's args (opt-in in the conventions) |
| `gen_ai.tool.call.result` | GenAI | the call's result text (opt-in in the conventions) |
| `gen_ai.output.messages` (`tool_call` parts) | GenAI | the calls a model span asked for |
| `gen_ai.input.messages` (`tool_call_response` parts) | GenAI | results of calls that have no tool span |
| `gen_ai.request.model`, `gen_ai.conversation.id`, `gen_ai.agent.name` | GenAI | labels `model`, `conversation_id`, `agent` |
| `openinference.span.kind` = `LLM` / `TOOL` | OpenInference | a model span / a tool span |
| `tool.name`, `tool.id` | OpenInference | the call's tool and id |
| `input.value` (JSON text of an object, else kept as `{"arguments": text}`) | OpenInference | the call's args |
| `output.value` | OpenInference | the call's result text |
| `llm.output_messages.N.message.tool_calls.M.tool_call.{id,function.name,function.arguments}` | OpenInference | the calls a model span asked for |
| `llm.input_messages.N.message.{role=tool,tool_call_id,content}` | OpenInference | results of calls that have no tool span |
| `llm.model_name`, `session.id` | OpenInference | labels `model`, `conversation_id` |
| span `status.code` = ERROR (2), or an `error.type` attribute | both | the call's status is `error` |
| `imprint.round`, `imprint.tool.kind`, `imprint.tool.status`, `imprint.tool.segments`; `imprint.round_end` and `imprint.stop` events | ours (`imprint export-otel`) | the round, kind, status and segments exactly as our trace had them |

A **round** (GenAI and OpenInference): a model span and the tool spans
that start after it and before the next model span, in start order; a
tool span before any model span is a round of its own. A turn with no
call (the agent's answer) is not a round, as in the chat importer. The
calls a model span asked for that no tool span ran (matched by call id,
or by tool name where the tool span has no id) take their result from a
later model span's input messages where those carry it. In a trace
whose spans carry our `imprint.*` attributes, rounds are `imprint.round`
numbers, as in the trace.

Kind: `imprint.tool.kind`, else the corpus's `tool-kinds.yaml`
(`toolkinds`), else `callkinds.classify_tool` on the name and args. Status:
`imprint.tool.status`; else `error` for an ERROR span; else
`resultstatus.text_status` of the result.

Not read: the older flattened `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`
attributes and `traceloop.*` spans (OpenLLMetry), and content kept as span
events or log records (`gen_ai.choice`, `gen_ai.tool.message`): a trace of
those gives model spans without calls, so no rounds, unless it also has
tool spans of one of the dialects above.

**Calls without a result.** The conventions make tool arguments and
results opt-in, and many producers record neither. Such a call's result
is not guessed: its text is empty, its status `error` when the span
failed, `ok` for a write (a write's status does not depend on its text),
and `empty` otherwise, so the replay credits it with no new evidence,
and a stop it reports can come earlier than one on the full results
would. The round log's header says so: `results_missing` counts those
calls (a failed one, no evidence either way, is not counted), and `results_note` says what it means. A model span's request for
a call that neither a tool span nor a later input message answers is left
out where the trace ends on it (it never ran) and counted the same way
otherwise.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..roundlogs import KINDS, STATUSES, Round, RoundCall, RoundLog

from .chat import parse_arguments
from .otlp import Span, read_spans
from .rawfiles import OTLP_KEY, Source
from .registry import Format
from .resultstatus import ERROR, text_status, unrecorded
from .toolkinds import classifier, find_overrides

MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION = "execute_tool"
OI_MODEL, OI_TOOL = "LLM", "TOOL"
OI_OUTPUT_CALL = re.compile(r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(.+)$")
"""OpenInference's flattened tool calls of a model span's output (message, call, field)."""
OI_INPUT_MESSAGE = re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|tool_call_id|content)$")
"""OpenInference's flattened input messages (message, field): tool results by call id."""
SKIPPED_STATUSES = frozenset({"not_executed", "no_result"})
"""Our `imprint.tool.status` values of calls that never ran or never returned:
not calls of the round log (as `imprint export-rounds` leaves them out)."""
RESULTS_NOTE = ("{n} of {total} calls carry no result text: the producer did not record it "
                "(gen_ai.tool.call.result / output.value). Their status is the span's (error), ok for a write, "
                "else empty: the replay credits them no new evidence, so a stop it reports may come earlier "
                "than one on the full results would.")


# ---- what a span is -----------------------------------------------------------------------------

def role(sp: Span) -> str | None:
    """`model`, `tool` or None (a span of neither dialect's kinds)."""
    op = sp.attrs.get("gen_ai.operation.name")
    kind = sp.attrs.get("openinference.span.kind")
    if op in MODEL_OPERATIONS or (isinstance(kind, str) and kind.upper() == OI_MODEL):
        return "model"
    if op == TOOL_OPERATION or (isinstance(kind, str) and kind.upper() == OI_TOOL):
        return "tool"
    return None


def is_agent(sp: Span) -> bool:
    """An agent's own span (GenAI `invoke_agent`, OpenInference `AGENT`): its
    trace is a run even when it made no model request or call."""
    kind = sp.attrs.get("openinference.span.kind")
    return sp.attrs.get("gen_ai.operation.name") == "invoke_agent" or (isinstance(kind, str) and kind.upper() == "AGENT")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@dataclass
class Call:
    id: str | None
    tool: str
    args: dict
    result: str | None
    error: bool
    kind: str | None = None          # ours, when the span says
    status: str | None = None        # ours, when the span says
    segments: list[str] | None = None
    round: int | None = None


def tool_call(sp: Span, src: Source) -> Call:
    """A tool span as a call, in either dialect (our `imprint.tool.*` where present)."""
    a = sp.attrs
    if "gen_ai.tool.name" in a or a.get("gen_ai.operation.name") == TOOL_OPERATION:
        name = a.get("gen_ai.tool.name")
        if not isinstance(name, str) or not name:
            src.fail("a tool span without its tool's name", key=sp.where + ".attributes.gen_ai.tool.name",
                     expected="the tool's name (text)")
        args, _ = parse_arguments(a.get("gen_ai.tool.call.arguments"), src,
                                  sp.where + ".attributes.gen_ai.tool.call.arguments")
        result = _text(a.get("gen_ai.tool.call.result"))
        cid = a.get("gen_ai.tool.call.id")
    else:
        name = a.get("tool.name") or sp.name
        if not isinstance(name, str) or not name:
            src.fail("a tool span without its tool's name", key=sp.where + ".attributes.tool.name",
                     expected="the tool's name (text)")
        args, _ = parse_arguments(a.get("input.value"), src, sp.where + ".attributes.input.value")
        result = _text(a.get("output.value"))
        cid = a.get("tool.id") or a.get("tool_call.id")
    kind, status, segs = a.get("imprint.tool.kind"), a.get("imprint.tool.status"), a.get("imprint.tool.segments")
    if kind is not None and kind not in KINDS:
        src.fail(f"unknown kind {kind!r}", key=sp.where + ".attributes.imprint.tool.kind",
                 expected="one of " + ", ".join(KINDS))
    if segs is not None and not (isinstance(segs, list) and all(isinstance(x, str) for x in segs)):
        src.fail("segments must be a list of strings", key=sp.where + ".attributes.imprint.tool.segments")
    rnd = a.get("imprint.round")
    return Call(str(cid) if cid is not None else None, name, args, result, sp.error, kind,
                status if isinstance(status, str) else None, segs, rnd if isinstance(rnd, int) else None)


def _message_list(value: Any) -> list:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return []
    return value if isinstance(value, list) else []


def requested_calls(sp: Span, src: Source) -> list[Call]:
    """The tool calls a model span's output asked for (GenAI `gen_ai.output.messages`
    parts, or OpenInference's flattened `llm.output_messages`)."""
    out = []
    for m in _message_list(sp.attrs.get("gen_ai.output.messages")):
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call" and isinstance(part.get("name"), str):
                args, _ = parse_arguments(part.get("arguments"), src,
                                          sp.where + ".attributes.gen_ai.output.messages")
                out.append(Call(_text(part.get("id")), part["name"], args, None, False))
    flat = OI_OUTPUT_CALL
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for k, v in sp.attrs.items():
        m = flat.match(k)
        if m:
            found.setdefault((int(m.group(1)), int(m.group(2))), {})[m.group(3)] = v
    for _, c in sorted(found.items()):
        if isinstance(c.get("function.name"), str):
            args, _ = parse_arguments(c.get("function.arguments"), src, sp.where + ".attributes.llm.output_messages")
            out.append(Call(_text(c.get("id")), c["function.name"], args, None, False))
    return out


def input_results(sp: Span) -> dict[str, str]:
    """Tool results a model span's input carries, by call id."""
    out = {}
    for m in _message_list(sp.attrs.get("gen_ai.input.messages")):
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call_response" and part.get("id") is not None:
                out[str(part["id"])] = _text(part.get("response")) or ""
    flat = OI_INPUT_MESSAGE
    msgs: dict[int, dict[str, Any]] = {}
    for k, v in sp.attrs.items():
        m = flat.match(k)
        if m:
            msgs.setdefault(int(m.group(1)), {})[m.group(2)] = v
    for m in msgs.values():
        if m.get("role") == "tool" and m.get("tool_call_id") is not None:
            out[str(m["tool_call_id"])] = _text(m.get("content")) or ""
    return out


# ---- spans into rounds --------------------------------------------------------------------------

def _status(c: Call, kind: str) -> tuple[str, bool]:
    """The call's status, and whether its result is missing."""
    if c.status is not None:
        return (c.status if c.status in STATUSES else ERROR), False
    if c.error:
        return ERROR, False                # a failed call is no evidence, with or without its text
    if c.result is None:
        return unrecorded(kind), True
    return text_status(c.result), False


def _turns(spans: list[Span], src: Source) -> list[list[Call]]:
    """Calls per turn (GenAI and OpenInference): see the module's rules."""
    ordered = sorted((sp for sp in spans if role(sp)), key=lambda sp: (sp.start, sp.order))
    turns: list[tuple[Span | None, list[Call]]] = []
    for sp in ordered:
        if role(sp) == "model":
            turns.append((sp, []))
        else:
            if not turns:
                turns.append((None, []))
            turns[-1][1].append(tool_call(sp, src))
    out: list[list[Call]] = []
    for n, (model, ran) in enumerate(turns):
        calls = list(ran)
        if model is not None:
            ran_ids = {c.id for c in ran if c.id is not None}
            unnamed = [c.tool for c in ran if c.id is None]     # tool spans without a call id: matched by tool
            later = [results for m, _ in turns[n + 1:] if m is not None for results in [input_results(m)]]
            for req in requested_calls(model, src):
                if req.id is not None and req.id in ran_ids:
                    continue
                if req.tool in unnamed:
                    unnamed.remove(req.tool)
                    continue
                if req.id is None and ran:
                    continue
                answer = next((r[req.id] for r in later if req.id is not None and req.id in r), None)
                if answer is None and n + 1 == len(turns):
                    continue                       # the trace ends on it: it never ran
                req.result = answer
                calls.append(req)
        out.append(calls)
    return out


def _our_rounds(spans: list[Span], src: Source) -> list[list[Call]]:
    """Rounds by `imprint.round`, as our trace numbered them; a round that ran
    no call (its `imprint.round_end` event says it was one) is empty."""
    numbers: set[int] = set()
    calls: list[Call] = []
    for sp in sorted(spans, key=lambda sp: (sp.start, sp.order)):
        for name, _, attrs in sp.events:
            if name == "imprint.round_end" and isinstance(attrs.get("imprint.round"), int):
                numbers.add(attrs["imprint.round"])
        if role(sp) == "tool":
            c = tool_call(sp, src)
            if c.round is None:
                src.fail("a tool span without imprint.round in a trace that numbers its rounds",
                         key=sp.where + ".attributes.imprint.round", expected="the round's number (an integer)")
            if c.status not in SKIPPED_STATUSES:
                numbers.add(c.round)
                calls.append(c)
    return [[c for c in calls if c.round == n] for n in sorted(numbers)]


def _first(spans: list[Span], *keys: str) -> Any:
    for sp in spans:
        for k in keys:
            if sp.attrs.get(k) is not None:
                return sp.attrs[k]
    return None


def trace_log(trace: str, spans: list[Span], path: str | Path, src: Source, overrides: dict[str, str],
              kinds_file: str | None) -> RoundLog:
    """One trace's spans as a round log (see the module's rules)."""
    ours = any(k.startswith("imprint.") for sp in spans for k in (*sp.attrs, *sp.resource)) or \
        any(name.startswith("imprint.") for sp in spans for name, _, _ in sp.events)
    dialect = "imprint" if ours else \
        "openinference" if any("openinference.span.kind" in sp.attrs for sp in spans) else "gen_ai"
    classify = classifier(overrides)
    turns = _our_rounds(spans, src) if ours else [t for t in _turns(spans, src) if t]
    rounds, missing, total = [], 0, 0
    for calls in turns:
        out = []
        for c in calls:
            kind = c.kind or classify(c.tool, c.args)
            status, lost = _status(c, kind)
            missing += lost
            total += 1
            out.append(RoundCall(c.tool, c.args, kind, status, c.result or "", c.segments))
        rounds.append(Round(len(rounds) + 1, out))
    resource = spans[0].resource
    stop = None
    for sp in spans:
        for name, _, attrs in sp.events:
            if name == "imprint.stop":
                stop = {"reason": attrs.get("imprint.reason"), "round": attrs.get("imprint.round")}
    labels: dict[str, Any] = {
        "source_format": "otel", "source_file": str(path), "instance_id": trace, "trace_id": trace,
        "dialect": dialect, "service": resource.get("service.name"),
        "model": _first(spans, "gen_ai.request.model", "gen_ai.response.model", "llm.model_name"),
        "conversation_id": _first(spans, "gen_ai.conversation.id", "session.id"),
        "agent": _first(spans, "gen_ai.agent.name"), "num_rounds": len(rounds),
        "results_missing": missing,
    }
    if missing:
        labels["results_note"] = RESULTS_NOTE.format(n=missing, total=total)
    scenario = resource.get("imprint.scenario")
    if scenario is not None:
        labels["scenario"] = scenario
    if stop is not None:
        labels["exported_stop"] = stop
    if kinds_file:
        labels["tool_kinds_file"] = kinds_file
    return RoundLog(f"{trace}.jsonl", str(path), labels, rounds)


def import_otel(data: Any, path: str | Path) -> list[RoundLog]:
    """One log per trace that holds an agent, model or tool span, in the file's order."""
    src = Source(path, "otel")
    if not (isinstance(data, dict) or (isinstance(data, list) and data)):
        src.fail(f"wrong type {type(data).__name__}", key="(top level)",
                 expected="an OTLP export object with resourceSpans, or one a line")
    spans = read_spans(data, src)
    if not spans:
        src.fail("no spans in the file", key=OTLP_KEY, expected="resourceSpans holding spans")
    by_trace: dict[str, list[Span]] = {}
    for sp in spans:
        by_trace.setdefault(sp.trace, []).append(sp)
    runs = {t: s for t, s in by_trace.items() if any(role(sp) or is_agent(sp) for sp in s)}
    if not runs:
        src.fail(f"none of the file's {len(by_trace)} trace(s) has an agent, model or tool span",
                 key="attributes.gen_ai.operation.name",
                 expected="spans with gen_ai.operation.name (invoke_agent, chat, text_completion, generate_content, "
                          "execute_tool) or openinference.span.kind (AGENT, LLM, TOOL)")
    overrides, kinds_file = find_overrides(path)
    return _named([trace_log(t, s, path, src, overrides, kinds_file) for t, s in runs.items()])


def _named(logs: list[RoundLog]) -> list[RoundLog]:
    """Our own traces (`imprint export-otel`) under their scenarios' names, as
    they were run, rather than their trace ids; a name two traces share
    takes the trace id's first digits."""
    wanted = [re.sub(r"[^A-Za-z0-9._-]+", "-", str(log.labels.get("scenario") or "")).strip(".-")
              for log in logs]
    for log, name in zip(logs, wanted):
        if name:
            log.path = f"{name if wanted.count(name) == 1 else name + '-' + log.labels['trace_id'][:8]}.jsonl"
    return logs



def is_otel(data: Any) -> bool:
    """OTLP JSON: an object with `resourceSpans`, or a list of them (JSON lines)."""
    if isinstance(data, dict):
        return OTLP_KEY in data
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and OTLP_KEY in data[0]


FORMATS = (Format("otel", is_otel, import_otel, many_runs=True),)
"""The format this module imports (registry.py): one log per trace."""
