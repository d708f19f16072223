"""The local provider's prefix cache: per model context, the KV cache of its
last request, the ids it covers and the final hidden states of its
positions, kept for the next request of that context to reuse.

- `PrefixCaches`: one `ContextCache` per `context_id`, the least recently
  used dropped first; thread-safe (section workers decode concurrently).
- `ContextCache.reuse`: how much of a new prompt the cache covers (the
  ledger's prefix-refund rule: the longest common prefix of ids), cropping
  the rest, and which ids still have to be fed.
- `kv_cache`: a transformers DynamicCache whose layers write into buffers
  with spare room (`_growing_layer`) instead of concatenating.

torch and transformers are passed in or imported inside functions, never
when this module is imported.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from ..counting import common_prefix_len

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
            layer.max_rows = config.max_position_embeddings   # every decoder config declares it (PretrainedConfig subclasses)
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


class HiddenLog:
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
class ContextCache:
    """One context's prefix-cache record."""
    cache: Any = None                  # a transformers DynamicCache
    ids: list[int] = field(default_factory=list)   # prompt + generated ids of the last request
    kv_len: int = 0                    # how many of `ids` have KV entries (len(ids) or len(ids) - 1)
    hidden: HiddenLog = field(default_factory=HiddenLog)

    def reuse(self, prompt: list[int], fresh: Callable[[], Any]) -> tuple[int, list[int]]:
        """Make the cache cover a prefix of `prompt`: (the reused prefix
        length, the ids to feed next). Nothing in common: a `fresh()` cache."""
        reuse = common_prefix_len(self.ids, prompt) if self.cache is not None else 0
        if reuse == 0:
            self.cache, self.hidden, self.kv_len = fresh(), HiddenLog(), 0
        if reuse <= self.kv_len:
            if self.kv_len > reuse:
                self.cache.crop(-(self.kv_len - reuse))
                self.hidden.truncate(reuse)
                self.kv_len = reuse
            feed = prompt[reuse:]
        else:
            # The context's last generated token has no KV entry yet; it is
            # part of the reused prefix and is fed first.
            feed = prompt[self.kv_len:]
        self.ids = list(prompt)
        return reuse, feed


class PrefixCaches:
    """The `ContextCache` of each context, at most `max_contexts` of them
    (least recently used go first; a context whose cache was dropped is
    prefilled whole). A request takes its context's record out and puts it
    back when it ends, so a failed one leaves nothing half-written behind."""

    def __init__(self, max_contexts: int):
        self.max_contexts = max_contexts
        self._contexts: OrderedDict[str, ContextCache] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, context_id: str | None = None) -> None:
        with self._lock:
            if context_id is None:
                self._contexts.clear()
            else:
                self._contexts.pop(context_id, None)

    def cached_ids(self, context_id: str) -> tuple[int, ...]:
        with self._lock:
            ctx = self._contexts.get(context_id)
            return tuple(ctx.ids) if ctx else ()

    def take(self, context_id: str) -> ContextCache:
        with self._lock:
            return self._contexts.pop(context_id, None) or ContextCache()

    def put(self, context_id: str, ctx: ContextCache) -> None:
        with self._lock:
            self._contexts[context_id] = ctx
            self._contexts.move_to_end(context_id)
            while len(self._contexts) > max(self.max_contexts, 1):
                self._contexts.popitem(last=False)
