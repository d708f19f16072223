"""Provider `remote` against httpx.MockTransport: SSE assembly, usage, every
fault kind, deadlines and cancellation, and the API key kept out of
everything written. No sleeping: time is a VirtualClock."""
from __future__ import annotations

import io
import json
from typing import Iterator

import httpx
import pytest

from imprint_core import (CancelToken, Done, FunctionTool, LoopConfig, Message, ModelRequest, ProviderError,
                          ResearchLoop, ResearchSettings, StopReason, TextDelta, ToolCallEvent, ToolSpec,
                          TraceWriter, UsageEvent, UserInputError, VirtualClock)
from imprint_core.providers.remote import (API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, RemoteProvider,
                                           parse_retry_after)

BASE = "http://127.0.0.1:9999/v1"
SECRET = "sk-test-DO-NOT-LEAK-4242"
SEARCH = ToolSpec("search", "Search the notes.", {"type": "object", "properties": {"query": {"type": "string"}},
                                                  "required": ["query"]})


# ---- helpers -------------------------------------------------------------------------
def sse(*events: dict | str, done: bool = True) -> bytes:
    out = []
    for e in events:
        out.append("data: " + (e if isinstance(e, str) else json.dumps(e)) + "\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def delta(content: str | None = None, *, tool_calls: list | None = None, finish: str | None = None) -> dict:
    d: dict = {}
    if content is not None:
        d["content"] = content
    if tool_calls is not None:
        d["tool_calls"] = tool_calls
    return {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d,
                                                                          "finish_reason": finish}]}


def usage_chunk(prompt: int, completion: int, cached: int | None = None) -> dict:
    u: dict = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": u}


class Stream(httpx.SyncByteStream):
    """A response body delivered piece by piece; `before(i)` runs before
    piece i (to move the clock or raise), and `closed` tells whether the
    client closed it."""

    def __init__(self, pieces: list[bytes], before=None):
        self.pieces, self.before = pieces, before
        self.delivered = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for i, piece in enumerate(self.pieces):
            if self.before is not None:
                self.before(i)
            self.delivered += 1
            yield piece

    def close(self) -> None:
        self.closed = True


def provider(handler, *, clock=None, stream=True, **kw) -> RemoteProvider:
    return RemoteProvider(BASE, "smol", clock=clock or VirtualClock(), stream=stream,
                          transport=httpx.MockTransport(handler), **kw)


def request(clock, *, deadline: float = 100.0, tools=(SEARCH,), cancel: CancelToken | None = None) -> ModelRequest:
    return ModelRequest([Message("system", "Be brief."), Message("user", "What is X?")], list(tools), 64,
                        deadline, cancel or CancelToken(clock))


def run(p: RemoteProvider, req: ModelRequest) -> list:
    return list(p.generate(req))


def failure(p: RemoteProvider, req: ModelRequest) -> tuple[ProviderError, list]:
    events: list = []
    with pytest.raises(ProviderError) as info:
        for e in p.generate(req):
            events.append(e)
    return info.value, events


# ---- the request ------------------------------------------------------------------------
def test_request_body_headers_and_timeout_bounded_by_deadline():
    seen = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen["url"] = str(req.url)
        seen["body"] = json.loads(req.content)
        seen["auth"] = req.headers.get("authorization")
        seen["timeout"] = req.extensions["timeout"]
        return httpx.Response(200, content=sse(delta("hi", finish="stop"), usage_chunk(10, 1)))

    clock = VirtualClock(1000.0)
    p = provider(handler, clock=clock, api_key=SECRET, request_timeout=60.0)
    events = run(p, request(clock, deadline=1007.5))
    assert seen["url"] == BASE + "/chat/completions"
    body = seen["body"]
    assert body["model"] == "smol" and body["stream"] is True and body["max_tokens"] == 64
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0] == {"type": "function", "function": SEARCH.to_dict()}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert seen["auth"] == f"Bearer {SECRET}"
    # 7.5 s of research time left: no httpx timeout may outlast it
    assert all(v is not None and v <= 7.5 for v in seen["timeout"].values())
    assert isinstance(events[-1], Done)


