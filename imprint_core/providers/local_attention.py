"""The local provider's attention: transformers' SDPA with two changes for
the CPU, registered with transformers when a model loads
(`attention_implementation`).

torch and transformers are passed in or imported inside the function, never
when this module is imported."""
from __future__ import annotations

from typing import Any

ATTENTION = "imprint_sdpa"


def attention_implementation(torch: Any) -> str:
    """SDPA, with three changes to what transformers' "sdpa" does on the CPU:

    - A single query (decoding) in bfloat16 is computed in float32: the CPU
      kernel is slow for one bf16 query over a long cache (measured per step
      at a 1,500-token context: 178 ms, against 105 ms upcast and 95 ms in
      float32).
    - A single float32 query (decoding in float32 or int8) is two matrix
      products over the cached keys and values as they lie (`decode_attention`):
      SDPA's CPU kernel took 2.4 ms a layer at a 7,500-token context, where
      the products take 1.5 ms, about what reading the layer's cache costs;
      at that context attention was 70% of an int8 decode step.
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
        if query.shape[2] == 1 and query.dtype == torch.float32 and query.shape[0] == 1 \
                and kwargs.get("position_bias") is None and not kwargs.get("dropout"):
            return decode_attention(torch, query, key, value, attention_mask, kwargs.get("scaling")), None
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


def decode_attention(torch: Any, query: Any, key: Any, value: Any, mask: Any, scaling: float | None) -> Any:
    """Attention of one query position (batch 1) over `key`/`value`, as
    softmax(q k^T * scale + mask) v, with the query heads that share a
    key/value head stacked as rows of one product (no repeated keys, no
    copy of the cache views). query (1, heads, 1, dim), key and value
    (1, kv_heads, length, dim), mask None, bool (True: attend) or additive,
    broadcastable to (1, 1, 1, length); returns (1, 1, heads, dim), the
    layout transformers' attention functions return."""
    _, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    q = query.reshape(1, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(q, key.transpose(-1, -2))
    scores.mul_(dim ** -0.5 if scaling is None else scaling)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores.masked_fill_(mask.logical_not(), float("-inf"))
        else:
            scores.add_(mask)
    out = torch.matmul(torch.softmax(scores, dim=-1), value)
    return out.reshape(1, heads, 1, dim).transpose(1, 2).contiguous()
