"""Record and replay remote sessions with vcrpy, the pytest-recording way.

    with cassette("traces/cassettes/llamacpp/x.yaml", mode="none"):
        ...  # RemoteProvider requests are answered from the cassette

Recording (mode "once" on a new file, or "all"):
- secret headers (Authorization, API keys, cookies) are filtered from
  requests and responses; `record_session` also refuses to keep a cassette
  that contains the API key anywhere;
- the host and port are rewritten to 127.0.0.1:REPLAY_PORT in every recorded
  request (and in every request matched during replay), so a replay matches
  whatever port the server had while recording and whatever URL the replay
  uses; scheme and path still count;
- request bodies are stored as indented JSON and matched as parsed JSON;
  responses are decoded (no gzip blobs), server-sent-event bodies are stored
  with LF line ends, and multi-line strings are written as YAML literal
  blocks, so a cassette reads like the conversation it holds.

Replaying (mode "none", or "once" on an existing file) is strict: each
recorded interaction plays once (`allow_playback_repeats=False`), a request
the cassette lacks raises `CassetteError` naming the cassette and the
request (even when code under the cassette swallowed vcrpy's own exception,
as a section-worker thread would), and so does a replay that leaves recorded
interactions unplayed.

vcrpy and streaming: vcrpy's httpx stub reads a live response to its end
before handing it to the client (it must, to record it), so while
recording, a stream reaches the provider all at once when the server has
finished; in replay it is read line by line from the cassette. Deadline and
cancel checks per chunk therefore act on replays (with a virtual clock that
`RemoteProvider(on_chunk=...)` can move) and on live runs without a
cassette; while recording they act only after the server finished.
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal
from urllib.parse import urlsplit, urlunsplit

import yaml

from imprint_core.errors import ImprintError, UserInputError
from imprint_core.params import with_article

Mode = Literal["none", "once", "all"]
MODES: tuple[str, ...] = ("none", "once", "all")
REPLAY_HOST = "127.0.0.1"
REPLAY_PORT = 8099
SECRET_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key", "openai-api-key",
                  "openai-organization", "openai-project", "cookie", "set-cookie")
MATCH_ON = ("method", "scheme", "host", "port", "path", "json_body")
_PREVIEW = 120


class CassetteError(ImprintError):
    """A replay that does not fit its cassette, or a cassette that cannot be used."""


# ---- matching -------------------------------------------------------------------------
def _body_bytes(request: Any) -> bytes:
    body = getattr(request, "body_bytes", None)
    if body is None:
        body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode("utf-8")
    return body or b""


def _parsed(request: Any) -> Any:
    raw = _body_bytes(request)
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def first_difference(a: Any, b: Any, path: str = "body") -> str | None:
    """Where two parsed JSON values first differ, as `path: a != b`."""
    if type(a) is not type(b):
        return f"{path}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{path}.{key}: {'missing' if key not in a else _short(a[key])} != " \
                       f"{'missing' if key not in b else _short(b[key])}"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        return None
    return None if a == b else f"{path}: {_short(a)} != {_short(b)}"


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, bytes) else repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def json_body(r1: Any, r2: Any) -> None:
    """vcrpy matcher: bodies equal as parsed JSON (raw bytes when not JSON)."""
    a, b = _parsed(r1), _parsed(r2)
    if a != b:
        raise AssertionError(first_difference(a, b) or "bodies differ")


# ---- filters ------------------------------------------------------------------------------
def _fix_request(request: Any) -> Any:
    """Applied to every recorded request and every request being matched
    (vcrpy deep-copies before calling): fixed host and port, indented JSON."""
    parts = urlsplit(request.uri)
    request.uri = urlunsplit(parts._replace(netloc=f"{REPLAY_HOST}:{REPLAY_PORT}"))
    if "host" in request.headers:  # case-insensitive
        request.headers["host"] = f"{REPLAY_HOST}:{REPLAY_PORT}"
    parsed = _parsed(request)
    if parsed is not None and not isinstance(parsed, bytes):
        request.body = (json.dumps(parsed, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    return request


def _fix_response(response: dict) -> dict:
    """Secret headers out; SSE bodies with LF line ends (same events)."""
    headers = response.get("headers", {})
    for name in [n for n in headers if n.lower() in SECRET_HEADERS]:
        del headers[name]
    ctype = next((v[0] if isinstance(v, list) else v for n, v in headers.items() if n.lower() == "content-type"), "")
    body = response.get("body", {}).get("string")
    if "text/event-stream" in str(ctype) and isinstance(body, (bytes, str)):
        fixed = body.replace(b"\r\n", b"\n") if isinstance(body, bytes) else body.replace("\r\n", "\n")
        if fixed != body:
            response["body"]["string"] = fixed
            for name in [n for n in headers if n.lower() == "content-length"]:
                del headers[name]
    return response


# ---- a readable YAML serializer -------------------------------------------------------------
def _serializer():
    try:
        from vcr.serializers.yamlserializer import _CassetteDumper as Base, deserialize
    except ImportError:  # an older vcrpy: its plain YAML serializer
        from vcr.serializers import yamlserializer
        Base, deserialize = getattr(yamlserializer, "Dumper", yaml.SafeDumper), yamlserializer.deserialize

    class ReadableDumper(Base):  # type: ignore[misc, valid-type]
        pass

    def literal(dumper, data: str):
        # The emitter falls back to a quoted scalar where a literal block
        # cannot hold the text exactly (trailing spaces, control characters).
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    ReadableDumper.add_representer(str, literal)

    class Serializer:
        @staticmethod
        def serialize(cassette_dict):
            return yaml.dump(cassette_dict, Dumper=ReadableDumper, allow_unicode=True, width=10_000,
                             sort_keys=False)

        @staticmethod
        def deserialize(cassette_string):
            return deserialize(cassette_string)

    return Serializer()


def make_vcr(mode: Mode = "none"):
    import vcr
    if mode not in MODES:
        raise UserInputError(f"unknown record mode {mode!r}", key="mode", expected=", ".join(MODES))
    v = vcr.VCR(record_mode=mode, match_on=MATCH_ON, filter_headers=list(SECRET_HEADERS),
                before_record_request=_fix_request, before_record_response=_fix_response,
                decode_compressed_response=True, serializer="imprint-yaml")
    v.register_serializer("imprint-yaml", _serializer())
    v.register_matcher("json_body", json_body)
    return v


# ---- describing requests for error messages --------------------------------------------------
def describe(request: Any) -> str:
    """`POST http://.../chat/completions (stream, 4 messages, last: user 'What ...')`."""
    parts = [f"{request.method} {request.uri}"]
    body = _parsed(request)
    if isinstance(body, dict):
        bits = []
        if "stream" in body:
            bits.append("stream" if body["stream"] else "not streamed")
        messages = body.get("messages")
        if isinstance(messages, list) and messages:
            last = messages[-1] if isinstance(messages[-1], dict) else {}
            text = " ".join(str(last.get("content") or "").split())
            if len(text) > _PREVIEW:
                text = text[:_PREVIEW - 3] + "..."
            bits.append(f"{len(messages)} messages, last: {last.get('role')} {text!r}")
        if bits:
            parts.append("(" + "; ".join(bits) + ")")
    return " ".join(parts)


def _closest(cas: Any, request: Any) -> str:
    try:
        similar = cas.find_requests_with_most_matches(request)
    except Exception:
        return ""
    for _req, _ok, failed in similar[:1]:
        reasons = [f"{name}: {(msg or '').strip()}" if msg else name for name, msg in failed]
        if reasons:
            return "; the closest recorded request differs in " + "; ".join(reasons)
    return ""


# ---- transport failures -------------------------------------------------------------------------
ERROR_STATUS = 599
ERROR_HEADER = "x-imprint-transport-error"
_active: list[Any] = []  # the cassettes in use, innermost last


def _recorded_error(response: Any, request: Any) -> Exception | None:
    """The httpx exception that a recorded marker interaction stands for."""
    import httpx
    if response.status_code != ERROR_STATUS or ERROR_HEADER not in response.headers:
        return None
    name = response.headers[ERROR_HEADER]
    cls = getattr(httpx, name, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx.TransportError)):
        cls = httpx.TransportError
    try:
        message = json.loads(response.read()).get("message", name)
    except ValueError:
        message = name
    return cls(f"{message} (replayed from the cassette)", request=request)


def transport(**kwargs: Any):
    """An httpx transport for sessions under a cassette. vcrpy records only
    responses; this one also records a transport failure (connection
    refused or reset, timeout) as a marker interaction (status 599 and an
    `x-imprint-transport-error` header naming the httpx exception) and
    raises that exception again when the marker is replayed, so a session
    that hit a reset replays the same way. Without a cassette it is a plain
    `httpx.HTTPTransport`."""
    import httpx
    from vcr.request import Request as VcrRequest

    class ReplayableTransport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            body = request.read()
            try:
                response = super().handle_request(request)  # vcrpy's stub while a cassette is active
            except httpx.TransportError as exc:
                cas = _active[-1] if _active else None
                if cas is not None and not cas.write_protected:
                    cas.append(VcrRequest(request.method, str(request.url), body, dict(request.headers)),
                               {"status": {"code": ERROR_STATUS, "message": "transport error"},
                                "headers": {ERROR_HEADER: [type(exc).__name__],
                                            "content-type": ["application/json"]},
                                "body": {"string": json.dumps({"error": type(exc).__name__,
                                                               "message": str(exc)}).encode()}})
                raise
            failure = _recorded_error(response, request) if _active else None
            if failure is not None:
                response.close()
                raise failure
            return response

    return ReplayableTransport(**kwargs)


# ---- the cassette context ---------------------------------------------------------------------
@contextlib.contextmanager
def cassette(path: str | os.PathLike, mode: Mode = "none") -> Iterator[Any]:
    """Use the cassette at `path`: "none" replays only (the file must exist),
    "once" records a missing file and otherwise replays, "all" records every
    request anew. Yields vcrpy's Cassette."""
    path = Path(path)
    if mode == "none" and not path.is_file():
        raise CassetteError(f"cassette {path} does not exist (record mode 'none' replays only; "
                            "record it first with `imprint record`)")
    from vcr.errors import CannotOverwriteExistingCassetteException
    v = make_vcr(mode)
    misses: list[str] = []
    with v.use_cassette(str(path), allow_playback_repeats=False, drop_unused_requests=(mode == "all")) as cas:
        replaying = cas.write_protected
        original = cas.can_play_response_for

        def can_play(request):
            ok = original(request)
            if not ok and cas.write_protected:
                misses.append(describe(request) + _closest(cas, request))
            return ok

        cas.can_play_response_for = can_play
        _active.append(cas)
        try:
            yield cas
        except CannotOverwriteExistingCassetteException as exc:
            failed = getattr(exc, "failed_request", None)
            what = misses[0] if misses else (describe(failed) if failed is not None else str(exc))
            raise CassetteError(f"cassette {path}: the replay sent a request that the cassette does not hold "
                                f"(or that it already played): {what}") from None
        finally:
            _active.remove(cas)
        if misses:
            raise CassetteError(f"cassette {path}: the replay sent {len(misses)} request(s) that the cassette "
                                f"does not hold (or already played); the first: {misses[0]}")
        if replaying:
            unplayed = [i for i in range(len(cas)) if not cas.play_counts[i]]
            if unplayed:
                shown = "; ".join(f"#{i + 1}: {describe(cas.requests[i])}" for i in unplayed[:3])
                more = f" (and {len(unplayed) - 3} more)" if len(unplayed) > 3 else ""
                raise CassetteError(f"cassette {path}: the replay left {len(unplayed)} of {len(cas)} recorded "
                                    f"interaction(s) unplayed: {shown}{more}")