def test_timeout_is_request_timeout_when_the_deadline_is_far():
    seen = {}

    def handler(req):
        seen.update(req.extensions["timeout"])
        return httpx.Response(200, content=sse(delta("ok", finish="stop")))

    clock = VirtualClock()
    run(provider(handler, clock=clock, request_timeout=30.0, connect_timeout=5.0), request(clock, deadline=500))
    assert seen["read"] == 30.0 and seen["connect"] == 5.0


def test_conversation_with_tool_calls_and_results_is_sent_in_openai_form():
    seen = {}

    def handler(req):
        seen["body"] = json.loads(req.content)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "done"},
                                                      "finish_reason": "stop"}]})

    from imprint_core import ToolCall
    clock = VirtualClock()
    req = request(clock)
    req.messages += [Message("assistant", "", tool_calls=(ToolCall("call_a", "search", {"query": "x"}),
                                                          ToolCall("call_b", "search", {}, invalid_arguments="{bad"))),
                     Message("tool", "result A", tool_call_id="call_a", name="search")]
    run(provider(handler, clock=clock, stream=False), req)
    body = seen["body"]
    assert "stream_options" not in body and body["stream"] is False
    assistant, tool = body["messages"][2], body["messages"][3]
    assert assistant["tool_calls"][0] == {"id": "call_a", "type": "function",
                                          "function": {"name": "search", "arguments": '{"query": "x"}'}}
    assert assistant["tool_calls"][1]["function"]["arguments"] == "{bad"
    assert tool == {"role": "tool", "content": "result A", "tool_call_id": "call_a", "name": "search"}


def test_no_tools_means_no_tools_key_and_tool_choice_only_with_tools():
    bodies = []

    def handler(req):
        bodies.append(json.loads(req.content))
        return httpx.Response(200, content=sse(delta("ok", finish="stop")))

    clock = VirtualClock()
    p = provider(handler, clock=clock, tool_choice="required", temperature=0.0)
    run(p, request(clock, tools=()))
    run(p, request(clock))
    assert "tools" not in bodies[0] and "tool_choice" not in bodies[0]
    assert bodies[1]["tool_choice"] == "required" and bodies[1]["temperature"] == 0.0


# ---- SSE assembly -------------------------------------------------------------------------
def test_streamed_text_and_tool_call_deltas_are_assembled():
    body = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
        delta("Let me "), delta("look."),
        delta(tool_calls=[{"index": 0, "id": "call_1", "type": "function",
                           "function": {"name": "search", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"que'}}]),
        delta(tool_calls=[{"index": 1, "id": "call_2", "type": "function",
                           "function": {"name": "search", "arguments": '{"query": "b"}'}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": 'ry": "a"}'}}]),
        delta(finish="tool_calls"),
        usage_chunk(120, 30, cached=64),
    )
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, content=body), clock=clock), request(clock))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    usage = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_1", "search", {"query": "a"}),
                                                            ("call_2", "search", {"query": "b"})]
    assert usage[0].prompt_tokens == 120 and usage[0].output_tokens == 30 and usage[0].cached_tokens == 64
    assert isinstance(events[-1], Done)


def test_invalid_tool_call_arguments_become_invalid_arguments():
    body = sse(delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "search", "arguments": '{"query": '}}]),
               delta(tool_calls=[{"index": 0, "function": {"arguments": "oops"}}]),
               delta(tool_calls=[{"index": 1, "id": "d", "function": {"name": "search", "arguments": '["a"]'}}]),
               delta(finish="tool_calls"))
    clock = VirtualClock()
    calls = [e.call for e in run(provider(lambda r: httpx.Response(200, content=body), clock=clock), request(clock))
             if isinstance(e, ToolCallEvent)]
    assert calls[0].invalid_arguments == '{"query": oops' and calls[0].arguments == {}
    assert calls[1].invalid_arguments == '["a"]'  # JSON, but not an object


