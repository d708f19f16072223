"""vcrpy record/replay helpers: a real HTTP server on 127.0.0.1 (a tiny fake
of an OpenAI endpoint in a thread) is recorded through httpx's real
transport, then replayed strictly without it."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from harness.live.recording import transport as recording_transport
from harness.live.recording import (REPLAY_PORT, CassetteError, Target, cassette, cassette_target, first_difference,
                               interactions, replay_session)
from imprint_core import (Done, FunctionTool, Message, ModelRequest, CancelToken, ResearchLoop, ResearchSettings,
                          StopReason, TextDelta, ToolCallEvent, ToolSpec, TraceWriter, UsageEvent, VirtualClock)
from imprint_core.loop import DEFAULT_SYSTEM
from imprint_core.providers.remote import RemoteProvider

SECRET = "sk-recording-secret-777"
SEARCH = ToolSpec("search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}},
                                        "required": ["query"]})


def sse(*chunks: dict, done: bool = True) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)  # CRLF, as sse-starlette writes
    return (body + ("data: [DONE]\r\n\r\n" if done else "")).encode()


def content(text, finish=None):
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def tool_call(call_id, args):
    return {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "search", "arguments": args}}]},
        "finish_reason": None}]}


class FakeServer:
    """Answers POST /v1/chat/completions from a list, one reply per request."""

    def __init__(self, replies: list[bytes]):
        self.replies = list(replies)
        self.seen: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                outer.seen.append({"path": self.path, "auth": self.headers.get("authorization"),
                                   "body": json.loads(self.rfile.read(length))})
                body = outer.replies.pop(0)
                if body is None:  # drop the connection without an answer
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Set-Cookie", "session=abc")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    servers = []

    def make(replies):
        servers.append(FakeServer(replies))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def session(target: Target, *, api_key: str | None = None, trace=None):
    """A two-round ResearchLoop run with a scripted tool."""
    clock = VirtualClock()
    provider = RemoteProvider(target.base_url, target.model, clock=clock, api_key=api_key,
                              transport=recording_transport())
    tools = [FunctionTool(SEARCH, lambda args, ctx: f"Result for {args['query']}: the sky is blue.")]
    result = ResearchLoop(provider, tools, ResearchSettings(), clock=clock,
                          trace=TraceWriter(trace, clock) if trace is not None else None).run("Why is the sky blue?")
    provider.close()
    return result


REPLIES = [sse(tool_call("call_x", '{"query": '), tool_call("", '"sky"}'),
               {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
               {"choices": [], "usage": {"prompt_tokens": 80, "completion_tokens": 9}}),
           sse(content("Rayleigh "), content("scattering.", finish="stop"))]


@pytest.fixture
def recorded(fake, tmp_path) -> Path:
    """A cassette of the two-round session, recorded from a fake server that is gone again."""
    path = tmp_path / "c.yaml"
    server, _ = record(fake, path)
    server.close()
    return path


def record(fake, path: Path, replies=REPLIES):
    server = fake(replies)
    with cassette(path, mode="all") as cas:
        result = session(Target(server.base_url, "smol"), api_key=SECRET)
        assert len(cas) == 2
    return server, result


def test_record_then_replay_strictly_without_the_server(fake, tmp_path):
    path = tmp_path / "c.yaml"
    server, live = record(fake, path)
    assert live.answer == "Rayleigh scattering." and live.stop_reason is StopReason.ANSWERED
    assert server.seen[0]["auth"] == f"Bearer {SECRET}"
    server.close()  # nothing is listening any more
    replayed = replay_session(path, session)
    assert replayed.answer == live.answer and replayed.rounds == live.rounds
    assert [r.measured_prompt for r in replayed.records] == [80, None]  # usage, then none reported


def test_the_cassette_is_readable_and_holds_no_secret(recorded, tmp_path):
    path = recorded
    text = path.read_text()
    assert SECRET not in text and "session=abc" not in text and "authorization" not in text.lower()
    assert "\r" not in text  # SSE stored with LF line ends
    (req, resp), _ = interactions(path)
    assert req["uri"] == f"http://127.0.0.1:{REPLAY_PORT}/v1/chat/completions"
    assert req["headers"]["host"] == [f"127.0.0.1:{REPLAY_PORT}"]
    assert '"content": "Why is the sky blue?"' in req["body"]  # indented JSON, one field a line
    assert "body:\n      string: |" in text or "string: |" in text  # literal blocks, not escaped one-liners
    assert resp["body"]["string"].startswith("data: {")


def test_replay_matches_whatever_port_the_replay_uses(recorded, tmp_path):
    path = recorded
    with cassette(path, mode="none"):
        result = session(Target("http://127.0.0.1:59999/v1", "smol"))
    assert result.answer == "Rayleigh scattering."
    assert cassette_target(path) == Target(f"http://127.0.0.1:{REPLAY_PORT}/v1", "smol", tmp_path.name)


def test_a_request_the_cassette_lacks_names_cassette_and_request(recorded, tmp_path):
    path = recorded
    with pytest.raises(CassetteError) as info:
        with cassette(path, mode="none"):
            clock = VirtualClock()
            session_q = ResearchLoop(RemoteProvider("http://127.0.0.1:5/v1", "smol", clock=clock), [],
                                     ResearchSettings(), clock=clock)
            session_q.run("A different question?")
    msg = str(info.value)
    assert str(path) in msg and "POST http://127.0.0.1" in msg and "A different question?" in msg
    assert "body.messages[1].content" in msg  # where the closest recorded request differs


def test_unplayed_interactions_fail_the_replay(recorded, tmp_path):
    path = recorded
    with pytest.raises(CassetteError) as info:
        with cassette(path, mode="none"):
            clock = VirtualClock()
            p = RemoteProvider("http://127.0.0.1:5/v1", "smol", clock=clock)
            # only the first request of the two recorded ones
            list(p.generate(ModelRequest([Message("system", DEFAULT_SYSTEM),
                                          Message("user", "Why is the sky blue?")], [SEARCH], 512, 100.0,
                                         CancelToken(clock))))
    msg = str(info.value)
    assert str(path) in msg and "1 of 2" in msg and "#2: POST" in msg


def test_playback_repeats_are_refused(recorded, tmp_path):
    path = recorded
    clock = VirtualClock()
    req = ModelRequest([Message("system", DEFAULT_SYSTEM), Message("user", "Why is the sky blue?")],
                       [SEARCH], 512, 100.0, CancelToken(clock))
    with pytest.raises(CassetteError) as info:
        with cassette(path, mode="none"):
            p = RemoteProvider("http://127.0.0.1:5/v1", "smol", clock=clock)
            list(p.generate(req))
            list(p.generate(req))  # the same request again
    assert "already played" in str(info.value)


def test_a_swallowed_mismatch_still_fails_at_exit(recorded, tmp_path):
    path = recorded
    with pytest.raises(CassetteError) as info:
        with cassette(path, mode="none"):
            try:  # as a section-worker thread's tool wrapper would
                session(Target("http://127.0.0.1:5/v1", "other-model"))
            except Exception:
                pass
    assert "other-model" in str(info.value) or "body.model" in str(info.value)


def test_json_bodies_match_regardless_of_key_order_and_spacing(recorded, tmp_path):
    path = recorded
    data = yaml.safe_load(path.read_text())
    for item in data["interactions"]:  # rewrite each recorded body compactly, keys reversed
        body = json.loads(item["request"]["body"])
        item["request"]["body"] = json.dumps(dict(reversed(list(body.items()))), separators=(",", ":"))
    path.write_text(yaml.safe_dump(data))
    assert replay_session(path, session).answer == "Rayleigh scattering."


def test_missing_cassette_in_mode_none(tmp_path):
    with pytest.raises(CassetteError, match="does not exist"):
        with cassette(tmp_path / "nope.yaml", mode="none"):
            pass


def test_mode_once_records_then_replays(fake, tmp_path):
    path = tmp_path / "c.yaml"
    server = fake(list(REPLIES))
    with cassette(path, mode="once"):
        session(Target(server.base_url, "smol"))
    server.close()
    with cassette(path, mode="once"):
        assert session(Target(server.base_url, "smol")).answer == "Rayleigh scattering."


def test_first_difference():
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "body.a[1].b: 2 != 3"
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == "body.c: missing != 2"
    assert first_difference([1], [1, 2]) == "body: 1 items != 2 items"
    assert first_difference({"x": 1}, {"x": 1}) is None


def test_streamed_replay_is_read_chunk_by_chunk_so_deadlines_apply(fake, tmp_path):
    path = tmp_path / "c.yaml"
    server = fake([sse(*[content(f"w{i} ") for i in range(20)], content("", finish="stop"))])
    clock = VirtualClock()
    req = ModelRequest([Message("user", "count")], [], 64, 5.5, CancelToken(clock))
    with cassette(path, mode="all"):
        list(RemoteProvider(server.base_url, "smol", clock=VirtualClock()).generate(req))
    server.close()
    with cassette(path, mode="none"):
        p = RemoteProvider("http://127.0.0.1:5/v1", "smol", clock=clock, on_chunk=lambda n: clock.advance(1.0))
        events = list(p.generate(req))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["w0 ", "w1 ", "w2 ", "w3 ", "w4 ", ""]
    assert not isinstance(events[-1], Done)


def test_a_connection_dropped_while_recording_replays_as_the_same_failure(fake, tmp_path):
    import io
    path = tmp_path / "c.yaml"
    server = fake([None] + list(REPLIES))  # the first request gets no answer at all
    live_trace = io.StringIO()
    with cassette(path, mode="all") as cas:
        live = session(Target(server.base_url, "smol"), trace=live_trace)
        assert len(cas) == 3
    server.close()
    replay_trace = io.StringIO()
    replayed = replay_session(path, lambda t: session(t, trace=replay_trace))

    def errors(text):
        return [json.loads(l)["error"] for l in text.splitlines() if '"request_settled"' in l]

    assert replayed.answer == live.answer == "Rayleigh scattering."
    assert errors(live_trace.getvalue())[0].startswith("connection:")
    assert errors(replay_trace.getvalue())[0].startswith("connection:")
    assert [e is None for e in errors(live_trace.getvalue())] == [e is None for e in errors(replay_trace.getvalue())]
    assert "599" in path.read_text() and "RemoteProtocolError" in path.read_text()
