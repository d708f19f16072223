"""Prompt counting: the UTF-8 byte estimate, and the hook for tokenizers.

A counter turns a formatted request into *units* (bytes for the estimate,
token ids for a tokenizer) and units into tokens. The ledger only ever sees
token figures and unit sequences, so a real tokenizer plugs in unchanged.
"""
from __future__ import annotations

import json
import math
import threading
from operator import is_
from dataclasses import dataclass, field
from typing import Sequence

from .errors import CountingUnavailable
from .types import CalibratedTokenCounter, Message, Provider, TokenCounter, ToolCall, ToolSpec, Usage

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


class GrownBytes:
    """A prompt's byte-estimate units without copying the transcript: the
    first `n` bytes of a buffer that is written only past its fill, never
    resized and never rewritten. `lineage` names the series of prompts the
    buffer holds: a buffer that runs out of room is copied into a larger one
    of the same lineage, so a view of one lineage that is no longer than
    another is a prefix of it (the ledger's prefix check is then a comparison
    of lengths). Reads as the bytes it stands for."""
    __slots__ = ("buffer", "n", "lineage")

    def __init__(self, buffer: bytearray, n: int, lineage: object = None):
        self.buffer, self.n, self.lineage = buffer, n, lineage

    def __len__(self) -> int:
        return self.n

    def __bytes__(self) -> bytes:
        return bytes(memoryview(self.buffer)[:self.n])

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self.n)
            return bytes(memoryview(self.buffer)[start:stop]) if step == 1 else bytes(self)[i]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("GrownBytes index out of range")
        return self.buffer[i]

    def __iter__(self):
        return iter(bytes(self))

    def __eq__(self, other: object) -> bool:
        return bytes(self) == (bytes(other) if isinstance(other, GrownBytes) else other)

    def __hash__(self) -> int:
        return hash(bytes(self))

    def __repr__(self) -> str:
        return f"GrownBytes({bytes(self)!r})"


def as_bytes_like(units):
    """Units as a plain sequence: GrownBytes copied out, anything else as is."""
    return bytes(units) if isinstance(units, GrownBytes) else units


