"""What the local provider builds around its model, apart from decoding.

- `TokenizerCounter`: counts with the model folder's tokenizer and chat
  template, so the ledger's units are the ids the model processes
  (`message_dict` and `tool_dict` render for the template).
- `_attention_implementation`: SDPA with single-query bfloat16 decoding
  upcast to float32, and prefill after a cached prefix without per-layer
  mask conversion or repeated key/value heads (registered with
  transformers when a model loads).
- `_HiddenLog` and `_Context`: the per-context prefix-cache record (KV
  cache, the ids it covers, final hidden states); `local.LocalProvider`
  keeps one per `context_id` and decides what to reuse.
- `kv_cache`: a transformers DynamicCache whose layers write into buffers
  with spare room (`_growing_layer`) instead of concatenating.

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
    """SDPA, with two changes to what transformers' "sdpa" does on the CPU:

    - A single query (decoding) in bfloat16 is computed in float32: the CPU
      kernel is slow for one bf16 query over a long cache (measured per step
      at a 1,500-token context: 178 ms, against 105 ms upcast and 95 ms in
      float32).
    - Several queries under a mask (a prompt prefilled after a cached
      prefix) get the mask as an additive float tensor, converted once per
      forward pass instead of in every layer, and the key/value heads as
      they are (`enable_gqa`) instead of repeated by `repeat_kv`, which
      copied the whole cache three times per layer. Measured at 600 queries
      over 2,600 positions: the two took 8% of the prefill.

    The implementation's masks are SDPA's: without a registered mask function
    transformers builds none, and a prompt prefilled after a cached prefix
    would attend as if it started at position 0. Plain "sdpa" where these
    interfaces are missing."""
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return "sdpa"
    # The last bool mask seen and its float form: the layers of one forward
    # pass share one mask object. One tuple, swapped whole, so that two models
    # running at once each read a matching pair (at worst they convert again).
    converted: list[Any] = [None]

    def additive(mask: Any, dtype: Any) -> Any:
        entry = converted[0]
        if entry is None or entry[0] is not mask or entry[1].dtype != dtype:
            entry = (mask, torch.zeros(mask.shape, dtype=dtype).masked_fill_(mask.logical_not(), float("-inf")))
            converted[0] = entry
        return entry[1]

    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
        if query.shape[2] == 1 and query.dtype == torch.bfloat16:
            if attention_mask is not None and attention_mask.is_floating_point():
                attention_mask = attention_mask.float()
            out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(),
                                                  attention_mask, **kwargs)
            return out.to(query.dtype), weights
        if query.shape[2] > 1 and attention_mask is not None and attention_mask.dtype == torch.bool \
                and kwargs.get("position_bias") is None and query.shape[0] == 1:
            out = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=additive(attention_mask, query.dtype), scale=kwargs.get("scaling"),
                enable_gqa=query.shape[1] != key.shape[1])
            return out.transpose(1, 2).contiguous(), None
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
KV_BLOCK = 512  # buffer capacity grows in whole blocks, at least doubling


def kv_cache(torch: Any, config: Any) -> Any:
    """A DynamicCache for `config` whose full-attention layers keep keys and
    values in buffers with spare capacity: appending a token writes one row
    instead of `torch.cat` copying the whole cache, and `crop` (prefix reuse)
    only narrows the view. DynamicLayer's concatenation was the largest cost
    of decoding at long context (44% of a 12-round conversation's last round
    at 7.5k tokens: every step copied every layer's cache twice; see
    reports/bench/peers-profile.md). Layers of any other kind are left as
    transformers made them."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    cache = DynamicCache(config=config)
    layer_class = _growing_layer(torch, DynamicLayer)
    cache.layers = [layer_class() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    for layer in cache.layers:
        if isinstance(layer, layer_class):
            layer.max_rows = getattr(config, "max_position_embeddings", None)
    return cache


_GROWING: dict[Any, Any] = {}


def _growing_layer(torch: Any, base: Any) -> Any:
    """The DynamicLayer subclass `kv_cache` uses, made once per base class
    (transformers is imported lazily, so the class is built at run time)."""
    if base in _GROWING:
        return _GROWING[base]

    class GrowingLayer(base):
        # keys/values: views of the first `length` rows of the buffers, so
        # every reader of a DynamicLayer (seq length, masks, crop) still works.
        max_rows: int | None = None  # the model's context window, where known

        def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
            super().lazy_initialization(key_states, value_states)
            self._kbuf = self._vbuf = None
            self._length = 0

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self._length = min(self._length, self.get_seq_length())  # crop() narrowed the views
            end = self._length + key_states.shape[-2]
            if self._kbuf is None or end > self._kbuf.shape[-2]:
                had = self._kbuf.shape[-2] if self._kbuf is not None else 0
                capacity = -(-max(end, 2 * had) // KV_BLOCK) * KV_BLOCK
                capacity = max(end, min(capacity, self.max_rows or capacity))  # never past the context window
                keys, values = self._grown(self._kbuf, key_states, capacity), self._grown(self._vbuf, value_states,
                                                                                         capacity)
                self._kbuf, self._vbuf = keys, values
            self._kbuf[..., self._length:end, :] = key_states
            self._vbuf[..., self._length:end, :] = value_states
            self._length = end
            self.keys, self.values = self._kbuf[..., :end, :], self._vbuf[..., :end, :]
            return self.keys, self.values

        def _grown(self, old: Any, new: Any, capacity: int) -> Any:
            shape = list(new.shape)
            shape[-2] = capacity
            buf = torch.empty(shape, dtype=new.dtype, device=new.device)
            if old is not None and self._length:
                buf[..., :self._length, :] = old[..., :self._length, :]
            return buf

        def reset(self) -> None:
            self._kbuf = self._vbuf = None
            self._length = 0
            super().reset()

    _GROWING[base] = GrowingLayer
    return GrowingLayer


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
