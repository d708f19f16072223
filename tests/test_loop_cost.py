"""The loop's per-round shortcuts (taken for speed) give what the long way gives:
the byte estimate built on the last prompt, the ledger's prefix against the
two parts a context has seen, the tool status without segmenting, cheap
event stamping. Speed itself is measured in benchmarks/bench_loop.py."""
from __future__ import annotations

import dataclasses

from hypothesis import given, settings as hsettings, strategies as st

from imprint_core import EVENT_TYPES, ByteEstimateCounter, Message, ToolCall, ToolSpec, common_prefix_len
from imprint_core.budget import RequestRecord
from imprint_core.counting import reused_prefix
from imprint_core.counting import GrownBytes, render_message, render_tools
from imprint_core.novelty import segment
from imprint_core.tools import _as_text, _has_units

TOOLS = [ToolSpec("search", "find", kind="read"), ToolSpec("fetch", "get")]


def _fresh(messages, tools) -> bytes:
    return (render_tools(tools) + "".join(render_message(m) for m in messages)).encode("utf-8")


_message = st.builds(Message, st.sampled_from(["system", "user", "assistant", "tool"]), st.text(max_size=12),
                     st.just(()) | st.just((ToolCall("c1", "search", {"q": "é"}),)),
                     st.none() | st.just("c1"), st.none() | st.just("search"))


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.booleans()), min_size=1, max_size=12),
       st.lists(_message, min_size=1, max_size=12))
def test_byte_units_built_on_the_last_prompt_equal_a_fresh_rendering(steps, pool):
    """Growing transcripts, cut ones, other contexts in between, tools
    dropped or swapped: the units are always the whole rendering."""
    ctr = ByteEstimateCounter()
    transcripts: list[list[Message]] = [[], []]
    for grow, which, with_tools in steps:
        msgs = transcripts[which % 2]
        if which == 3:
            del msgs[len(msgs) // 2:]
        msgs.extend(pool[(len(msgs) + i) % len(pool)] for i in range(grow))
        tools = TOOLS if with_tools else TOOLS[:1]
        assert ctr.prompt_units(msgs, tools) == _fresh(msgs, tools)
        units, tokens = ctr.count(list(msgs), list(tools))
        assert bytes(units) == units == _fresh(msgs, tools) and tokens == ctr.to_tokens(len(_fresh(msgs, tools)))


def test_prompts_past_the_buffer_s_room_stay_whole_and_prefixes_of_the_next():
    """Transcripts of several hundred KB: the buffer is copied into larger
    ones and every view of the lineage is still the whole rendering, each a
    prefix of the next (the ledger's shortcut), whatever was counted between."""
    ctr = ByteEstimateCounter()
    msgs = [Message("system", "s"), Message("user", "q")]
    seen = []
    for i in range(12):
        units, _ = ctr.count(msgs, TOOLS)
        assert units == _fresh(msgs, TOOLS)
        seen.append(units)
        if i == 6:  # another context counted in between: a new lineage from there on
            assert ctr.count(msgs[:1], TOOLS)[0] == _fresh(msgs[:1], TOOLS)
        msgs += [Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "search", {"q": i}),)),
                 Message("tool", f"{i} " * 20_000, tool_call_id=f"c{i}")]
    for a, b in zip(seen, seen[1:]):
        assert bytes(b).startswith(bytes(a))
        assert reused_prefix((a, b""), b) == len(a) == common_prefix_len(bytes(a), bytes(b))
    assert len({id(u.buffer) for u in seen}) > 2 and len({id(u.lineage) for u in seen}) == 2


def test_grown_bytes_read_as_the_bytes_they_stand_for_while_the_buffer_grows():
    buf = bytearray(b"abcdef")
    g = GrownBytes(buf, 4)
    buf += b"xyz"
    assert bytes(g) == g == b"abcd" and len(g) == 4 and list(g) == list(b"abcd")
    assert (g[0], g[-1], g[1:3], g[::2], g[2:]) == (97, 100, b"bc", b"ac", b"cd")
    assert hash(g) == hash(b"abcd") and g != b"abcdx"


_units = st.lists(st.integers(0, 3), max_size=30)


@hsettings(max_examples=300, deadline=None)
@given(_units, _units, _units, st.booleans())
def test_prefix_against_the_two_parts_seen_is_the_prefix_against_them_joined(prompt, output, new, as_bytes):
    if as_bytes:
        prompt, output, new = bytes(prompt), bytes(output), bytes(new)
        assert reused_prefix((prompt, output), new) == common_prefix_len(prompt + output, new)
        assert reused_prefix((prompt, output), prompt + output + new) == len(prompt) + len(output)
        # GrownBytes of one buffer (the counter's), of another, and mixed with bytes
        buf = bytearray(prompt + output + new)
        same = GrownBytes(buf, len(buf))
        joined = prompt + output + new
        for seen in (GrownBytes(buf, len(prompt)), GrownBytes(bytearray(prompt), len(prompt)), prompt):
            assert reused_prefix((seen, output), same) == common_prefix_len(prompt + output, joined)
            assert reused_prefix((seen, output), GrownBytes(bytearray(new), len(new))) == \
                common_prefix_len(prompt + output, new)
    else:
        prompt, output, new = tuple(prompt), tuple(output), tuple(new)
        assert reused_prefix((prompt, output), new) == common_prefix_len(prompt + output, new)
        assert reused_prefix((prompt, output), prompt + output + new) == len(prompt) + len(output)


@hsettings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \t\n[]{}\"ab,1", max_size=30))
def test_tool_status_without_segmenting_is_the_segmented_rule(text):
    assert _has_units(text, None) == any(_as_text(u).strip() for u in segment(text))


def test_stamping_is_replace_for_every_event_type():
    for cls in EVENT_TYPES.values():
        assert not hasattr(cls, "__post_init__"), cls
        assert all(f.init for f in dataclasses.fields(cls)), cls
    record = RequestRecord(id=1, role="coordinator", context_id="c", policy="reserve", outcome="ok",
                           estimated_prompt=3, max_output=4, reserved=7, charged=7, refunded=0)
    for cls in EVENT_TYPES.values():
        kwargs = {f.name: record if f.name == "record" else 1 for f in dataclasses.fields(cls)
                  if f.name not in ("t", "wall", "meta", "format")}
        event = cls(**kwargs)
        stamped = event.stamped(2.5, "w")
        assert stamped == dataclasses.replace(event, t=2.5, wall="w") and type(stamped) is cls
        assert (event.t, event.wall) == (None, None)


def test_wall_time_is_what_datetime_writes():
    from datetime import datetime, timezone

    from imprint_core.clock import wall_time
    for _ in range(50):
        before = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        wall = wall_time()
        after = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        assert before <= wall <= after and len(wall) == len(before)
        assert datetime.fromisoformat(wall).tzinfo == timezone.utc
