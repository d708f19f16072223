"""Segmentation: a tool result into evidence units, judged one by one.

A JSON array gives one unit per item (one search hit each), encoded as
json.dumps(item, ensure_ascii=False, sort_keys=True), so that a hit's key
order and spacing do not matter; any other text gives its blank-line
separated paragraphs. Also used by imprint_core.tools for a result's segments.
"""
from __future__ import annotations

import json
import re

from ._memo import shared

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# json.dumps(item, ensure_ascii=False, sort_keys=True), built once. What
# json.loads gives cannot be circular, so the check for it is left out.
_encode_item = json.JSONEncoder(ensure_ascii=False, sort_keys=True, check_circular=False).encode


@shared(key=lambda text: text, size=len, copy=list)
def segment(text: str) -> list[str]:
    """Split a tool result into evidence units: the items of a JSON array (one
    hit each), else blank-line separated paragraphs."""
    stripped = text.strip()
    if stripped[:1] == "[" and stripped[-1:] == "]":
        try:
            items = json.loads(stripped)
        except (ValueError, RecursionError):   # nested too deep for the parser: plain text
            items = None
        if isinstance(items, list):
            encode = _encode_item
            return [i if isinstance(i, str) else encode(i) for i in items]
    return [p for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