def test_missing_call_ids_get_deterministic_ids_and_empty_arguments_are_an_empty_object():
    body = sse(delta(tool_calls=[{"index": 0, "function": {"name": "search", "arguments": ""}}]),
               delta(finish="tool_calls"))
    clock = VirtualClock()
    ids = []
    for _ in range(2):
        calls = [e.call for e in run(provider(lambda r: httpx.Response(200, content=body), clock=clock),
                                     request(clock)) if isinstance(e, ToolCallEvent)]
        assert calls[0].arguments == {} and calls[0].invalid_arguments is None
        ids.append(calls[0].id)
    assert ids[0] == ids[1] and ids[0].startswith("call_0_")


def test_sse_comments_multiline_data_crlf_and_no_trailing_blank_line():
    raw = (b": keep-alive\r\n\r\nevent: message\r\ndata: {\"choices\": [{\"index\": 0, \r\n"
           b"data: \"delta\": {\"content\": \"hey\"}, \"finish_reason\": \"stop\"}]}\r\n\r\n"
           b"data: [DONE]")
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, content=raw), clock=clock), request(clock))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hey"] and isinstance(events[-1], Done)


def test_usage_in_the_last_chunk_without_done_marker_is_complete():
    # transformers serve: the last chunk carries usage, there is no [DONE]
    body = sse(delta("a"), delta("b", finish="stop"), usage_chunk(7, 2), done=False)
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, content=body), clock=clock), request(clock))
    assert [e.usage.prompt_tokens for e in events if isinstance(e, UsageEvent)] == [7]
    assert isinstance(events[-1], Done)


def test_usage_absent_is_not_reported_never_invented():
    # llama.cpp: [DONE] and no usage
    body = sse(delta("a"), delta("b", finish="stop"))
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, content=body), clock=clock), request(clock))
    assert not [e for e in events if isinstance(e, UsageEvent)] and isinstance(events[-1], Done)


def test_partial_usage_keeps_missing_fields_none():
    body = sse(delta("a", finish="stop"), {"choices": [], "usage": {"prompt_tokens": 5}})
    clock = VirtualClock()
    (usage,) = [e.usage for e in run(provider(lambda r: httpx.Response(200, content=body), clock=clock),
                                     request(clock)) if isinstance(e, UsageEvent)]
    assert usage.prompt_tokens == 5 and usage.output_tokens is None and usage.cached_tokens is None


def test_non_streaming_response_with_tool_calls_and_usage():
    payload = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "search", "arguments": '{"query": "q"}'}},
            {"id": "t2", "type": "function", "function": {"name": "search", "arguments": "not json"}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}}}
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, json=payload), clock=clock, stream=False), request(clock))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls[0].arguments == {"query": "q"} and calls[1].invalid_arguments == "not json"
    (usage,) = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert (usage.prompt_tokens, usage.output_tokens, usage.cached_tokens) == (50, 9, 0)
    assert not [e for e in events if isinstance(e, TextDelta)]


def test_non_streaming_without_usage_reports_none():
    payload = {"choices": [{"message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}
    clock = VirtualClock()
    events = run(provider(lambda r: httpx.Response(200, json=payload), clock=clock, stream=False), request(clock))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["fine"]
    assert not [e for e in events if isinstance(e, UsageEvent)]


# ---- faults --------------------------------------------------------------------------------
def test_http_429_is_retryable_not_processed_with_retry_after():
    clock = VirtualClock()
    p = provider(lambda r: httpx.Response(429, headers={"Retry-After": "3"}, json={"error": {"message": "slow"}}),
                 clock=clock)
    err, _ = failure(p, request(clock))
    assert (err.kind, err.processed, err.retryable, err.retry_after, err.status) == ("http_429", False, True, 3.0, 429)
    assert "slow" in str(err)


def test_retry_after_http_date_and_garbage():
    from datetime import datetime, timezone
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:05 GMT", now=now) == 5.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert parse_retry_after("-4") == 0.0


def test_http_5xx_is_retryable_and_processed():
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(503, text="overloaded"), clock=clock), request(clock))
    assert (err.kind, err.processed, err.retryable, err.status) == ("http_5xx", True, True, 503)
    assert "overloaded" in str(err)


def test_http_4xx_is_not_retryable():
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(400, json={"error": {"message": "context too long"}}),
                              clock=clock), request(clock))
    assert (err.kind, err.processed, err.retryable) == ("http_4xx", False, False) and "context too long" in str(err)


