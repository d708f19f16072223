"""The local provider's counter: the model folder's tokenizer and chat
template, so the ledger's units are the ids the model processes (messages
and tools rendered by `openai_format`, arguments as a dict)."""
from __future__ import annotations

from typing import Any, Sequence

from ..counting import common_prefix_len
from ..types import Message, TokenCounter, ToolSpec
from .openai_format import openai_message, openai_tool


class TokenizerCounter(TokenCounter):
    """Counts with the model's tokenizer and chat template: the units are the
    token ids the model processes. Thread-safe (the tokenizer is Rust)."""

    def __init__(self, tokenizer: Any, name: str = "hf-tokenizer"):
        self.tokenizer = tokenizer
        self._backend = tokenizer.backend_tokenizer
        self.name = name

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec], *,
               add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            [openai_message(m, json_arguments=False) for m in messages], tools=[openai_tool(t) for t in tools] or None,
            add_generation_prompt=add_generation_prompt, tokenize=False)

    def encode(self, text: str) -> list[int]:
        return self._backend.encode(text, add_special_tokens=False).ids

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[int, ...]:
        return tuple(self.encode(self.render(messages, tools)))

    def output_units(self, reply: Message) -> tuple[int, ...]:
        """The reply's ids as they appear in the next prompt, up to and
        including its end-of-turn token (the newline after it is the
        template's). Used only when a reply's generated ids are unknown."""
        probe = [Message("user", "?")]
        head = self.render(probe, [], add_generation_prompt=True)
        full = self.render(probe + [reply], [], add_generation_prompt=False)
        if not full.startswith(head):  # cannot happen with our template; count the whole tail
            head = head[:common_prefix_len(head, full)]  # type: ignore[arg-type]
        tail = full[len(head):]
        if tail.endswith("\n"):
            tail = tail[:-1]
        return tuple(self.encode(tail))

    def to_tokens(self, units: int) -> int:
        return units
