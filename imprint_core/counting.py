"""Prompt counting: the UTF-8 byte estimate, and the hook for tokenizers.

A counter turns a formatted request into *units* (bytes for the estimate,
token ids for a tokenizer) and units into tokens. The ledger only ever sees
token figures and unit sequences, so a real tokenizer plugs in unchanged.
"""
from __future__ import annotations

import json
import math
from typing import Sequence

from .types import Message, ToolSpec

# 3 bytes per token: English prose runs ~4 bytes/token on BPE vocabularies,
# but JSON, code, numbers and non-English text run closer to 2-3. The budget
# is conservative accounting, so the default leans to over-counting: an
# over-count stops research a little early, an under-count lets it overspend.
DEFAULT_BYTES_PER_TOKEN = 3.0


def render_message(m: Message) -> str:
    """The byte estimate's canonical text for one message. Rendering is per
    message and concatenated, so a conversation's rendering is a prefix of the
    next one's, which is what the prefix-refund policy measures."""
    head = f"<|{m.role}|>"
    if m.name:
        head += f" {m.name}"
    if m.tool_call_id:
        head += f" [{m.tool_call_id}]"
    body = m.content
    if m.tool_calls:
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
        body += "\n" + json.dumps(calls, ensure_ascii=False, sort_keys=True)
    return f"{head}\n{body}\n"


def render_tools(tools: Sequence[ToolSpec]) -> str:
    if not tools:
        return ""
    return "<|tools|>\n" + "\n".join(
        json.dumps(t.to_dict(), ensure_ascii=False, sort_keys=True) for t in tools) + "\n"


class ByteEstimateCounter:
    """Remote prompt counts: bytes of the formatted request / ratio, rounded up."""

    def __init__(self, bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN):
        if not bytes_per_token > 0:
            raise ValueError(f"bytes_per_token must be positive, got {bytes_per_token}")
        self.bytes_per_token = float(bytes_per_token)
        self.name = f"utf8-bytes/{self.bytes_per_token:g}"
        # A research transcript is re-counted before every request; each
        # message is rendered once. Keyed by identity (the entry keeps the
        # message alive, so an id is never reused while cached).
        self._rendered: dict[int, tuple[Message, bytes]] = {}

    def _render(self, m: Message) -> bytes:
        hit = self._rendered.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        data = render_message(m).encode("utf-8")
        if len(self._rendered) >= 8192:
            self._rendered.clear()
        self._rendered[id(m)] = (m, data)
        return data

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bytes:
        return render_tools(tools).encode("utf-8") + b"".join(self._render(m) for m in messages)

    def output_units(self, reply: Message) -> bytes:
        return render_message(reply).encode("utf-8")

    def to_tokens(self, units: int) -> int:
        return math.ceil(units / self.bytes_per_token) if units > 0 else 0


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, by bisection over slice equality
    (C-speed comparisons, O(n log n) instead of a Python loop over n)."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    if a[:n] == b[:n]:
        return n
    lo, hi = 1, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class RegexTokenCounter:
    """A deterministic stand-in tokenizer (words, numbers and punctuation
    marks are one token each, ids are 32-bit hashes). The scripted provider
    uses it for "exact counts": it processes exactly the ids it counts, as a
    local model does with its own tokenizer."""

    name = "regex-tokens"

    def __init__(self):
        import re
        import xxhash
        self._pattern = re.compile(r"\w+|[^\w\s]")
        self._h = xxhash.xxh32_intdigest

    def encode(self, text: str) -> tuple[int, ...]:
        return tuple(self._h(tok.encode()) for tok in self._pattern.findall(text))

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[int, ...]:
        return self.encode(render_tools(tools) + "".join(render_message(m) for m in messages))

    def output_units(self, reply: Message) -> tuple[int, ...]:
        return self.encode(render_message(reply))

    def to_tokens(self, units: int) -> int:
        return units
