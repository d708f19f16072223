"""The smoke sessions: a tiny end-to-end research run against a real server
(`imprint smoke`), recorded into cassettes streamed and not streamed, replayed
offline, and what it measured (`estimate_figures`: the byte estimate against
the server's prompt counts, by `ratios.ratio_stats`).
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from imprint_core.types import TokenCounter

from ..ratios import ratio_stats
from .recording import Target, record_session, replay_session, transport

SMOKE_QUESTION = "When was the Eiffel Tower completed, and how tall is it? Search before you answer."
SMOKE_CORPUS = {
    "eiffel": "The Eiffel Tower in Paris was completed in March 1889 for the World's Fair.",
    "tall": "The Eiffel Tower is 330 metres tall including its antennas.",
    "height": "The Eiffel Tower is 330 metres tall including its antennas.",
    "paris": "Paris is the capital of France.",
}
SMOKE_TOOL = ("search", "Search the encyclopedia. Returns short passages.",
              {"type": "object", "properties": {"query": {"type": "string", "description": "what to look up"}},
               "required": ["query"]})


def smoke_search(arguments: dict, ctx: Any) -> str:
    """A scripted, deterministic search over a four-line corpus."""
    query = str(arguments.get("query", "")).lower()
    hits = [text for key, text in SMOKE_CORPUS.items() if key in query]
    return "\n\n".join(dict.fromkeys(hits)) if hits else ""


class _ByteTap(TokenCounter):
    """The byte estimate, remembering the size of the last prompt it counted."""

    def __init__(self, inner):
        self.inner, self.name, self.last_bytes = inner, inner.name, 0

    def prompt_units(self, messages, tools):
        units = self.inner.prompt_units(messages, tools)
        self.last_bytes = len(units)
        return units

    def output_units(self, reply):
        return self.inner.output_units(reply)

    def to_tokens(self, units):
        return self.inner.to_tokens(units)


def smoke_session(target: Target, *, stream: bool = True, clock: Any = None, trace: Any = None,
                  tool_choice: Any = "auto-forced", temperature: Any = "auto", api_key: str | None = None):
    """A small ResearchLoop run against `target` with the scripted search
    tool: RemoteProvider (streamed or not), 2 rounds of patience, 128 output
    tokens a request. On llama.cpp the search tool is forced (the 135M model
    rarely calls it on its own); transformers serve ignores tool_choice.
    Adds a `prompt_bytes` trace event beside each reservation, so estimates
    can be compared with the server's counts exactly."""
    from imprint_core import (ByteEstimateCounter, FunctionTool, LoopConfig, MonotonicClock, ResearchLoop,
                              ResearchSettings, ToolSpec, TraceWriter)
    from imprint_core.events import Event, FinalRequest, PromptBytes, RequestReserved
    from imprint_core.providers.remote import RemoteProvider
    clock = clock or MonotonicClock()
    trace = trace or TraceWriter(None, clock)
    if tool_choice == "auto-forced":
        tool_choice = {"type": "function", "function": {"name": "search"}} if target.server == "llamacpp" else None
    extra_body, max_output = None, 128
    if temperature == "auto":  # greedy where calls are grammar-forced; sampled where a bad call is retried
        temperature = 0.0 if target.server == "llamacpp" else None
        if target.server == "transformers":
            # transformers serve samples only when its generation config says so; a
            # request's generation_config replaces the model's, so it names the ids too.
            extra_body = {"generation_config": json.dumps({
                "do_sample": True, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 256,
                "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2})}
            max_output = 256  # room to close a <tool_call> after some prose
    tap = _ByteTap(ByteEstimateCounter())
    provider = RemoteProvider(target.base_url, target.model, clock=clock, stream=stream, api_key=api_key,
                              transport=transport(), counter=tap, context_window=4096, temperature=temperature,
                              tool_choice=tool_choice, extra_body=extra_body, request_timeout=90.0,
                              name=f"remote:{target.server or 'server'}")

    def on_event(event: Event) -> None:
        if isinstance(event, RequestReserved):
            trace.write(PromptBytes(id=event.id, bytes=tap.last_bytes))
        elif isinstance(event, FinalRequest):
            trace.write(PromptBytes(id="final", bytes=tap.last_bytes))

    trace.subscribe(on_event)
    settings = ResearchSettings(research_timeout_sec=600, research_token_budget=16_384,
                                research_no_progress_rounds=2, max_tokens=128)
    tools = [FunctionTool(ToolSpec(*SMOKE_TOOL), smoke_search)]
    try:
        return ResearchLoop(provider, tools, settings, clock=clock, trace=trace,
                            config=LoopConfig(research_max_output_tokens=max_output)).run(SMOKE_QUESTION)
    finally:
        provider.close()


def estimate_figures(trace_paths: list[str | os.PathLike]) -> dict[str, Any]:
    """Byte estimate against the server's measured prompt tokens, over every
    request (research and final) whose usage was reported: median and p95 of
    estimate/measured, the fraction under-counted, and the largest
    bytes-per-token ratio that would not under-count any of them."""
    from imprint_core.events import FinalSettled, PromptBytes, RequestSettled
    from imprint_core.trace import read_trace
    rows = []
    for p in trace_paths:
        trace = read_trace(p)
        sizes = {e.id: e.bytes for e in trace.of_type(PromptBytes)}
        for e in trace.of_type(RequestSettled) + trace.of_type(FinalSettled):
            if e.measured_prompt:
                key = e.id if isinstance(e, RequestSettled) else "final"
                rows.append((e.estimated_prompt, e.measured_prompt, sizes.get(key)))
    if not rows:
        return {"requests": 0}
    st = ratio_stats(est / meas for est, meas, _ in rows)
    per_token = ratio_stats(b / m for _, m, b in rows if b)
    return {"requests": st.count, "median": round(st.median, 3), "p95": round(st.p95, 3),
            "under_fraction": round(st.under, 3),
            "safe_bytes_per_token": round(per_token.lowest, 3) if per_token else None,
            "bytes_per_measured_token_median": round(per_token.median, 3) if per_token else None}


def record_smoke(server_kind: str, out_dir: str | os.PathLike, *, base_url: str | None = None,
                 port: int | None = None, attempts: int = 2,
                 progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Record the smoke session streamed and not streamed against one server
    run: `<out_dir>/<kind>/smoke-stream.yaml` and `smoke-nostream.yaml`, each
    with its trace (`.trace.jsonl`) beside it. A sampled model may answer
    without searching: a session is recorded again (up to `attempts` times)
    until it ran at least one tool round. Returns measured figures."""
    from imprint_core import EventLog, MonotonicClock, TraceWriter
    from . import servers
    out = Path(out_dir) / server_kind
    figures: dict[str, Any] = {"server": server_kind}
    with contextlib.ExitStack() as stack:
        if base_url is None:
            running = stack.enter_context(servers.server(server_kind, port, progress=progress))
            base_url = running.base_url
            figures["ready_seconds"] = round(running.ready_seconds, 2)
        traces = []
        for name, stream in (("smoke-stream", True), ("smoke-nostream", False)):
            trace_path = out / f"{name}.trace.jsonl"
            for attempt in range(1, attempts + 1):
                clock = MonotonicClock()
                with TraceWriter(trace_path, clock, meta={"server": server_kind, "stream": stream}) as trace:
                    calls = EventLog(trace)
                    rec = record_session(out / f"{name}.yaml", server_kind,
                                         lambda t: smoke_session(t, stream=stream, clock=clock, trace=trace),
                                         base_url=base_url, progress=progress)
                result = rec.result
                if result.rounds and calls.of_type("tool_call"):
                    break
                progress(f"{name}: attempt {attempt} ran no tool round" + ("; recording again" if attempt < attempts
                                                                           else "; keeping it"))
            figures.setdefault("attempts", {})[name] = attempt
            traces.append(trace_path)
            usage = [r.measured_prompt is not None for r in result.records + result.final_records]
            figures[name] = {"interactions": rec.interactions, "stop": result.stop_reason.value,
                             "final_mode": result.final_mode.value, "rounds": result.rounds,
                             "usage_reported": f"{sum(usage)}/{len(usage)}"}
        figures["estimate"] = estimate_figures(traces)
    return figures


def replay_smoke(cassette_path: str | os.PathLike, *, server: str | None = None, stream: bool | None = None):
    """Replay a smoke cassette offline with a virtual clock; returns the
    ResearchResult."""
    from imprint_core import VirtualClock
    path = Path(cassette_path)
    stream = ("nostream" not in path.name) if stream is None else stream
    return replay_session(path, lambda t: smoke_session(t, stream=stream, clock=VirtualClock()), server=server)