def interactions(path: str | os.PathLike) -> list[tuple[dict, dict]]:
    """The (request, response) dicts of a cassette file, bodies as text."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CassetteError(f"cannot read cassette {path}: {exc}") from None
    except (ValueError, RecursionError) as exc:   # not UTF-8, an integer past the digit limit, too deep
        raise CassetteError(f"cannot read cassette {path}: {exc}") from None
    return _checked(data, path)


REQUEST_KEYS = frozenset({"method", "uri", "body", "headers"})
"""What vcrpy builds a recorded request from (`Request(**request)`): the keys a cassette's request may hold."""


def _checked(data: Any, path: str | os.PathLike) -> list[tuple[dict, dict]]:
    """The (request, response) pairs of a cassette's YAML, each checked for
    the shape vcrpy reads (it fails with a bare AttributeError or TypeError on
    any other), the first mismatch named by its key."""
    def bad(key: str, what: str) -> CassetteError:
        return CassetteError(f"cassette {path}: {key}: {what}")

    def kind(v: Any) -> str:
        return {list: "a list", str: "a text", int: "an integer", float: "a number", bool: "true or false"}.get(
            type(v), with_article(type(v).__name__))

    if data is None:
        return []
    if not isinstance(data, dict):
        raise bad("(top level)", f"{kind(data)}, not a mapping with `interactions` (a vcrpy cassette)")
    items = data.get("interactions", [])
    if not isinstance(items, list):
        raise bad("interactions", f"{kind(items)}, not a list of request and response pairs")
    out = []
    for i, item in enumerate(items):
        where = f"interactions[{i}]"
        if not isinstance(item, dict):
            raise bad(where, f"{kind(item)}, not a mapping with request and response")
        request, response = item.get("request"), item.get("response")
        for part, value in (("request", request), ("response", response)):
            if not isinstance(value, dict):
                raise bad(f"{where}.{part}", "missing" if value is None else f"{kind(value)}, not a mapping")
        for key in ("method", "uri"):
            if not isinstance(request.get(key), str):
                raise bad(f"{where}.request.{key}", "missing or not text")
        unknown = sorted(set(map(str, request)) - REQUEST_KEYS)
        if unknown:
            raise bad(f"{where}.request.{unknown[0]}", "unknown key (a request holds " + ", ".join(sorted(REQUEST_KEYS)) + ")")
        out.append((request, response))
    return out


