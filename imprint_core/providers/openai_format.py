"""Messages and tools in the chat-completions shape, shared by the remote
wire format and the local chat template (which takes arguments as a dict)."""
from __future__ import annotations

import json
from typing import Any

from ..types import Message, ToolSpec


def openai_message(m: Message, *, json_arguments: bool) -> dict[str, Any]:
    """`json_arguments`: arguments as a JSON string (the wire) or a dict (a
    chat template). Text that did not parse is passed on as the model wrote it."""
    d: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        d["tool_calls"] = [{
            "id": c.id, "type": "function",
            "function": {"name": c.name,
                         "arguments": c.invalid_arguments if c.invalid_arguments is not None
                         else json.dumps(c.arguments, ensure_ascii=False) if json_arguments else c.arguments}}
            for c in m.tool_calls]
    if m.role == "tool":
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
    return d


def openai_tool(t: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": t.to_dict()}
