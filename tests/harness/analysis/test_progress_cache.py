"""Progress as the cache keeps it: one letter a round, decoded to shared pairs."""
from __future__ import annotations

from hypothesis import given, strategies as st

from harness.analysis.sweep.cache import decode, encode

_ROUND = st.tuples(st.sampled_from(["read", "write", "ask", "error"]), st.booleans())


@given(st.lists(st.lists(_ROUND, max_size=8), max_size=5))
def test_progress_comes_back_as_it_went_in(progress):
    text = encode(progress)
    assert all(len(t) == len(rep) for t, rep in zip(text, progress))
    assert [list(rep) for rep in decode(text)] == progress


def test_a_decoded_round_is_one_of_eight_shared_pairs():
    # 100,000 runs hold millions of rounds: each is a pointer, not a tuple of its own
    a, b = decode(["rRw", "Rr"])
    assert a[1] is b[0] and a[0] is b[1]
    assert a == (("read", False), ("read", True), ("write", False))
    assert len({id(r) for rep in decode(["rRwWaAeE" * 50]) for r in rep}) == 8


def test_equal_replies_decode_to_one_shared_tuple(monkeypatch):
    # configs and runs repeat replies: one tuple a pattern, however often it is read; past the table's
    # bound the sharing stops, the values stay right
    from harness.analysis.sweep import cache as progresscache
    first, again = decode(["rRw", "Rr"]), decode(["Rr", "rRw"])
    assert first[0] is again[1] and first[1] is again[0]
    monkeypatch.setattr(progresscache, "_REPLIES", {})
    monkeypatch.setattr(progresscache, "_REPLIES_MAX", 2)
    got = [decode([t])[0] for t in ("r", "w", "a", "r")]
    assert [list(g) for g in got] == [[("read", False)], [("write", False)], [("ask", False)], [("read", False)]]
    assert len(progresscache._REPLIES) <= 2


def _fresh_memory(monkeypatch, bound: int):
    from harness.analysis.sweep import cache as progresscache
    monkeypatch.setattr(progresscache, "MEMORY", progresscache.OrderedDict())
    monkeypatch.setattr(progresscache, "_memory_bytes", [0])
    monkeypatch.setattr(progresscache, "MEMORY_BYTES", bound)
    return progresscache


def test_the_memory_cache_keeps_the_last_entries_up_to_its_bound(monkeypatch, tmp_path):
    from harness.analysis.sweep.cache import entry_bytes
    two = 2 * entry_bytes(("a", "k"), decode(["r"]))
    progresscache = _fresh_memory(monkeypatch, two)
    cache = progresscache.ProgressCache(None)
    for digest in ("a", "b", "c"):
        cache.put(digest, "k", decode([digest == "a" and "r" or "R"]))
    assert cache.get("a", "k") is None                                         # the oldest went first
    assert cache.get("b", "k") is not None                                     # b read: c is now the oldest
    cache.put("d", "k", decode(["w"]))
    assert cache.get("c", "k") is None and cache.get("b", "k") is not None and len(progresscache.MEMORY) == 2
    assert progresscache.memory_bytes() == two


_DIGEST = st.sampled_from(["a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 40])


@given(ops=st.lists(st.tuples(st.booleans(), _DIGEST, st.lists(st.sampled_from(["r", "Rw", "wwaE"]), max_size=6)),
                    max_size=40),
       entries=st.integers(0, 4))
def test_the_memory_cache_stays_within_its_bytes_and_drops_the_least_recently_used(ops, entries):
    # the bound is in bytes (a bound in entries let the cache grow with the runs' replies): whatever is put
    # and read, what it holds is counted right, never past the bound, and what went is what was used least lately
    import pytest
    from harness.analysis.sweep.cache import entry_bytes
    with pytest.MonkeyPatch.context() as mp:
        bound = entries * entry_bytes(("a" * 40, "k"), decode(["r"] * 3))
        progresscache = _fresh_memory(mp, bound)
        cache = progresscache.ProgressCache(None)
        recent: list[str] = []                 # digests by last use, oldest first
        for put, digest, text in ops:
            if put:
                cache.put(digest, "k", decode(text))
            elif cache.get(digest, "k") is None:
                continue
            recent = [d for d in recent if d != digest] + [digest]
        held = progresscache.MEMORY
        assert progresscache.memory_bytes() == sum(entry_bytes(k, v) for k, v in held.items()) <= bound
        assert [k[0] for k in held] == recent[len(recent) - len(held):]      # the most recently used stay
