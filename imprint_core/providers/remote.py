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
clock), and it bounds the whole request, not each read: the body is read
chunk by chunk as it arrives and that limit is checked on every chunk (a
server trickling one byte at a time, with no newline, used to hold a
request for as long as it liked). The deadline and the cancel token are
checked on every chunk and every stream line. When either has passed, the provider stops reading, closes the
response, yields one empty `TextDelta` (so a consumer that checks after each
event, as the loop does, records the interruption) and ends without `Done`.

Usage: `prompt_tokens`, `completion_tokens` and
`prompt_tokens_details.cached_tokens` are read where present; a response
without usage yields no `UsageEvent` (the ledger records "not reported").

The API key comes from the `api_key` argument or `IMPRINT_REMOTE_API_KEY`.
It is sent only as the Authorization header and is scrubbed from every
error message these modules build; `repr` never shows it.

What lives where: this module is the provider (settings, request body and
headers, timeouts, sending one request); `_openai_stream.py` reads the
response (a JSON body or server-sent events, tool-call deltas, usage) and
maps HTTP and transport failures to the fault kinds above. Its public
names are importable from here too.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import httpx

from ..counting import ByteEstimateCounter
from ..errors import ProviderError, UserInputError
from .openai_format import openai_message, openai_tool
from ..types import CalibratedTokenCounter, Clock, CountingModes, ModelRequest, ProviderEvent, TokenCounter
from ._openai_stream import ResponseReader, parse_retry_after, parse_usage, tool_call_from

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "MODEL_ENV", "RemoteProvider", "parse_retry_after", "parse_usage",
           "tool_call_from", "validate_base_url"]

API_KEY_ENV = "IMPRINT_REMOTE_API_KEY"
BASE_URL_ENV = "IMPRINT_REMOTE_BASE_URL"
MODEL_ENV = "IMPRINT_REMOTE_MODEL"


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
                 extra_body: dict[str, Any] | None = None, on_chunk: Callable[[int], None] | None = None,
                 exact_counter: TokenCounter | None = None,
                 calibrated_counter: CalibratedTokenCounter | None = None):
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
        # The other counting modes (`counting.select_counting`): an exact
        # counter of the server's template and tokenizer, a calibrated one.
        # OpenAI-compatible servers report usage: the ledger reconciles with it.
        self.counting_modes = CountingModes(exact_counter, calibrated_counter, reports_usage=True)
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
        provider = cls(base_url, model, clock=clock, **kwargs)
        if provider.counting_modes.calibrated is None:
            # The calibrated estimate learns across sessions in the user cache.
            from ..calibration import CalibratedCounter, CalibrationStore, default_calibration_path
            provider.counting_modes = replace(provider.counting_modes, calibrated=CalibratedCounter(
                CalibrationStore(default_calibration_path()), provider.name, provider.model))
        return provider

    # -- plumbing ---------------------------------------------------------------------
    @property
    def client(self) -> httpx.Client:
        """The HTTP client (and transport) requests go through; a counter that
        asks the server uses it too."""
        return self._client

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
                                "messages": [openai_message(m, json_arguments=True) for m in request.messages],
                                "max_tokens": request.max_output_tokens,
                                "stream": self.stream}
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [openai_tool(t) for t in request.tools]
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        if self.temperature is not None:
            body["temperature"] = self.temperature
        body.update(self.extra_body)
        return body

    # Whether the time left to the deadline also bounds the HTTP timeout. A
    # recording on the virtual clock turns it off: its deadline is not wall
    # time, and a slow CPU server must not be recorded as a timeout fault.
    deadline_bounds_timeout = True
    # The clock httpx's timeouts run on, for the whole request's limit (a test may inject one).
    wall: Callable[[], float] = staticmethod(time.monotonic)

    def _timeout(self, request: ModelRequest) -> tuple[httpx.Timeout, bool]:
        remaining = request.deadline - self.clock.now()
        if not self.deadline_bounds_timeout and remaining > 0:
            remaining = max(remaining, self.request_timeout)
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
        # Built per request: a test or a replay may set `wall`, `clock` or `on_chunk` between requests.
        reader = ResponseReader(clock=self.clock, wall=self.wall, on_chunk=self.on_chunk,
                                request_timeout=self.request_timeout, error=self._error)
        limit_at = self.wall() + (timeout.read or 0.0)   # the whole request's, checked on every chunk
        try:
            response = self._client.send(http_request, stream=True)
        except httpx.TimeoutException as exc:
            nothing_sent = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            raise reader.timeout_error(exc, timeout, bounded, processed=not nothing_sent) from exc
        except httpx.ConnectError as exc:
            raise self._error("connection", f"cannot connect to {self.base_url}: {exc}", processed=False,
                              retryable=True) from exc
        except httpx.TransportError as exc:
            raise self._error("connection", f"connection to {self.base_url} failed after the request was sent: "
                                            f"{type(exc).__name__}: {exc}", processed=True, retryable=True) from exc
        try:
            if not 200 <= response.status_code < 300:
                raise reader.status_error(response)
            if self.stream:
                yield from reader.read_stream(response, request, timeout, bounded, limit_at)
            else:
                yield from reader.read_body(response, timeout, bounded, limit_at, request.deadline)
        finally:
            response.close()


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