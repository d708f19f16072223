"""OTLP JSON read into spans: the export requests of a file (one, or one a
line), every value, id, time and status checked, each mistake named by its
key path (`resourceSpans[0].scopeSpans[1].spans[4].traceId`). What the spans
of an agent mean is `otel`'s business."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .rawfiles import OTLP_KEY, Source

STATUS_ERROR = 2
"""The status code of a failed span (OTLP's STATUS_CODE_ERROR)."""
STATUS_CODES = {0: 0, 1: 1, 2: 2, "STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
VALUE_KEYS = ("stringValue", "intValue", "doubleValue", "boolValue", "arrayValue", "kvlistValue", "bytesValue")
HEX_ID = {"traceId": re.compile(r"^[0-9a-fA-F]{32}$"), "spanId": re.compile(r"^[0-9a-fA-F]{16}$"),
          "parentSpanId": re.compile(r"^(?:[0-9a-fA-F]{16})?$")}
INT64 = (-2**63, 2**63 - 1)
"""An `intValue`'s range (OTLP's int64)."""
UINT64 = (0, 2**64 - 1)
"""A time's range (OTLP's fixed64 nanoseconds since the epoch)."""
_DECIMAL = re.compile(r"-?[0-9]{1,20}")
"""An integer's decimal text: ASCII digits only (str.isdigit() takes "²", which int() refuses, and \\d
takes "٣"), no more than 64 bits need."""


def _integer(x: Any, bounds: tuple[int, int]) -> int | None:
    """An OTLP integer (a JSON number, or its decimal text as proto3 JSON writes
    64-bit ones) within `bounds`; None when it is not one."""
    if isinstance(x, str) and _DECIMAL.fullmatch(x):
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int):
        return None
    return x if bounds[0] <= x <= bounds[1] else None


ID_EXPECTED = {"traceId": "32 hex digits (OTLP JSON writes ids in hex, not base64)",
               "spanId": "16 hex digits (OTLP JSON writes ids in hex, not base64)",
               "parentSpanId": "16 hex digits or empty"}


@dataclass
class Span:
    """One span as read: its ids, name, times, attributes and events; `error`
    when it failed, `where` its key path in the file, `order` its place there."""
    trace: str
    id: str
    parent: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    error: bool
    where: str
    order: int
    resource: dict[str, Any] = field(default_factory=dict)


def any_value(v: Any, src: Source, key: str) -> Any:
    """An OTLP `AnyValue` as a Python value (an empty one is None)."""
    v = src.obj(v, key, "an AnyValue object (stringValue, intValue, doubleValue, boolValue, arrayValue, "
                        "kvlistValue or bytesValue)")
    if not v:
        return None
    kind = next((k for k in VALUE_KEYS if k in v), None)
    if kind is None or len(v) != 1:
        src.fail(f"unknown value type {', '.join(sorted(v))}", key=key, expected="exactly one of " + ", ".join(VALUE_KEYS))
    x = v[kind]
    if kind == "stringValue" or kind == "bytesValue":
        if not isinstance(x, str):
            src.fail(f"wrong type {type(x).__name__}", key=f"{key}.{kind}", expected="text")
        return x
    if kind == "intValue":
        n = _integer(x, INT64)
        if n is None:
            src.fail(f"not an integer in int64's range: {_short(x)}", key=f"{key}.intValue",
                     expected="an integer or its decimal text, in -2^63 to 2^63-1")
        return n
    if kind == "doubleValue":
        if isinstance(x, bool) or not isinstance(x, (int, float, str)):
            src.fail(f"wrong type {type(x).__name__}", key=f"{key}.doubleValue", expected="a number")
        try:
            return float(x)
        except ValueError:
            src.fail(f"not a number: {x!r}", key=f"{key}.doubleValue", expected="a number")
    if kind == "boolValue":
        if not isinstance(x, bool):
            src.fail(f"wrong type {type(x).__name__}", key=f"{key}.boolValue", expected="true or false")
        return x
    x = src.obj(x, f"{key}.{kind}", "an object with values")
    values = src.get(x, "values", list, f"{key}.{kind}.", "a list", default=[])
    if kind == "arrayValue":
        return [any_value(item, src, f"{key}.arrayValue.values[{i}]") for i, item in enumerate(values)]
    return attributes(values, src, f"{key}.kvlistValue.values")


def attributes(raw: Any, src: Source, key: str) -> dict[str, Any]:
    """A list of OTLP `KeyValue`s as a dict (a later duplicate key wins, as in the SDK)."""
    if not isinstance(raw, list):
        src.fail(f"wrong type {type(raw).__name__}", key=key, expected="a list of {key, value} objects")
    out = {}
    for i, kv in enumerate(raw):
        kv = src.obj(kv, f"{key}[{i}]", "a {key, value} object")
        name = src.get(kv, "key", str, f"{key}[{i}].", "the attribute's name (text)")
        out[name] = any_value(kv.get("value", {}), src, f"{key}[{i}].value")
    return out


def _nanos(span: dict, name: str, src: Source, where: str) -> int:
    x = span.get(name)
    n = _integer(x, UINT64)
    if n is None:
        src.fail("required key is missing" if x is None else f"not a time: {_short(x)}", key=where + name,
                 expected="nanoseconds since the epoch (an integer or its ASCII decimal text, 0 to 2^64-1)")
    return n


def _short(x: Any) -> str:
    """A value quoted for a message, a long one cut (an integer of 5,000 digits is not quoted whole)."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= 10**40:
        return f"an integer of {x.bit_length()} bits"
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _hex_id(span: dict, name: str, src: Source, where: str, required: bool = True) -> str:
    x = span.get(name, None if required else "")
    if not isinstance(x, str) or not HEX_ID[name].match(x):
        src.fail("required key is missing" if x is None else f"not an id: {x!r}", key=where + name,
                 expected=ID_EXPECTED[name])
    return x.lower()


def read_spans(data: Any, src: Source) -> list[Span]:
    """Every span of the file, validated; keys name the export (`[N]` for the
    N-th line of a JSON-lines file), resource, scope and span."""
    exports = data if isinstance(data, list) else [data]
    spans: list[Span] = []
    for e, export in enumerate(exports):
        top = f"[{e}]." if isinstance(data, list) else ""
        export = src.obj(export, top.rstrip(".") or "(top level)", "an OTLP export object with resourceSpans")
        rss = src.get(export, OTLP_KEY, list, top, "a list of resourceSpans")
        for r, rs in enumerate(rss):
            rk = f"{top}{OTLP_KEY}[{r}]"
            rs = src.obj(rs, rk, "a resourceSpans object")
            resource = src.get(rs, "resource", dict, rk + ".", "a resource object", default={})
            res_attrs = attributes(resource.get("attributes", []), src, rk + ".resource.attributes")
            for s, ss in enumerate(src.get(rs, "scopeSpans", list, rk + ".", "a list of scopeSpans", default=[])):
                sk = f"{rk}.scopeSpans[{s}]"
                ss = src.obj(ss, sk, "a scopeSpans object")
                for k, span in enumerate(src.get(ss, "spans", list, sk + ".", "a list of spans", default=[])):
                    where = f"{sk}.spans[{k}]."
                    span = src.obj(span, where.rstrip("."), "a span object")
                    status = src.get(span, "status", dict, where, "a status object", default={})
                    code = status.get("code", 0)
                    if code not in STATUS_CODES or isinstance(code, bool):
                        src.fail(f"unknown status code {code!r}", key=where + "status.code",
                                 expected="0, 1, 2 or STATUS_CODE_UNSET, STATUS_CODE_OK, STATUS_CODE_ERROR")
                    events = []
                    for j, ev in enumerate(src.get(span, "events", list, where, "a list of events", default=[])):
                        ek = f"{where}events[{j}]"
                        ev = src.obj(ev, ek, "an event object")
                        events.append((src.get(ev, "name", str, ek + ".", "the event's name"),
                                       _nanos(ev, "timeUnixNano", src, ek + ".") if "timeUnixNano" in ev else 0,
                                       attributes(ev.get("attributes", []), src, ek + ".attributes")))
                    attrs = attributes(span.get("attributes", []), src, where + "attributes")
                    start = _nanos(span, "startTimeUnixNano", src, where)
                    end = _nanos(span, "endTimeUnixNano", src, where) if "endTimeUnixNano" in span else start
                    spans.append(Span(_hex_id(span, "traceId", src, where), _hex_id(span, "spanId", src, where),
                                      _hex_id(span, "parentSpanId", src, where, required=False),
                                      src.get(span, "name", str, where, "the span's name", default=""),
                                      start, end, attrs, events,
                                      STATUS_CODES[code] == STATUS_ERROR or "error.type" in attrs,
                                      where.rstrip("."), len(spans), res_attrs))
    seen: dict[tuple[str, str], str] = {}
    for sp in spans:
        if (sp.trace, sp.id) in seen:
            src.fail(f"span id {sp.id} appears twice in trace {sp.trace} (first at {seen[sp.trace, sp.id]})",
                     key=sp.where + ".spanId", expected="one span per id")
        seen[sp.trace, sp.id] = sp.where
    return spans
