"""Segmentation: a tool result into evidence units, judged one by one.

A JSON array gives one unit per item (one search hit each), encoded as
json.dumps(item, ensure_ascii=False, sort_keys=True), so that a hit's key
order and spacing do not matter; any other text gives its blank-line
separated paragraphs. Also used by imprint_core.tools for a result's segments.
"""
from __future__ import annotations

import json
import re
import threading
from typing import Any, NamedTuple

from ._fast import accel
from ._fast.memo import shared

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# json.dumps(item, ensure_ascii=False, sort_keys=True), built once. What
# json.loads gives cannot be circular, so the check for it is left out.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, check_circular=False)
try:   # the C encoder JSONEncoder.encode makes on every call (for an item that is not a str), made once
    from _json import make_encoder as _c_make_encoder
    _c_iterencode = _c_make_encoder(None, _ENCODER.default, json.encoder.encode_basestring, None,
                                    _ENCODER.key_separator, _ENCODER.item_separator, True, False, True)
except ImportError:  # pragma: no cover - CPython has it
    _c_iterencode = None


def _encode_item(item) -> str:
    """json.dumps of an item that is not a str (segment keeps those as they are)."""
    if _c_iterencode is None:
        return _ENCODER.encode(item)
    return "".join(_c_iterencode(item, 0))
_last = threading.local()   # the text segment() last read as JSON, and what it gave


class Leaves(NamedTuple):
    """What the compiled path read of a JSON array's leaves (the scalars in
    it), where it gave the units without parsing."""
    first: Any      # the first, in the text's order, that is not None or "" (a str, int, float or bool); None: none is
    plain: bool     # no leaf is a non-empty str
    hollow: bool    # some list or dict in it is empty


def last_parsed(text: str, missing: object) -> object:
    """What json.loads(text) gave when segment() last parsed it on this
    thread (echo.evidence_free reads the same result's text next); a Leaves
    where the compiled path read it without parsing; else `missing`. Read
    only: the value is segment()'s own."""
    got = getattr(_last, "parsed", None)
    if got is not None and (got[0] is text or got[0] == text):
        return got[1]
    return missing


@shared(key=lambda text: text, size=len, copy=list)
def segment(text: str) -> list[str]:
    """Split a tool result into evidence units: the items of a JSON array (one
    hit each), else blank-line separated paragraphs."""
    stripped, ext = text.strip(), accel.ext
    if stripped[:1] == "[" and stripped[-1:] == "]":
        fast = ext.json_units(stripped) if ext is not None else None
        if fast is not None:
            _last.parsed = (stripped, Leaves(*fast[1:]))
            return fast[0]
        try:
            items = json.loads(stripped)
        except (ValueError, RecursionError):   # nested too deep for the parser: plain text
            items = None
        else:
            _last.parsed = (stripped, items)
        if isinstance(items, list):
            encode = _encode_item
            return [i if isinstance(i, str) else encode(i) for i in items]
    if ext is not None:
        return ext.paragraphs(text)
    return [p for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