def test_connect_error_is_retryable_and_not_processed():
    def handler(req):
        raise httpx.ConnectError("connection refused", request=req)

    clock = VirtualClock()
    err, _ = failure(provider(handler, clock=clock), request(clock))
    assert (err.kind, err.processed, err.retryable) == ("connection", False, True)


def test_reset_mid_response_is_retryable_and_processed():
    def before(i):
        if i == 2:
            raise httpx.ReadError("connection reset by peer")

    pieces = [sse(delta("par"), done=False), sse(delta("tial"), done=False), b"never"]
    clock = VirtualClock()
    err, events = failure(provider(lambda r: httpx.Response(200, stream=Stream(pieces, before)), clock=clock),
                          request(clock))
    assert (err.kind, err.processed, err.retryable) == ("connection", True, True)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "partial"


def test_read_timeout_is_processed():
    def handler(req):
        raise httpx.ReadTimeout("timed out", request=req)

    clock = VirtualClock()
    err, _ = failure(provider(handler, clock=clock, request_timeout=10.0), request(clock, deadline=500))
    assert (err.kind, err.processed, err.retryable) == ("timeout", True, True)  # own timeout: retryable
    err, _ = failure(provider(handler, clock=clock, request_timeout=10.0), request(clock, deadline=5))
    assert (err.kind, err.processed, err.retryable) == ("timeout", True, False)  # the deadline's: not


def test_connect_timeout_is_not_processed():
    def handler(req):
        raise httpx.ConnectTimeout("timed out", request=req)

    clock = VirtualClock()
    err, _ = failure(provider(handler, clock=clock), request(clock))
    assert (err.kind, err.processed) == ("timeout", False)


def test_read_timeout_mid_stream():
    def before(i):
        if i == 1:
            raise httpx.ReadTimeout("timed out")

    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(200, stream=Stream([sse(delta("a"), done=False), b""],
                                                                           before)), clock=clock), request(clock))
    assert (err.kind, err.processed) == ("timeout", True)


@pytest.mark.parametrize("stream", [True, False])
def test_malformed_json(stream):
    body = b"data: {not json\n\n" if stream else b"<html>oops</html>"
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(200, content=body), clock=clock, stream=stream),
                     request(clock))
    assert (err.kind, err.processed, err.retryable) == ("malformed_json", True, False)


def test_error_object_in_a_200_stream():
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(200, content=sse({"error": {"message": "boom"}})),
                              clock=clock), request(clock))
    assert err.kind == "response_error" and "boom" in str(err)


def test_stream_cut_before_its_end_drops_partial_tool_calls():
    body = sse(delta("thinking"), delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "search",
                                                                                        "arguments": '{"q'}}]),
               done=False)
    clock = VirtualClock()
    err, events = failure(provider(lambda r: httpx.Response(200, content=body), clock=clock), request(clock))
    assert (err.kind, err.processed, err.retryable) == ("stream_cut", True, True)
    assert not [e for e in events if isinstance(e, ToolCallEvent)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["thinking"]


def test_empty_stream_is_cut():
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(200, content=b""), clock=clock), request(clock))
    assert err.kind == "stream_cut"


@pytest.mark.parametrize("stream", [True, False])
def test_empty_choices(stream):
    body = sse(usage_chunk(3, 0)) if stream else json.dumps({"choices": [], "usage": {"prompt_tokens": 3}}).encode()
    clock = VirtualClock()
    err, _ = failure(provider(lambda r: httpx.Response(200, content=body), clock=clock, stream=stream),
                     request(clock))
    assert (err.kind, err.processed) == ("empty_choices", True)


