"""What the local provider builds around its model, apart from decoding.

- `TokenizerCounter`: counts with the model folder's tokenizer and chat
  template, so the ledger's units are the ids the model processes
  (`message_dict` and `tool_dict` render for the template).
- `_attention_implementation`: SDPA with single-query bfloat16 decoding
  upcast to float32 (registered with transformers when a model loads).
- `_HiddenLog` and `_Context`: the per-context prefix-cache record (KV
  cache, the ids it covers, final hidden states); `local.LocalProvider`
  keeps one per `context_id` and decides what to reuse.

torch and transformers are passed in or imported inside functions, never
when this module is imported. `local.py` re-exports the public names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..counting import common_prefix_len
from .openai_format import openai_message, openai_tool
from ..types import Message, ToolSpec

ATTENTION = "imprint_sdpa"


# ---- attention ----------------------------------------------------------------------------------
def _attention_implementation(torch: Any) -> str:
    """SDPA, but a single query (decoding) in bfloat16 is computed in float32:
    the CPU kernel is slow for one bf16 query over a long cache (measured per
    step at a 1,500-token context: 178 ms, against 105 ms upcast and 95 ms in
    float32). Prefill keeps bf16, where it is fast. The implementation's
    masks are SDPA's: without a registered mask function transformers builds
    none, and a prompt prefilled after a cached prefix would attend as if it
    started at position 0. Plain "sdpa" where these interfaces are missing."""
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return "sdpa"

    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        if query.shape[2] == 1 and query.dtype == torch.bfloat16:
            if attention_mask is not None and attention_mask.is_floating_point():
                attention_mask = attention_mask.float()
            out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(),
                                                  attention_mask, **kwargs)
            return out.to(query.dtype), weights
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(ATTENTION, attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return ATTENTION


# ---- rendering and counting ------------------------------------------------------------------
def message_dict(m: Message) -> dict[str, Any]:
    """A Message in the shape the chat template takes (arguments as a dict)."""
    return openai_message(m, json_arguments=False)


tool_dict = openai_tool


class TokenizerCounter:
    """Counts with the model's tokenizer and chat template: the units are the
    token ids the model processes. Thread-safe (the tokenizer is Rust)."""

    def __init__(self, tokenizer: Any, name: str = "hf-tokenizer"):
        self.tokenizer = tokenizer
        self._backend = tokenizer.backend_tokenizer
        self.name = name

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec], *,
               add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            [message_dict(m) for m in messages], tools=[tool_dict(t) for t in tools] or None,
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


# ---- the per-context prefix cache ------------------------------------------------------------
class _HiddenLog:
    """Final hidden states of cached positions, in chunks (appending one row
    per decoded token must not copy the whole log)."""

    def __init__(self):
        self.chunks: list[Any] = []
        self.length = 0

    def append(self, rows: Any) -> None:
        self.chunks.append(rows)
        self.length += rows.shape[0]

    def truncate(self, n: int) -> None:
        while self.chunks and self.length - self.chunks[-1].shape[0] >= n:
            self.length -= self.chunks.pop().shape[0]
        if self.length > n:
            keep = self.chunks[-1].shape[0] - (self.length - n)
            self.chunks[-1] = self.chunks[-1][:keep]
            self.length = n

    def row(self, i: int) -> Any:
        for chunk in self.chunks:
            if i < chunk.shape[0]:
                return chunk[i:i + 1]
            i -= chunk.shape[0]
        raise IndexError("hidden-state row out of range")


@dataclass
class _Context:
    cache: Any = None                  # a transformers DynamicCache
    ids: list[int] = field(default_factory=list)   # prompt + generated ids of the last request
    kv_len: int = 0                    # how many of `ids` have KV entries (len(ids) or len(ids) - 1)
    hidden: _HiddenLog = field(default_factory=_HiddenLog)
