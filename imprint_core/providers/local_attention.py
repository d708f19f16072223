"""The local provider's attention: transformers' SDPA with two changes for
the CPU, registered with transformers when a model loads
(`attention_implementation`).

torch and transformers are passed in or imported inside the function, never
when this module is imported."""
from __future__ import annotations

from typing import Any

ATTENTION = "imprint_sdpa"


def attention_implementation(torch: Any) -> str:
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