# ---- deadline and cancellation --------------------------------------------------------------
def test_deadline_checked_on_every_chunk_stops_reading_and_closes():
    clock = VirtualClock()
    pieces = [sse(delta(f"w{i} "), done=False) for i in range(10)] + [sse(delta(finish="stop"))]
    body = Stream(pieces, before=lambda i: clock.advance(1.0))
    req = request(clock, deadline=3.5)
    events = run(provider(lambda r: httpx.Response(200, stream=body), clock=clock), req)
    assert body.delivered <= 4 and body.closed
    assert not isinstance(events[-1], Done) and events[-1] == TextDelta("")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "w0 w1 w2 "


def test_cancel_checked_on_every_chunk():
    clock = VirtualClock()
    cancel = CancelToken(clock)
    pieces = [sse(delta(f"w{i} "), done=False) for i in range(10)] + [sse(delta(finish="stop"))]
    body = Stream(pieces, before=lambda i: cancel.cancel() if i == 2 else None)
    events = run(provider(lambda r: httpx.Response(200, stream=body), clock=clock), request(clock, cancel=cancel))
    assert body.delivered == 3 and body.closed and not isinstance(events[-1], Done)


def test_on_chunk_hook_can_move_a_virtual_clock_past_the_deadline():
    clock = VirtualClock()
    body = sse(*[delta(f"t{i}") for i in range(6)], delta(finish="stop"))
    p = provider(lambda r: httpx.Response(200, content=body), clock=clock, on_chunk=lambda n: clock.advance(1.0))
    events = run(p, request(clock, deadline=2.5))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["t0", "t1", ""]


def test_nothing_is_sent_after_the_deadline_or_when_cancelled():
    sent = []
    clock = VirtualClock(10.0)
    p = provider(lambda r: sent.append(r) or httpx.Response(200, content=sse(delta("x", finish="stop"))), clock=clock)
    err, _ = failure(p, request(clock, deadline=10.0))
    assert (err.kind, err.processed, err.retryable) == ("timeout", False, False)
    cancel = CancelToken(clock)
    cancel.cancel()
    err, _ = failure(p, request(clock, cancel=cancel))
    assert (err.kind, err.processed) == ("cancelled", False)
    assert sent == []


# ---- configuration and secrets --------------------------------------------------------------
@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "file:///etc/passwd", "127.0.0.1:8000/v1", "",
                                 "http://", "ws://127.0.0.1:1/v1", "http://user:pw@127.0.0.1/v1"])
def test_only_http_and_https_base_urls(url):
    with pytest.raises(UserInputError) as info:
        RemoteProvider(url, "m", clock=VirtualClock())
    assert info.value.key == "base_url" and "pw" not in str(info.value)


def test_https_base_url_and_trailing_slash():
    p = RemoteProvider("https://api.example.test/v1/", "m", clock=VirtualClock())
    assert p.url == "https://api.example.test/v1/chat/completions"
    p.close()


