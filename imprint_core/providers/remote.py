"""Provider `remote`: OpenAI chat completions over httpx.

One request per `generate` call, streamed (server-sent events) or not. The
provider never retries: a failure is raised as a typed `ProviderError` and
the loop decides (retries, charging, the trace).

Fault kinds (`ProviderError.kind`), and what they say about the prompt:

| kind            | when                                                            | processed | retryable |
| --------------- | --------------------------------------------------------------- | --------- | --------- |
| `http_429`      | HTTP 429; `retry_after` from the Retry-After header (seconds)   | no        | yes       |
| `http_5xx`      | HTTP 500-599                                                    | yes       | yes       |
| `http_4xx`      | any other HTTP 4xx status (the request was rejected)            | no        | no        |
| `http_status`   | any other non-2xx status (1xx, 3xx: redirects are not followed) | yes       | no        |
| `connection`    | connect failure (nothing sent)                                  | no        | yes       |
| `connection`    | reset / protocol error after the request was sent               | yes       | yes       |
| `timeout`       | connect or pool timeout (nothing sent)                          | no        | *         |
| `timeout`       | read/write timeout                                              | yes       | *         |
| `timeout`       | the deadline had passed before anything was sent                | no        | no        |
| `cancelled`     | the cancel token was set before anything was sent               | no        | no        |
| `malformed_json`| a body or stream event that is not JSON, or not a JSON object   | yes       | no        |
| `response_error`| HTTP 200 whose body (or a stream event) is an `error` object    | yes       | no        |
| `empty_choices` | a complete response without any choice                          | yes       | no        |
| `stream_cut`    | the stream ended without a terminal signal (see below)          | yes       | yes       |

(*) a timeout is retryable only when it was the provider's own
`request_timeout` that fired; one bounded by the research deadline is not.

A stream is *complete* when it delivered any terminal signal: `data: [DONE]`,
a choice with a non-null `finish_reason`, or a chunk carrying `usage` (which
servers send last). A stream that ends (EOF) with none of them is cut: the
text already yielded stays yielded, the tool calls assembled so far are
dropped (a half-received call must never run) and `stream_cut` is raised.
transformers serve ends with a usage chunk and no `[DONE]`; llama.cpp ends
with `[DONE]` and no usage: both are complete.

Deadline and cancellation: the httpx timeout of every request is no later
than `request.deadline` (remaining = deadline - clock.now(), on the injected
clock), and the deadline and the cancel token are checked on every stream
line. When either has passed, the provider stops reading, closes the
response, yields one empty `TextDelta` (so a consumer that checks after each
event, as the loop does, records the interruption) and ends without `Done`.

Usage: `prompt_tokens`, `completion_tokens` and
`prompt_tokens_details.cached_tokens` are read where present; a response
without usage yields no `UsageEvent` (the ledger records "not reported").

The API key comes from the `api_key` argument or `IMPRINT_REMOTE_API_KEY`.
It is sent only as the Authorization header and is scrubbed from every
error message this module builds; `repr` never shows it.
"""
from __future__ import annotations

import email.utils
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import httpx

from ..counting import ByteEstimateCounter
from ..errors import ProviderError, UserInputError
from .openai_format import openai_message, openai_tool
from ..types import (Clock, Done, Message, ModelRequest, ProviderEvent, TextDelta, TokenCounter, ToolCall,
                     ToolCallEvent, ToolSpec, Usage, UsageEvent)

API_KEY_ENV = "IMPRINT_REMOTE_API_KEY"
BASE_URL_ENV = "IMPRINT_REMOTE_BASE_URL"
MODEL_ENV = "IMPRINT_REMOTE_MODEL"
_EXCERPT = 300  # characters of a server's error body quoted in a message


def message_to_openai(m: Message) -> dict[str, Any]:
    """One message in the chat-completions wire format."""
    return openai_message(m, json_arguments=True)


tool_to_openai = openai_tool


