"""Reading an OpenAI chat-completions response, and its faults as types.

The wire side of provider `remote` (`remote.py` builds and sends the
request; its docstring lists the fault kinds and what they promise):

- `parse_usage`, `parse_retry_after`, `tool_call_from`: wire fields into
  `Usage`, seconds and `ToolCall`.
- `ResponseReader`, the component `RemoteProvider` reads a response with:
  the HTTP status and transport failures as typed `ProviderError`s, a
  whole JSON body, and server-sent events (event framing, `[DONE]`, tool-call deltas
  assembled by index or id, the completeness rule for a stream).
"""
from __future__ import annotations

import codecs
import email.utils
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

import httpx

from ..errors import ProviderError
from ..types import (Clock, Done, ModelRequest, ProviderEvent, TextDelta, ToolCall, ToolCallEvent, Usage,
                     UsageEvent)

_EXCERPT = 300  # characters of a server's error body quoted in a message


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


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a body arriving in chunks, as httpx's iter_lines gives
    them (split at CRLF, CR or LF; a CR at a chunk's end may be half a CRLF,
    so it waits for the next chunk)."""
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    pending = ""
    for chunk in chunks:
        pending += decode(chunk)
        held = pending.endswith("\r")
        parts = _LINE_BREAK.split(pending[:-1] if held else pending)
        pending = parts.pop() + ("\r" if held else "")
        yield from parts
    pending += decode(b"", final=True)
    if pending:
        parts = _LINE_BREAK.split(pending)
        if parts[-1] == "":
            parts.pop()
        yield from parts


class ResponseReader:
    """Reads one response for `RemoteProvider`, given what it needs: the
    loop's `clock`, the `wall` clock httpx's timeouts run on, the stream
    callback `on_chunk`, the provider's `request_timeout` (for messages) and
    `error`, which builds a ProviderError with the API key scrubbed from its
    message.

    The whole request, not each read, has the time limit (research-loop.md,
    "Time": a timeout no later than the deadline): the body is read chunk by
    chunk as it arrives, and `limit_at` (on the `wall` clock) and the
    deadline (on `clock`) are checked on every chunk, so a server trickling
    bytes cannot hold a request past them."""

    def __init__(self, *, clock: Clock, wall: Callable[[], float], on_chunk: Callable[[int], None] | None,
                 request_timeout: float, error: Callable[..., ProviderError]):
        self.clock, self.wall, self.on_chunk = clock, wall, on_chunk
        self.request_timeout, self._error = request_timeout, error

    def _chunks(self, response: httpx.Response, limit_at: float, request: ModelRequest | None = None,
                deadline: float | None = None) -> Iterator[bytes]:
        """The body as it arrives. Past `limit_at`, or past `deadline`: a
        read timeout; with `request`: its deadline and cancellation
        interrupt (_check)."""
        for chunk in response.iter_bytes():
            if request is not None:
                self._check(request)
            if self.wall() >= limit_at or (deadline is not None and self.clock.now() >= deadline):
                raise httpx.ReadTimeout("the whole request ran past its time limit")
            yield chunk

    # -- faults ---------------------------------------------------------------------------
    def timeout_error(self, exc: Exception, timeout: httpx.Timeout, bounded: bool, *, processed: bool
                       ) -> ProviderError:
        which = "the research deadline" if bounded else f"the request timeout of {self.request_timeout:g} s"
        return self._error("timeout", f"{type(exc).__name__} after {timeout.read:.3g} s (bounded by {which})",
                           processed=processed, retryable=not bounded)

    def status_error(self, response: httpx.Response) -> ProviderError:
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
    def read_body(self, response: httpx.Response, timeout: httpx.Timeout, bounded: bool, limit_at: float,
                   deadline: float) -> Iterator[ProviderEvent]:
        try:
            raw = b"".join(self._chunks(response, limit_at, deadline=deadline))
        except httpx.TimeoutException as exc:
            raise self.timeout_error(exc, timeout, bounded, processed=True) from exc
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
    def read_stream(self, response: httpx.Response, request: ModelRequest, timeout: httpx.Timeout,
                     bounded: bool, limit_at: float) -> Iterator[ProviderEvent]:
        state = _StreamState()
        data_lines: list[str] = []
        try:
            try:
                for line in split_lines(self._chunks(response, limit_at, request)):
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
                raise self.timeout_error(exc, timeout, bounded, processed=True) from exc
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
