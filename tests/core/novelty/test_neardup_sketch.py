"""`neardup.sketch` against its definition: the distinct GRAM-byte runs'
hashes (mix64 of the little-endian run plus one), the smallest in each of BINS
bins, and the number of distinct runs."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from imprint_core.novelty import neardup
from imprint_core.novelty.fingerprints import mix64_plain


def by_definition(data: bytes) -> tuple[list[int], int]:
    if len(data) < neardup.GRAM:
        data = data.ljust(neardup.GRAM, b"\0")
    hashes = {mix64_plain(int.from_bytes(data[i:i + neardup.GRAM], "little") + 1)
              for i in range(len(data) - neardup.GRAM + 1)}
    bins = [int(neardup.EMPTY)] * neardup.BINS
    for h in hashes:
        b = h >> (64 - 7)
        bins[b] = min(bins[b], h)
    return bins, len(hashes)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(min_size=1, max_size=300),
                 st.lists(st.sampled_from([b"ab", b"abc ", b"x", b"\xff\xfe", b"same same "]), min_size=1,
                          max_size=80).map(b"".join)))
def test_a_sketch_is_its_definition_repeats_and_short_texts_included(data):
    sk, size = neardup.sketch(data)
    bins, n = by_definition(data)
    assert size == n and sk.dtype == np.uint64 and sk.tolist() == bins


def test_no_text_has_no_sketch():
    assert neardup.sketch(b"") is None