@dataclass(frozen=True)
class Target:
    """Where a session sends its requests: the API root and the model name.
    `server` is the server kind when known."""
    base_url: str
    model: str
    server: str | None = None


def cassette_target(path: str | os.PathLike, server: str | None = None) -> Target:
    """The base URL and model that a replay of `path` must use (taken from
    its first request; the host and port are the fixed replay ones)."""
    items = interactions(path)
    if not items:
        raise CassetteError(f"cassette {path} holds no interactions")
    # The first chat completion (a counter's tokenize calls may come before it).
    request = next((i[0] for i in items if "/chat/completions" in i[0]["uri"]), items[0][0])
    parts = urlsplit(request["uri"])
    root = parts.path.rsplit("/chat/completions", 1)[0]
    try:
        model = json.loads(request["body"])["model"]
    except (TypeError, ValueError, KeyError):
        raise CassetteError(f"cassette {path}: the first request is not a chat completion") from None
    return Target(urlunsplit(parts._replace(path=root, query="", fragment="")), model,
                  server or Path(path).parent.name)


# ---- sessions ------------------------------------------------------------------------------------
@dataclass
class RecordedSession:
    cassette: Path
    target: Target
    result: Any
    interactions: int
    ready_seconds: float | None  # None: a server that was already running


def record_session(cassette_path: str | os.PathLike, server_kind: str, fn: Callable[[Target], Any], *,
                   base_url: str | None = None, port: int | None = None, model: str | None = None,
                   secrets: tuple[str, ...] = (), progress: Callable[[str], None] = lambda s: None
                   ) -> RecordedSession:
    """Record `fn(target)` into `cassette_path`, replacing it.

    With `base_url`, the server already running there is used (`model`
    defaults to the kind's model name); otherwise the server of `server_kind`
    is started on `port` (a free one when None) and stopped afterwards. The
    cassette is written beside its place and moved in only when `fn` returns
    and the file holds no secret (the API key from the environment, and
    `secrets`)."""
    from imprint_core.providers.remote import API_KEY_ENV
    from . import servers
    if server_kind not in servers.SERVER_KINDS:
        raise UserInputError(f"unknown server {server_kind!r}", key="server",
                             expected=" or ".join(servers.SERVER_KINDS))
    final = Path(cassette_path)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = final.with_name(final.name + ".recording")
    work.unlink(missing_ok=True)
    with contextlib.ExitStack() as stack:
        ready = None
        if base_url is None:
            running = stack.enter_context(servers.server(server_kind, port, progress=progress))
            base_url, ready = running.base_url, running.ready_seconds
        target = Target(base_url.rstrip("/"), model or servers.model_name(server_kind), server_kind)
        try:
            with cassette(work, mode="all") as cas:
                result = fn(target)
                count = len(cas)
        except BaseException:
            work.unlink(missing_ok=True)
            raise
    text = work.read_text(encoding="utf-8") if work.exists() else ""
    leaked = [s for s in (os.environ.get(API_KEY_ENV), *secrets) if s and s in text]
    if leaked:
        work.unlink(missing_ok=True)
        raise CassetteError(f"refusing to keep {final}: it contains a secret (filtered headers did not catch it)")
    if not text:
        raise CassetteError(f"nothing was recorded into {final}: the session sent no request")
    os.replace(work, final)
    progress(f"recorded {count} interaction(s) into {final}")
    return RecordedSession(final, target, result, count, ready)


def replay_session(cassette_path: str | os.PathLike, fn: Callable[[Target], Any], *,
                   server: str | None = None) -> Any:
    """Run `fn(target)` against the cassette alone (record mode "none"). A
    cassette that cannot be replayed at all (missing, not YAML, no chat
    completion) is the caller's input, named in a `UserInputError`."""
    try:
        target = cassette_target(cassette_path, server)
    except CassetteError as exc:
        raise UserInputError(str(exc)) from None
    with cassette(cassette_path, mode="none"):
        return fn(target)

