"""Progress as the cache keeps it: one letter a round, decoded to shared pairs."""
from __future__ import annotations

from hypothesis import given, strategies as st

from harness.analysis.progresscache import decode, encode

_ROUND = st.tuples(st.sampled_from(["read", "write", "ask", "error"]), st.booleans())


@given(st.lists(st.lists(_ROUND, max_size=8), max_size=5))
def test_progress_comes_back_as_it_went_in(progress):
    text = encode(progress)
    assert all(len(t) == len(rep) for t, rep in zip(text, progress))
    assert decode(text) == progress


def test_a_decoded_round_is_one_of_eight_shared_pairs():
    # 100,000 runs hold millions of rounds: each is a pointer, not a tuple of its own
    a, b = decode(["rRw", "Rr"])
    assert a[1] is b[0] and a[0] is b[1]
    assert a == [("read", False), ("read", True), ("write", False)]
    assert len({id(r) for rep in decode(["rRwWaAeE" * 50]) for r in rep}) == 8