def test_api_key_from_environment(monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    seen = {}

    def handler(req):
        seen["auth"] = req.headers.get("authorization")
        return httpx.Response(200, content=sse(delta("x", finish="stop")))

    clock = VirtualClock()
    p = provider(handler, clock=clock)
    run(p, request(clock))
    assert seen["auth"] == f"Bearer {SECRET}" and SECRET not in repr(p)


def test_base_url_and_model_from_environment(monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:8011/v1")
    monkeypatch.setenv(MODEL_ENV, "smol")
    p = RemoteProvider.from_env(clock=VirtualClock())
    assert (p.url, p.model) == ("http://127.0.0.1:8011/v1/chat/completions", "smol")
    p.close()
    monkeypatch.delenv(MODEL_ENV)
    with pytest.raises(UserInputError, match=MODEL_ENV):
        RemoteProvider.from_env(clock=VirtualClock())


def test_no_key_no_authorization_header(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    seen = {}

    def handler(req):
        seen["auth"] = req.headers.get("authorization")
        return httpx.Response(200, content=sse(delta("x", finish="stop")))

    clock = VirtualClock()
    run(provider(handler, clock=clock), request(clock))
    assert seen["auth"] is None


def tools_for_loop():
    return [FunctionTool(SEARCH, lambda args, ctx: f"Notes about {args['query']}: fact {len(args['query'])}.")]


def test_the_key_never_reaches_the_trace_even_when_the_server_echoes_it():
    calls = {"n": 0}

    def handler(req):
        calls["n"] += 1
        auth = req.headers["authorization"]
        if calls["n"] == 1:  # a hostile/buggy server echoing the credential back
            return httpx.Response(500, json={"error": {"message": f"bad header {auth}"}})
        if calls["n"] == 2:
            return httpx.Response(200, content=sse(delta(tool_calls=[
                {"index": 0, "id": "c1", "function": {"name": "search", "arguments": '{"query": "x"}'}}]),
                delta(finish="tool_calls"), usage_chunk(40, 5)))
        return httpx.Response(200, content=sse(delta(f"answer {auth}", finish="stop"), usage_chunk(60, 4)))

    clock = VirtualClock()
    out = io.StringIO()
    trace = TraceWriter(out, clock)
    p = provider(handler, clock=clock, api_key=SECRET)
    loop = ResearchLoop(p, tools_for_loop(), ResearchSettings(), clock=clock, trace=trace,
                        config=LoopConfig(retry_backoff_sec=0.5))
    result = loop.run("What is X?")
    text = out.getvalue()
    assert calls["n"] == 3 and result.stop_reason is StopReason.ANSWERED
    assert "[api key]" in text  # the 500's message was scrubbed, not dropped
    assert SECRET not in text.replace(result.answer, "")  # only the model's own output could hold it
    assert SECRET not in repr(p)


# ---- the loop handles every fault ---------------------------------------------------------------
def test_loop_honours_retry_after_within_the_deadline_without_sleeping():
    responses = [httpx.Response(429, headers={"Retry-After": "2"}),
                 httpx.Response(200, content=sse(delta("done", finish="stop"), usage_chunk(30, 1)))]
    clock = VirtualClock()
    out = io.StringIO()
    loop = ResearchLoop(provider(lambda r: responses.pop(0), clock=clock), tools_for_loop(), ResearchSettings(),
                        clock=clock, trace=TraceWriter(out, clock))
    result = loop.run("Q?")
    retry = [json.loads(l) for l in out.getvalue().splitlines() if '"request_retry"' in l]
    assert result.answer == "done" and retry[0]["wait"] == 2.0 and clock.now() == 2.0
    first = result.records[0]
    assert first.outcome == "unsent" and first.charged == 0  # 429: never processed, refunded whole
    assert result.records[1].measured_prompt == 30


@pytest.mark.parametrize("fault", ["http_5xx", "connection", "timeout", "malformed_json", "stream_cut",
                                   "empty_choices", "invalid_args"])
def test_no_fault_crashes_a_run(fault):
    def bad(req):
        if fault == "http_5xx":
            return httpx.Response(500, text="internal")
        if fault == "connection":
            raise httpx.ConnectError("refused", request=req)
        if fault == "timeout":
            raise httpx.ReadTimeout("slow", request=req)
        if fault == "malformed_json":
            return httpx.Response(200, content=b"data: {oops\n\n")
        if fault == "stream_cut":
            return httpx.Response(200, content=sse(delta("par"), done=False))
        if fault == "empty_choices":
            return httpx.Response(200, content=sse({"choices": []}, usage_chunk(1, 0)))
        return httpx.Response(200, content=sse(delta(tool_calls=[
            {"index": 0, "id": "c9", "function": {"name": "search", "arguments": "{nope"}}]), delta(finish="tool_calls")))

    n = {"i": 0}

    def handler(req):
        n["i"] += 1
        if n["i"] == 1:
            return bad(req)
        return httpx.Response(200, content=sse(delta("final answer", finish="stop")))

    clock = VirtualClock()
    loop = ResearchLoop(provider(handler, clock=clock), tools_for_loop(), ResearchSettings(), clock=clock,
                        config=LoopConfig(max_retries=0))
    result = loop.run("Q?")
    assert result.answer == "final answer" and result.stop_reason is StopReason.ANSWERED
    if fault == "invalid_args":
        assert result.rounds == 2 and result.records[0].outcome == "ok"
    else:  # a refused connection never reached the server: nothing to charge
        assert result.records[0].outcome == ("unsent" if fault == "connection" else "error")


def test_loop_time_budget_stop_during_a_remote_stream():
    clock = VirtualClock()
    pieces = [sse(delta(f"w{i} "), done=False) for i in range(50)] + [sse(delta(finish="stop"))]
    bodies: list[Stream] = []

    def handler(req):
        bodies.append(Stream(pieces, before=lambda i: clock.advance(1.0)))
        return httpx.Response(200, stream=bodies[-1])

    loop = ResearchLoop(provider(handler, clock=clock), tools_for_loop(),
                        ResearchSettings(research_timeout_sec=10), clock=clock)
    result = loop.run("Q?")
    assert result.stop_reason is StopReason.TIME_BUDGET and bodies[0].closed and bodies[0].delivered == 10
    assert result.records[0].outcome == "cut"
    assert len(bodies) == 2 and bodies[1].delivered == len(pieces)  # the final request has its own deadline


# ---- the whole request's time limit ------------------------------------------------------------
class Wall:
    """An injected wall clock (the one httpx's timeouts run on)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_trickling_bytes_cannot_hold_a_request_past_its_limit(stream):
    """One byte every 0.5 s, no newline: a per-read timeout never fires; the
    whole request's limit (here the request timeout, the deadline being far)
    is checked on every chunk."""
    clock, wall = VirtualClock(), Wall()
    body = Stream([b"d"] * 1_000, before=lambda i: setattr(wall, "t", wall.t + 0.5))
    p = provider(lambda r: httpx.Response(200, stream=body), clock=clock, stream=stream, request_timeout=10.0)
    p.wall = wall
    err, _ = failure(p, request(clock, deadline=1_000.0))
    assert err.kind == "timeout" and err.retryable and err.processed
    assert body.delivered == 20 and body.closed and wall.t == 10.0


def test_a_trickling_non_streamed_body_stops_at_the_deadline():
    clock = VirtualClock()
    body = Stream([b"d"] * 1_000, before=lambda i: clock.advance(0.5))
    err, _ = failure(provider(lambda r: httpx.Response(200, stream=body), clock=clock, stream=False),
                     request(clock, deadline=10.0))
    assert err.kind == "timeout" and not err.retryable and body.delivered == 20


def test_lines_split_across_chunks_as_iter_lines_splits_them():
    from imprint_core.providers._openai_stream import split_lines
    text = b"data: a\r\n\r\ndata: b\rdata: c\n\n: keep\ndata: \xc3\xa9\r"
    expected = list(httpx.Response(200, content=text).iter_lines())
    assert "data: b" in expected and "data: é" in expected
    for size in (1, 2, 3, len(text)):
        chunks = [text[i:i + size] for i in range(0, len(text), size)]
        assert list(split_lines(chunks)) == expected


def test_a_real_server_trickling_bytes_is_cut_at_the_research_deadline():
    """A local HTTP server on 127.0.0.1 sends headers, then one byte every
    0.2 s without a newline. The research deadline is 1 s away on the real
    clock: the request ends at the deadline, not when the server stops."""
    import socket
    import threading
    import time

    from imprint_core.clock import MonotonicClock

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.recv(65_536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            for _ in range(50):          # 10 s at most, whatever the client does
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(b"d")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    clock = MonotonicClock()
    p = RemoteProvider(f"http://127.0.0.1:{server.getsockname()[1]}/v1", "m", clock=clock, stream=True)
    started = time.monotonic()
    try:
        events = list(p.generate(request(clock, deadline=clock.now() + 1.0)))
    finally:
        stop.set()
        p.close()
        server.close()
    elapsed = time.monotonic() - started
    assert events == [TextDelta("")]            # interrupted at the deadline: no Done
    assert 0.9 <= elapsed < 1.6