class ByteEstimateCounter(TokenCounter):
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
        # The last prompt counted: (tools, messages, units). The next request
        # of the same context is that prompt plus the round's messages, so its
        # units are the same buffer with those messages' bytes appended:
        # rendering and joining the whole transcript again each round grew
        # with its length. Same objects only (the tuples keep them alive, so
        # identity is safe); the lock: section workers count concurrently.
        self._last: tuple[tuple[ToolSpec, ...], tuple[Message, ...], GrownBytes] | None = None
        self._lock = threading.Lock()

    def _render(self, m: Message) -> bytes:
        hit = self._rendered.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        data = render_message(m).encode("utf-8")
        if len(self._rendered) >= 8192:
            self._rendered.clear()
        self._rendered[id(m)] = (m, data)
        return data

    def grown_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> GrownBytes:
        """`prompt_units` as a GrownBytes: no copy of the part the last prompt had."""
        tools, messages = tuple(tools), tuple(messages)
        with self._lock:
            last = self._last
            if last is not None and _same(last[0], tools) and _extends(messages, last[1]):
                prev = last[2]
                buf, n, lineage = prev.buffer, prev.n, prev.lineage
                parts = [self._render(m) for m in messages[len(last[1]):]]
            else:
                buf, n, lineage = bytearray(), 0, object()
                parts = [render_tools(tools).encode("utf-8")] + [self._render(m) for m in messages]
            need = n + sum(map(len, parts))
            if need > len(buf):
                # Room for as much again: bytearray's own growth (an eighth
                # more) moved the whole buffer every few rounds.
                grown = bytearray(max(need, 2 * len(buf), 1 << 16))
                grown[:n] = memoryview(buf)[:n]
                buf = grown
            for part in parts:
                buf[n:n + len(part)] = part  # same length: written in place, never resized
                n += len(part)
            units = GrownBytes(buf, n, lineage)
            self._last = (tools, messages, units)
        return units

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bytes:
        return bytes(self.grown_units(messages, tools))

    def count(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[GrownBytes, int]:
        """(units, tokens) for the loop's requests: the units uncopied."""
        units = self.grown_units(messages, tools)
        return units, self.to_tokens(len(units))

    def output_units(self, reply: Message) -> bytes:
        return render_message(reply).encode("utf-8")

    def to_tokens(self, units: int) -> int:
        return math.ceil(units / self.bytes_per_token) if units > 0 else 0


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(map(is_, a, b))


def _extends(longer: tuple, prefix: tuple) -> bool:
    return len(longer) >= len(prefix) and all(map(is_, longer, prefix))


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, by bisection over slice equality
    (C-speed comparisons, O(n log n) instead of a Python loop over n)."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:
        return 0
    if isinstance(a, bytes) and isinstance(b, bytes):
        # The usual case, one prompt extending the last: no copy of either.
        if (b.startswith(a) if n == len(a) else a.startswith(b)):
            return n
    elif a[:n] == b[:n]:
        return n
    lo, hi = 1, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class ProcessedUnits:
    """Per context, the units its provider has processed: the last prompt's,
    then its output's. Prefix reuse is the part of a new prompt that one of
    them already covers (prefix-refund charges only the rest)."""

    def __init__(self):
        self._seen: dict[str, tuple[Sequence[int], Sequence[int]]] = {}

    def reused(self, context_id: str, units: Sequence[int]) -> int:
        seen = self._seen.get(context_id)
        return 0 if seen is None else reused_prefix(seen, units)

    def saw(self, context_id: str, prompt_units: Sequence[int], output_units: Sequence[int]) -> None:
        # Kept as two parts: joining them copied the whole transcript every round.
        self._seen[context_id] = (prompt_units, bytes(output_units)) \
            if isinstance(prompt_units, (bytes, GrownBytes)) else (tuple(prompt_units), tuple(output_units))

    def forget(self, context_id: str) -> None:
        self._seen.pop(context_id, None)

    def __len__(self) -> int:  # contexts held: section workers' are forgotten after their request
        return len(self._seen)


def reused_prefix(seen: tuple[Sequence[int], Sequence[int]], units: Sequence[int]) -> int:
    """common_prefix_len(prompt + output, units) for the two parts a context
    has seen, without joining them or copying the transcript."""
    prompt, output = seen
    if (isinstance(prompt, GrownBytes) and isinstance(units, GrownBytes) and prompt.lineage is not None
            and prompt.lineage is units.lineage):
        n = min(len(prompt), len(units))  # one lineage, only ever extended: the shorter is a prefix
    else:
        prompt, units = as_bytes_like(prompt), as_bytes_like(units)
        n = common_prefix_len(prompt, units)
    if n < len(prompt) or not output:
        return n
    if isinstance(output, bytes):
        data = units.buffer if isinstance(units, GrownBytes) else units
        if isinstance(data, (bytes, bytearray)) and data.startswith(output, n, len(units)):
            return n + len(output)
    return n + common_prefix_len(output, as_bytes_like(units[n:]))


class RegexTokenCounter(TokenCounter):
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


# ---- counting modes: which counter a provider's requests are counted with ----------------------------
# The modes that count, each giving a figure of its own (`RequestRecord.estimates`,
# the report's and the gate's `est_<mode>` columns); `auto` counts with one of them.
COUNTED_MODES: tuple[str, ...] = ("byte", "calibrated", "tokenizer")
COUNTING_MODES: tuple[str, ...] = (*COUNTED_MODES, "auto")


def count_prompt(counter: TokenCounter, messages: Sequence[Message], tools: Sequence[ToolSpec]
                 ) -> tuple[Sequence[int], int]:
    """(units, tokens) of a prompt: the counter's own `count` (by default
    `to_tokens(len(prompt_units))`, see `TokenCounter.count`)."""
    return counter.count(messages, tools)


@dataclass
class Counting:
    """How one loop counts its prompts: the counter the budget uses, the one
    it falls back to when that one cannot count a request (with a trace
    event), the modes counted beside it for the report, and whether
    reported usage settles the ledger (reconciliation).

    `mode` is the `chat.token_counting` setting; `used` the mode it resolved
    to (`native` for providers that count for themselves: a local model's
    tokenizer, the stub); `exact` says the count is the server's own."""
    mode: str
    used: str
    counter: TokenCounter
    fallback: TokenCounter | None = None
    exact: bool = False
    reconcile: bool = False
    note: str | None = None
    side: dict[str, TokenCounter] = field(default_factory=dict)
    calibration: CalibratedTokenCounter | None = None

    def describe(self) -> dict:
        return {"mode": self.mode, "used": self.used, "counter": self.counter.name, "exact": self.exact,
                "reconcile": self.reconcile, "fallback": self.fallback.name if self.fallback else None,
                "note": self.note, "side": sorted(self.side)}

    def side_counts(self, messages: Sequence[Message], tools: Sequence[ToolSpec], used: TokenCounter,
                    tokens: int) -> dict[str, int] | None:
        """Every mode's figure for this prompt, for the report (modes that
        cannot count it are left out); None where there is one mode."""
        if not self.side:
            return None
        out: dict[str, int] = {}
        for mode, counter in self.side.items():
            if counter is used:
                out[mode] = tokens
                continue
            try:
                out[mode] = count_prompt(counter, messages, tools)[1]
            except CountingUnavailable:
                pass
        return out

    def learn(self, messages: Sequence[Message], tools: Sequence[ToolSpec], usage: Usage | None) -> None:
        """Feed a measured prompt to the calibration, which the `calibrated`
        mode fits its byte estimate to."""
        if self.calibration is not None and usage is not None and usage.prompt_tokens:
            self.calibration.observe(messages, tools, usage.prompt_tokens)


def output_units(counter: TokenCounter, usage: Usage | None, text: str, calls: Sequence[ToolCall]) -> Sequence[int]:
    """What a reply appended to the model's context. Nothing generated
    means nothing charged: an empty reply's formatting is not output."""
    if usage is not None and usage.output_units is not None:
        return usage.output_units
    if not text and not calls:
        return ()
    return counter.output_units(Message("assistant", text, tool_calls=tuple(calls)))


def select_counting(mode: str, provider: Provider) -> Counting:
    """Resolve the `chat.token_counting` setting for `provider`.

    A provider that offers counting modes declares them
    (`provider.counting_modes`: the server's template and tokenizer, or None,
    and the calibrated estimate, or None, beside its `counter`, the byte
    estimate); one that declares None counts for itself and the setting
    does not apply to it. `auto`: the tokenizer, else the
    calibrated estimate, else the byte estimate; `tokenizer` or
    `calibrated` where the provider has none fall back to the byte
    estimate, and `note` says so (the loop traces it)."""
    if mode not in COUNTING_MODES:
        raise ValueError(f"unknown counting mode {mode!r}; allowed: {', '.join(COUNTING_MODES)}")
    native, offered = provider.counter, provider.counting_modes
    if offered is None:
        return Counting(mode, "native", native, exact=native.exact)
    tokenizer, calibrated, reconcile = offered.tokenizer, offered.calibrated, offered.reports_usage
    side: dict[str, TokenCounter] = {"byte": native}
    if calibrated is not None:
        side["calibrated"] = calibrated
    if tokenizer is not None:
        side["tokenizer"] = tokenizer
    note = None
    if mode in ("tokenizer", "auto") and tokenizer is not None:
        # A tokenizer that fails on a request falls back to what `auto` would
        # have picked without it.
        fallback = calibrated if mode == "auto" and calibrated is not None else native
        return Counting(mode, "tokenizer", tokenizer, fallback, True, reconcile, None, side, calibrated)
    if mode == "tokenizer":
        note = f"no tokenizer for {provider.name}: counting with the byte estimate"
        return Counting(mode, "byte", native, None, False, reconcile, note, side, calibrated)
    if mode in ("calibrated", "auto") and calibrated is not None:
        if mode == "auto":
            note = (f"no tokenizer for {provider.name}: counting with the "
                    f"calibrated estimate")
        return Counting(mode, "calibrated", calibrated, native, False, reconcile, note, side, calibrated)
    if mode != "byte":
        note = (f"neither a tokenizer nor a calibration for {provider.name}: "
                f"counting with the byte estimate")
    return Counting(mode, "byte", native, None, False, reconcile, note, side, calibrated)
