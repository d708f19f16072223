"""Shared helpers for the imprint_core tests: deterministic evidence text,
recording tools, and a one-call way to build a loop on a virtual clock.

Nothing here sleeps: all time is simulated on a VirtualClock.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from imprint_core import (CancelToken, EventLog, FunctionTool, LoopConfig, ResearchLoop, ResearchSettings, ScriptedProvider,
                          ToolContext, ToolOutput, ToolSpec, TraceWriter, Turn, VirtualClock, call)

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fe", "gu", "ho", "ji", "bo"]
VOCAB = sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})  # 4096 words


def doc(topic: str | int, words: int = 40) -> str:
    """A deterministic paragraph of evidence about `topic`; different topics
    share (almost) no 5-word shingles, the same topic is the same text."""
    rng = random.Random(f"topic:{topic}")
    return " ".join(rng.choice(VOCAB) for _ in range(words)).capitalize() + "."


RECORD_PATIENCE = 4
"""The record's patience, which the loop tests' rounds were written for (the
shipped default is now 9, imprint_core.settings); tests of the default itself
build ResearchSettings() directly."""


def settings(**kw: int) -> ResearchSettings:
    kw.setdefault("research_no_progress_rounds", RECORD_PATIENCE)
    return ResearchSettings(**kw)


@dataclass
class Recorder:
    """What a tool was asked to do, in order."""
    calls: list[dict] = field(default_factory=list)
    times: list[tuple[float, float]] = field(default_factory=list)


def read_tool(name: str = "search", responder: Callable[[dict], Any] | dict | None = None, *, work: float = 0.0,
              blocking: bool = True, recorder: Recorder | None = None) -> FunctionTool:
    """A read tool. `responder(arguments)` returns str or ToolOutput; a dict
    maps the `q` argument to a response; the default returns doc(q)."""
    rec = recorder if recorder is not None else Recorder()

    def fn(arguments: dict, ctx: ToolContext):
        start = ctx.clock.now()
        rec.calls.append(dict(arguments))
        try:
            if work:
                ctx.work(work)
        finally:
            rec.times.append((start, ctx.clock.now()))
        if responder is None:
            return doc(arguments.get("q", ""))
        if isinstance(responder, dict):
            return responder[arguments["q"]]
        return responder(arguments)

    tool = FunctionTool(ToolSpec(name, f"{name} the sources", kind="read"), fn, blocking=blocking)
    tool.recorder = rec  # type: ignore[attr-defined]
    return tool


def write_tool(name: str = "save_note", *, work: float = 0.0, fail: bool = False,
               recorder: Recorder | None = None) -> FunctionTool:
    rec = recorder if recorder is not None else Recorder()

    def fn(arguments: dict, ctx: ToolContext):
        start = ctx.clock.now()
        rec.calls.append(dict(arguments))
        if work:
            ctx.work(work)
        rec.times.append((start, ctx.clock.now()))
        if fail:
            raise RuntimeError("disk full")
        return f"saved note {len(rec.calls)}"

    tool = FunctionTool(ToolSpec(name, "save a note", kind="write"), fn, blocking=True)
    tool.recorder = rec  # type: ignore[attr-defined]
    return tool


def ask_tool(answer: str | Callable[[dict], str], *, wait: float, name: str = "ask_user") -> FunctionTool:
    rec = Recorder()

    def fn(arguments: dict, ctx: ToolContext):
        start = ctx.clock.now()
        rec.calls.append(dict(arguments))
        ctx.work(wait)  # the user takes this long to answer
        rec.times.append((start, ctx.clock.now()))
        return answer(arguments) if callable(answer) else answer

    tool = FunctionTool(ToolSpec(name, "ask the user", kind="ask"), fn, blocking=True)
    tool.recorder = rec  # type: ignore[attr-defined]
    return tool


def searches(*queries: str, tool: str = "search") -> Turn:
    """A coordinator turn that calls `tool` once per query."""
    return Turn(tool_calls=[call(tool, q=q) for q in queries])


@dataclass
class Run:
    loop: ResearchLoop
    provider: ScriptedProvider
    clock: VirtualClock
    trace: TraceWriter
    log: EventLog
    answers: list = field(default_factory=list)

    def run(self, question: str = "What is known?"):
        return self.loop.run(question)

    def requests(self, role: str) -> list:
        return [r for r in self.provider.requests if r.role == role]

    def events(self, type: str) -> list:
        return self.log.of_type(type)


def make_run(turns, tools: Sequence = (), *, clock: VirtualClock | None = None,
             st: ResearchSettings | None = None, config: LoopConfig | None = None,
             workers=None, final=None, context_window: int = 1_000_000, counter=None,
             cancel: CancelToken | None = None, trace_target=None) -> Run:
    clock = clock or VirtualClock()
    provider = ScriptedProvider(turns, clock=clock, workers=workers, final=final,
                                context_window=context_window, counter=counter)
    trace = TraceWriter(trace_target, clock)
    answers: list = []
    loop = ResearchLoop(provider, list(tools), st or settings(), clock=clock, config=config, trace=trace,
                        cancel=cancel, on_answer=lambda text, mode: answers.append((text, mode)))
    return Run(loop, provider, clock, trace, EventLog(trace), answers)


def assert_protocol_complete(result, trace_events: list[dict] | None = None) -> None:
    """Every tool call the coordinator made has exactly one tool result, in
    the messages right after its assistant message, and in the trace."""
    msgs = result.messages
    for i, m in enumerate(msgs):
        if m.role != "assistant" or not m.tool_calls:
            continue
        ids = [c.id for c in m.tool_calls]
        following = []
        for n in msgs[i + 1:]:
            if n.role != "tool":
                break
            following.append(n.tool_call_id)
        assert sorted(following) == sorted(ids), (ids, following)
    all_ids = [c.id for m in msgs if m.role == "assistant" for c in m.tool_calls]
    tool_ids = [m.tool_call_id for m in msgs if m.role == "tool"]
    assert sorted(all_ids) == sorted(tool_ids)
    assert len(set(all_ids)) == len(all_ids)
    if trace_events is not None:
        traced = [e.call_id for e in trace_events if e.TYPE == "tool_result"]
        assert sorted(traced) == sorted(all_ids)


def endless(fn: Callable[[int], Any], limit: int = 400):
    """A coordinator script from `fn(index)`; fails loudly past `limit` turns
    so that a loop that never stops fails the test instead of hanging."""
    def source(request, index: int):
        if index >= limit:
            raise AssertionError(f"the loop asked for coordinator turn {index + 1}; it should have stopped")
        return fn(index)
    return source


def patience_counters(run: "Run") -> list[int]:
    return [e.patience_counter for e in run.events("round_end")]