def parse_usage(raw: Any) -> Usage | None:
    """Usage from a response's `usage` object; None when there is none.
    A field that is absent or not a non-negative integer stays None."""
    if not isinstance(raw, dict):
        return None

    def count(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    details = raw.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else None
    usage = Usage(prompt_tokens=count(raw.get("prompt_tokens")), cached_tokens=cached,
                  output_tokens=count(raw.get("completion_tokens")))
    if usage.prompt_tokens is None and usage.output_tokens is None and usage.cached_tokens is None:
        return None
    return usage


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


def tool_call_from(call_id: str | None, name: str | None, arguments: Any, index: int) -> ToolCall:
    """A ToolCall from wire fields. Arguments that are not a JSON object keep
    their raw text in `invalid_arguments`; a missing id gets a deterministic
    one (replays must send the same ids that were recorded)."""
    name = name or ""
    if isinstance(arguments, dict):
        args: dict[str, Any] | None = arguments
        raw = json.dumps(arguments, ensure_ascii=False)
    else:
        raw = "" if arguments is None else str(arguments)
        if not raw.strip():
            args = {}
        else:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            args = parsed if isinstance(parsed, dict) else None
    if not call_id:
        import hashlib
        digest = hashlib.sha256(f"{index}\0{name}\0{raw}".encode()).hexdigest()[:12]
        call_id = f"call_{index}_{digest}"
    if args is None:
        return ToolCall(id=call_id, name=name, arguments={}, invalid_arguments=raw)
    return ToolCall(id=call_id, name=name, arguments=args)


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _StreamState:
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage | None = None
    finish_reason: str | None = None
    done_marker: bool = False
    saw_choice: bool = False
    events: int = 0

    @property
    def complete(self) -> bool:
        return self.done_marker or self.finish_reason is not None or self.usage is not None


class _Interrupted(Exception):
    """Internal: the deadline passed or the reply was cancelled mid-stream."""


class RemoteProvider:
    """An OpenAI-compatible chat-completions endpoint.

    `base_url` is the API root (for example `http://127.0.0.1:8000/v1`);
    requests go to `{base_url}/chat/completions`. Pass `client` (an
    `httpx.Client`, not closed by the provider) or `transport` (for example
    `httpx.MockTransport`) to control the HTTP layer; by default the
    provider owns a plain client. `on_chunk(n)` is called for every stream
    event before the deadline check (a replay can advance a virtual clock
    there)."""

    def __init__(self, base_url: str, model: str, *, clock: Clock, api_key: str | None = None, stream: bool = True,
                 client: httpx.Client | None = None, transport: httpx.BaseTransport | None = None,
                 context_window: int = 8192, counter: TokenCounter | None = None,
                 request_timeout: float = 120.0, connect_timeout: float = 10.0, name: str = "remote",
                 temperature: float | None = None, tool_choice: str | dict | None = None,
                 extra_body: dict[str, Any] | None = None, on_chunk: Callable[[int], None] | None = None):
        self.base_url = validate_base_url(base_url)
        if not isinstance(model, str) or not model.strip():
            raise UserInputError("a remote provider needs a model name", key="model", expected="a non-empty string")
        if client is not None and transport is not None:
            raise ValueError("pass either client or transport, not both")
        if not context_window > 0:
            raise UserInputError(f"context window must be positive, got {context_window}", key="context_window")
        if not request_timeout > 0 or not connect_timeout > 0:
            raise UserInputError("timeouts must be positive", key="request_timeout")
        self.model = model
        self.clock = clock
        self.stream = stream
        self.name = name
        self.context_window = int(context_window)
        self.counter = counter or ByteEstimateCounter()
        self.request_timeout = float(request_timeout)
        self.connect_timeout = float(connect_timeout)
        self.temperature = temperature
        self.tool_choice = tool_choice
        self.extra_body = dict(extra_body or {})
        self.on_chunk = on_chunk
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self.__api_key = key or None
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client(transport=transport)

    @classmethod
    def from_env(cls, *, clock: Clock, base_url: str | None = None, model: str | None = None,
                 **kwargs: Any) -> "RemoteProvider":
        """Base URL and model from the arguments, else from
        IMPRINT_REMOTE_BASE_URL and IMPRINT_REMOTE_MODEL (the key always
        comes from IMPRINT_REMOTE_API_KEY unless `api_key` is passed)."""
        base_url = base_url or os.environ.get(BASE_URL_ENV)
        model = model or os.environ.get(MODEL_ENV)
        if not base_url:
            raise UserInputError(f"no base URL: set {BASE_URL_ENV} or the setting", key="base_url",
                                 expected="an http:// or https:// URL")
        if not model:
            raise UserInputError(f"no model: set {MODEL_ENV} or the setting", key="model",
                                 expected="the model name the server serves")
        return cls(base_url, model, clock=clock, **kwargs)

    # -- plumbing ---------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    @property
    def has_api_key(self) -> bool:
        return self.__api_key is not None

    def __repr__(self) -> str:
        return (f"RemoteProvider(base_url={self.base_url!r}, model={self.model!r}, stream={self.stream}, "
                f"api_key={'set' if self.__api_key else 'unset'})")

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> "RemoteProvider":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _scrub(self, text: str) -> str:
        if self.__api_key and self.__api_key in text:
            text = text.replace(self.__api_key, "[api key]")
        return text

    def _error(self, kind: str, message: str, **kw: Any) -> ProviderError:
        return ProviderError(kind, self._scrub(message), **kw)

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json",
             "Accept": "text/event-stream" if self.stream else "application/json"}
        if self.__api_key:
            h["Authorization"] = f"Bearer {self.__api_key}"
        return h

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body (no secrets in it)."""
        body: dict[str, Any] = {"model": self.model,
                                "messages": [message_to_openai(m) for m in request.messages],
                                "max_tokens": request.max_output_tokens,
                                "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [tool_to_openai(t) for t in request.tools]
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        return body

    def _timeout(self, request: ModelRequest) -> tuple[httpx.Timeout, bool]:
        remaining = request.deadline - self.clock.now()
        bounded = remaining <= self.request_timeout
        total = min(self.request_timeout, remaining)
        return httpx.Timeout(total, connect=min(self.connect_timeout, total)), bounded

    # -- the request ---------------------------------------------------------------------
    def generate(self, request: ModelRequest) -> Iterator[ProviderEvent]:
        if request.cancel.cancelled:
            raise self._error("cancelled", "the reply was cancelled before the request was sent", processed=False)
        timeout, bounded = self._timeout(request)
        if timeout.read is not None and timeout.read <= 0:
            raise self._error("timeout", "the research deadline passed before the request was sent",
                              processed=False)
        content = json.dumps(self.body(request), ensure_ascii=False).encode("utf-8")
        http_request = self._client.build_request("POST", self.url, content=content, headers=self.headers(),
                                                  timeout=timeout)
        try:
            response = self._client.send(http_request, stream=True)
        except httpx.TimeoutException as exc:
            nothing_sent = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            raise self._timeout_error(exc, timeout, bounded, processed=not nothing_sent) from exc
        except httpx.ConnectError as exc:
            raise self._error("connection", f"cannot connect to {self.base_url}: {exc}", processed=False,
                              retryable=True) from exc
        except httpx.TransportError as exc:
            raise self._error("connection", f"connection to {self.base_url} failed after the request was sent: "
                                            f"{type(exc).__name__}: {exc}", processed=True, retryable=True) from exc
        try:
            if not 200 <= response.status_code < 300:
                raise self._status_error(response)
            if self.stream:
                yield from self._read_stream(response, request, timeout, bounded)
            else:
                yield from self._read_body(response, timeout, bounded)
        finally:
            response.close()

    def _timeout_error(self, exc: Exception, timeout: httpx.Timeout, bounded: bool, *, processed: bool
                       ) -> ProviderError:
        which = "the research deadline" if bounded else f"the request timeout of {self.request_timeout:g} s"
        return self._error("timeout", f"{type(exc).__name__} after {timeout.read:.3g} s (bounded by {which})",
                           processed=processed, retryable=not bounded)

    def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            detail = response.read().decode("utf-8", errors="replace")
        except httpx.HTTPError:
            detail = ""
        try:
            parsed = json.loads(detail)
            if isinstance(parsed, dict):
                err = parsed.get("error", parsed.get("detail", parsed))
                if isinstance(err, dict):
                    err = err.get("message", err)
                detail = err if isinstance(err, str) else json.dumps(err, ensure_ascii=False)
        except ValueError:
            pass
        detail = " ".join(detail.split())[:_EXCERPT]
        text = f"HTTP {status} {response.reason_phrase}" + (f": {detail}" if detail else "")
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if status == 429:
            return self._error("http_429", text, processed=False, retryable=True, retry_after=retry_after,
                               status=status)
        if 500 <= status <= 599:
            return self._error("http_5xx", text, processed=True, retryable=True, retry_after=retry_after,
                               status=status)
        if 400 <= status <= 499:
            return self._error("http_4xx", text, processed=False, retryable=False, status=status)
        return self._error("http_status", text, processed=True, retryable=False, status=status)

    # -- non-streaming ---------------------------------------------------------------------
    def _read_body(self, response: httpx.Response, timeout: httpx.Timeout, bounded: bool
                   ) -> Iterator[ProviderEvent]:
        try:
            raw = response.read()
        except httpx.TimeoutException as exc:
            raise self._timeout_error(exc, timeout, bounded, processed=True) from exc
        except httpx.TransportError as exc:
            raise self._error("connection", f"connection lost while reading the response: "
                                            f"{type(exc).__name__}: {exc}", processed=True, retryable=True) from exc
        data = self._json_object(raw.decode("utf-8", errors="replace"), "response body")
        self._raise_error_object(data)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise self._error("empty_choices", "the response has no choices", processed=True)
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        if isinstance(text, str) and text:
            yield TextDelta(text)
        calls = message.get("tool_calls") or []
        for index, wire in enumerate(calls if isinstance(calls, list) else []):
            fn = wire.get("function") if isinstance(wire, dict) and isinstance(wire.get("function"), dict) else {}
            yield ToolCallEvent(tool_call_from(wire.get("id") if isinstance(wire, dict) else None,
                                               fn.get("name"), fn.get("arguments"), index))
        usage = parse_usage(data.get("usage"))
        if usage is not None:
            yield UsageEvent(usage)
        yield Done()

    def _json_object(self, text: str, what: str) -> dict[str, Any]:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self._error("malformed_json", f"{what} is not JSON ({exc}): {text[:_EXCERPT]!r}",
                              processed=True) from None
        if not isinstance(data, dict):
            raise self._error("malformed_json", f"{what} is not a JSON object: {text[:_EXCERPT]!r}",
                              processed=True)
        return data

    def _raise_error_object(self, data: dict[str, Any]) -> None:
        err = data.get("error")
        if err and "choices" not in data:
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise self._error("response_error", f"the server answered with an error: {str(msg)[:_EXCERPT]}",
                              processed=True)

    # -- streaming -------------------------------------------------------------------------
    def _read_stream(self, response: httpx.Response, request: ModelRequest, timeout: httpx.Timeout,
                     bounded: bool) -> Iterator[ProviderEvent]:
        state = _StreamState()
        data_lines: list[str] = []
        try:
            try:
                for line in response.iter_lines():
                    self._check(request)
                    if line == "":
                        if data_lines:
                            yield from self._dispatch("\n".join(data_lines), state, request)
                            data_lines = []
                            if state.done_marker:
                                break
                        continue
                    if line.startswith(":"):
                        continue  # an SSE comment (keep-alive)
                    fieldname, _, value = line.partition(":")
                    if fieldname == "data":
                        data_lines.append(value[1:] if value.startswith(" ") else value)
                    # other fields (event, id, retry) carry nothing for chat completions
                if data_lines and not state.done_marker:
                    yield from self._dispatch("\n".join(data_lines), state, request)
            except httpx.TimeoutException as exc:
                raise self._timeout_error(exc, timeout, bounded, processed=True) from exc
            except httpx.TransportError as exc:
                raise self._error("connection", f"connection lost mid-stream after {state.events} event(s): "
                                                f"{type(exc).__name__}: {exc}", processed=True,
                                  retryable=True) from exc
        except _Interrupted:
            response.close()
            yield TextDelta("")
            return
        if not state.complete:
            raise self._error("stream_cut", f"the stream ended after {state.events} event(s) without [DONE], "
                                            "a finish_reason or a usage chunk", processed=True, retryable=True)
        if not state.saw_choice:
            raise self._error("empty_choices", "the stream completed without any choice", processed=True)
        for index in sorted(state.calls):
            p = state.calls[index]
            yield ToolCallEvent(tool_call_from(p.id or None, p.name, p.arguments, index))
        if state.usage is not None:
            yield UsageEvent(state.usage)
        yield Done()

    def _check(self, request: ModelRequest) -> None:
        if request.cancel.cancelled or self.clock.now() >= request.deadline:
            raise _Interrupted()

    def _dispatch(self, data: str, state: _StreamState, request: ModelRequest) -> Iterator[ProviderEvent]:
        state.events += 1
        if self.on_chunk is not None:
            self.on_chunk(state.events)
            self._check(request)
        if data.strip() == "[DONE]":
            state.done_marker = True
            return
        chunk = self._json_object(data, f"stream event {state.events}")
        self._raise_error_object(chunk)
        usage = parse_usage(chunk.get("usage"))
        if usage is not None:
            state.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = choices[0] if isinstance(choices[0], dict) else {}
        state.saw_choice = True
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        text = delta.get("content")
        if isinstance(text, str) and text:
            yield TextDelta(text)
        wire_calls = delta.get("tool_calls")
        if isinstance(wire_calls, list):
            for position, wire in enumerate(wire_calls):
                if isinstance(wire, dict):
                    self._merge_call(state, wire, position)
        if choice.get("finish_reason") is not None:
            state.finish_reason = str(choice["finish_reason"])

    @staticmethod
    def _merge_call(state: _StreamState, wire: dict[str, Any], position: int) -> None:
        index = wire.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            # No index: a new id starts a new call, otherwise it continues the last one.
            last = max(state.calls) if state.calls else None
            wire_id = wire.get("id")
            if last is None or (wire_id and state.calls[last].id and wire_id != state.calls[last].id):
                index = (last + 1) if last is not None else position
            else:
                index = last
        part = state.calls.setdefault(index, _PartialCall())
        if wire.get("id") and not part.id:
            part.id = str(wire["id"])
        fn = wire.get("function") if isinstance(wire.get("function"), dict) else {}
        name = fn.get("name")
        if isinstance(name, str) and name and name != part.name:
            part.name = name if not part.name or name.startswith(part.name) else part.name + name
        args = fn.get("arguments")
        if isinstance(args, dict):
            part.arguments += json.dumps(args, ensure_ascii=False)
        elif isinstance(args, str):
            part.arguments += args


def validate_base_url(base_url: str) -> str:
    """An http(s) URL with a host, without a trailing slash."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise UserInputError("a remote provider needs a base URL", key="base_url",
                             expected="an http:// or https:// URL")
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"{parts.scheme}://{parts.hostname or ''}…" if parts.scheme else "(no scheme)"
        raise UserInputError(f"unsupported base URL {shown}", key="base_url",
                             expected="an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise UserInputError("the base URL must not hold credentials; use IMPRINT_REMOTE_API_KEY",
                             key="base_url", expected="an http:// or https:// URL without user:password@")
    return base_url.strip().rstrip("/")
