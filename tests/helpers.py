"""Shared builders of the tests (on the path by pytest's `pythonpath`): for the
imprint_core tests deterministic evidence text, recording tools, and a one-call
way to build a loop on a virtual clock; for the harness's and the system's
tests synthetic raw runs and a small `imprint regress` repository.

Nothing here sleeps: all time is simulated on a VirtualClock.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

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


# ---- builders the harness's and the system's tests share (the harness is imported where used) ----------------
# OpenAI chat messages and a mini-swe-agent trajectory (the importers' tests, the system's damaged inputs).
def chat_call(cid: str, name: str, args) -> dict:
    """An OpenAI chat tool call (`args` as JSON, or text as it came)."""
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def chat_assistant(*calls: dict, text: str = "") -> dict:
    return {"role": "assistant", "content": text, "tool_calls": list(calls)}


def chat_tool(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def shell_obs(rc: int, output: str) -> str:
    return f"<returncode>{rc}</returncode>\n<output>\n{output}</output>"


def mini_swe(submission: str = "diff --git a/x b/x\n") -> dict:
    """A mini-swe-agent trajectory of six bash rounds, one of them a format error."""
    bash = lambda cid, cmd: chat_call(cid, "bash", {"command": cmd})  # noqa: E731
    return {
        "trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo__demo-1",
        "info": {"exit_status": "Submitted", "submission": submission,
                 "config": {"model": {"model_name": "test/model"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            chat_assistant(bash("c1", "cd /testbed && ls")), chat_tool("c1", shell_obs(0, "a.py\nb.py\n")),
            chat_assistant(bash("c2", "grep -n nothing a.py")), chat_tool("c2", shell_obs(1, "")),
            chat_assistant(bash("c3", "sed -i 's/x/y/' a.py")), chat_tool("c3", shell_obs(0, "")),
            chat_assistant(chat_call("c4", "bash", '{"command": "ls')),
            {"role": "user", "content": "Tool call error: Unterminated string", "extra": {"interrupt_type": "FormatError"}},
            chat_assistant(bash("c5", "python repro.py")),
            chat_tool("c5", shell_obs(1, "Traceback (most recent call last):\n  File \"repro.py\"\nValueError: x\n")),
            chat_assistant(bash("c6", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff")),
            {"role": "exit", "content": submission, "extra": {"exit_status": "Submitted"}},
        ],
    }


# A small repository for `imprint regress` (its tests, the system's refusals and kill trials).
DAY = date(2026, 1, 31)
"""The day `imprint regress add` records in the `repo` fixture."""

CONFIG = """\
[inputs]
traces = ["traces"]
latest_run = false
round_logs = []
labels = ["labels.yaml", "regressions.yaml"]

[premature_stops]
patience = 4
max_premature = 0
# a share-based judgement would let 1 failing regression of 2 pass: the regressions are judged run by run
max_premature_share = 0.5

[divergence]
min_requests = 3
exclude = ["stub"]

[overruns]
max_count = 0
max_overrun_sec = 5.0
"""
"""The `repo` fixture's gate config: patience 4, its regressions judged run by run."""


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch) -> Path:
    """A small repository: a gate config, a passing corpus, no regressions yet (cwd)."""
    from harness.cli import regress as regress_cli
    from harness.realruns.regressionstore import HEADER
    from reportdata import fact, handmade_trace, round_log
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(regress_cli, "today", lambda: DAY)
    (tmp_path / "gate.toml").write_text(CONFIG)
    (tmp_path / "labels.yaml").write_text("runs:\n  lull: {should_not_stop_before: 6}\n")
    (tmp_path / "regressions.yaml").write_text(HEADER)
    good = tmp_path / "traces" / "good"
    handmade_trace(good / "remote.jsonl", provider="remote", provider_kind="remote", ratios=[1.1, 1.2, 1.05, 1.3],
                   header_extra={"server": "llamacpp"}, scenario="fine")
    round_log(good / "lull.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}], [{"result": fact(3)}]])
    return tmp_path


def regress(*args: str) -> int:
    """`imprint regress ARGS` against the `repo` fixture's store, labels and gate config."""
    from harness.cli import main
    return main(["regress", *args, "--store", "traces/regressions", "--labels", "regressions.yaml",
                 "--config", "gate.toml"])


def chat_run(path: Path, results: list[str]) -> Path:
    """An OpenAI chat message list (a raw trajectory): one search round per result."""
    msgs: list[dict] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Find it."}]
    for i, text in enumerate(results):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(msgs))
    return path


def stalled(repo: Path) -> Path:
    """A raw run that repeats itself from round 2: patience 4 stops it at round 5 of 8."""
    from reportdata import fact
    return chat_run(repo / "raw" / "stalled.json", [fact(1)] * 7 + [fact(2)])
