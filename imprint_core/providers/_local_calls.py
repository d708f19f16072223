"""The local provider's tool calls, as text, with no model in sight.

- `tool_call_grammar`: the llguidance Lark grammar decoding follows when
  tools are offered (free text, or text followed by `<tool_call>` blocks
  whose JSON must name an offered tool with arguments valid for its
  schema, narrowed by `_strict`).
- `parse_tool_calls`: the calls in a reply's raw text; never raises, an
  unfinished or malformed block becomes a ToolCall with `invalid_arguments`.
- `ReplyText`: incremental detokenization that holds back what may be the
  start of a call, so call markup never reaches the reply text.

`local.py` (the provider) re-exports the public names.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, Callable, Literal, Sequence

from ..types import ToolCall, ToolSpec

ToolChoice = Literal["auto", "required", "none"]

TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"
_CALL_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
_NAME_IN = re.compile(r'"name"\s*:\s*"([^"\\]*)"')


# ---- tool-call grammar ---------------------------------------------------------------------
SAFE_INTEGER = 2 ** 53 - 1  # the interoperable JSON integer range
NUMBER_BOUND = 1e15
NUMBER_STEP = 1e-6


def _strict(schema: Any) -> Any:
    """Narrow a tool's schema for generation; whatever the narrowed schema
    accepts, the tool's own schema accepts too. Objects without
    `additionalProperties` get `false` (the model may write only the
    properties the schema names). Numbers without bounds get some: integers
    the interoperable range, other numbers +-1e15 and at most six decimals;
    unbounded, the model was seen writing digits ("10.2222222...") until its
    output allowance ran out."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out or out.get("type") == "object") and "additionalProperties" not in out \
                and "patternProperties" not in out:
            out["additionalProperties"] = False
        if out.get("type") in ("integer", "number"):
            bound = SAFE_INTEGER if out["type"] == "integer" else NUMBER_BOUND
            if "maximum" not in out and "exclusiveMaximum" not in out:
                out["maximum"] = bound
            if "minimum" not in out and "exclusiveMinimum" not in out:
                out["minimum"] = -bound
            if out["type"] == "number" and "multipleOf" not in out:
                out["multipleOf"] = NUMBER_STEP
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def tool_call_grammar(tools: Sequence[ToolSpec], *, choice: ToolChoice = "auto", max_calls: int = 1) -> str:
    """A llguidance Lark grammar for one reply.

    auto: plain text that never contains `<tool_call>`, or text followed by
    1..max_calls call blocks; required: call blocks only. Each block is
    `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, spaced
    exactly as the chat template renders calls, so a generated call reappears
    token for token in the next prompt."""
    variants = [{"type": "object",
                 "properties": {"name": {"const": t.name}, "arguments": _strict(copy.deepcopy(t.parameters))},
                 "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    schema = {"x-guidance": {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False,
                             "lenient": True},
              "anyOf": variants}
    more = f' ("\\n{TOOL_OPEN}" body){{0,{max_calls - 1}}}' if max_calls > 1 else ""
    start = f'"{TOOL_OPEN}" body{more}' if choice == "required" else f"PLAIN | head body{more}"
    lines = ["%llguidance {}",
             f"start: {start}",
             f'body: "\\n" call "\\n{TOOL_CLOSE}"',
             f"call: %json {json.dumps(schema)}"]
    if choice != "required":
        # PLAIN never contains the trigger, so a call cannot escape the
        # grammar by passing for text; `head` ends at the first trigger.
        lines += [f'head[lazy]: TEXT "{TOOL_OPEN}"',
                  r"TEXT: /(.|\n)*/",
                  rf"PLAIN: /(?s:.*)/ & ~/(?s:.*){re.escape(TOOL_OPEN)}(?s:.*)/"]
    return "\n".join(lines)


def parse_tool_calls(raw: str, new_id: Callable[[], str]) -> list[ToolCall]:
    """The calls in a reply's raw text. Never raises: a block that is not a
    complete, well-formed call becomes a ToolCall with `invalid_arguments`."""
    start = raw.find(TOOL_OPEN)
    if start < 0:
        return []
    calls: list[ToolCall] = []
    rest = raw[start:]
    pos = 0
    for match in _CALL_BLOCK.finditer(rest):
        if rest[pos:match.start()].strip():
            break
        calls.append(_one_call(match.group(1), new_id(), complete=True))
        pos = match.end()
    tail = rest[pos:].strip()
    if tail:  # an unfinished block (output limit, or stopped): report it, never drop it
        body = tail[len(TOOL_OPEN):].strip() if tail.startswith(TOOL_OPEN) else tail
        # Cut inside the closing tag only: the call itself is complete.
        for k in range(len(TOOL_CLOSE), 0, -1):
            if body.endswith(TOOL_CLOSE[:k]):
                body = body[:-k].rstrip("\n")
                break
        calls.append(_one_call(body, new_id(), complete=_is_json(body)))
    return calls


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _one_call(body: str, call_id: str, *, complete: bool) -> ToolCall:
    try:
        obj = json.loads(body) if complete else None
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str) and isinstance(obj.get("arguments"), dict) \
            and set(obj) <= {"name", "arguments"}:
        return ToolCall(call_id, obj["name"], obj["arguments"])
    name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else None
    if name is None:
        found = _NAME_IN.search(body)
        name = found.group(1) if found else ""
    why = "" if complete else " (the call was cut off before it was complete)"
    return ToolCall(call_id, name, {}, invalid_arguments=body + why)


# ---- the reply's visible text --------------------------------------------------------------
class ReplyText:
    """Incremental detokenization. With tools offered, text that may be the
    start of a call (`<tool_call>`, or the newline before it) is held back
    until it is known not to be; call markup never reaches the reply text."""

    def __init__(self, tokenizer: Any, stop_ids: set[int], watch_calls: bool):
        self._tok, self._stop, self._watch = tokenizer, stop_ids, watch_calls
        self.ids: list[int] = []
        self.raw = ""
        self._prefix, self._read = 0, 0
        self._emitted = 0
        self.in_call = False

    def push(self, token: int) -> str:
        if token in self._stop:
            return ""
        self.ids.append(token)
        before = self._tok.decode(self.ids[self._prefix:self._read])
        after = self._tok.decode(self.ids[self._prefix:])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.raw += after[len(before):]
            self._prefix, self._read = self._read, len(self.ids)
        return self._release(final=False)

    def finish(self) -> str:
        tail = self._tok.decode(self.ids[self._prefix:])
        done = self._tok.decode(self.ids[self._prefix:self._read])
        if len(tail) > len(done):
            self.raw += tail[len(done):]
            self._prefix = self._read = len(self.ids)
        return self._release(final=True)

    @property
    def content(self) -> str:
        if not self._watch:
            return self.raw
        i = self.raw.find(TOOL_OPEN)
        if i < 0:
            return self.raw
        text = self.raw[:i]
        return text[:-1] if text.endswith("\n") else text

    def _release(self, final: bool) -> str:
        if self._watch:
            i = self.raw.find(TOOL_OPEN)
            if i >= 0:
                self.in_call = True
                safe = len(self.content)
            elif final:
                safe = len(self.raw)
            else:
                hold = 0
                for trigger in ("\n" + TOOL_OPEN, TOOL_OPEN):
                    for k in range(min(len(trigger), len(self.raw)), 0, -1):
                        if self.raw.endswith(trigger[:k]):
                            hold = max(hold, k)
                            break
                safe = len(self.raw) - hold
        else:
            safe = len(self.raw)
        if safe <= self._emitted:
            return ""
        out = self.raw[self._emitted:safe]
        self._emitted = safe
        return out
