"""Clock, time budget, token counting and the token ledger, with property
tests: the ledger never goes negative, balances, and never charges more than
its budget, including under concurrent section workers."""
from __future__ import annotations

import math
import sys
import threading

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from imprint_core import (ByteEstimateCounter, Message, RegexTokenCounter, TimeBudget, TokenBudgetExceeded,
                          TokenLedger, ToolCall, ToolSpec, Usage, VirtualClock, common_prefix_len)


class Ids:
    """A counter whose units are token ids: to_tokens is the identity."""
    name = "ids"

    def to_tokens(self, units: int) -> int:
        return units


IDS = Ids()


# ---- clock and time budget ------------------------------------------------------
def test_virtual_clock_moves_only_when_told():
    c = VirtualClock(10)
    assert c.now() == 10
    c.sleep(0)
    c.sleep(2.5)
    c.advance(1)
    assert c.now() == 13.5
    with pytest.raises(ValueError):
        c.sleep(-1)


def test_virtual_clock_is_thread_safe():
    c = VirtualClock()
    threads = [threading.Thread(target=lambda: [c.sleep(0.5) for _ in range(2000)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.now() == 8 * 2000 * 0.5


def test_time_budget_counts_from_start_and_expires_exactly_at_deadline():
    c = VirtualClock(100)
    tb = TimeBudget(c, 300)
    with pytest.raises(RuntimeError):
        tb.deadline
    c.advance(50)  # provider/model setup is not research time
    tb.start()
    assert tb.deadline == 450 and tb.remaining() == 300
    c.advance(299.5)
    assert not tb.expired()
    c.advance(0.5)
    assert tb.expired() and tb.remaining() == 0


def test_pause_moves_the_deadline_by_the_wait():
    c = VirtualClock()
    tb = TimeBudget(c, 60)
    tb.start()
    c.advance(10)
    tb.pause()
    c.advance(500)            # the user thinks for a long time
    assert tb.deadline == 560 and not tb.expired()  # frozen while paused
    tb.pause()                # idempotent
    tb.resume()
    assert tb.deadline == 560 and tb.paused_total == 500 and tb.remaining() == 50
    tb.resume()               # idempotent
    c.advance(50)
    assert tb.expired()


# ---- counting -------------------------------------------------------------------
def test_byte_estimate_is_utf8_bytes_over_ratio_rounded_up():
    msgs = [Message("system", "sys"), Message("user", "héllo wörld ✓")]
    for ratio in (1, 3, 4, 2.5):
        ctr = ByteEstimateCounter(ratio)
        units = ctr.prompt_units(msgs, [])
        assert isinstance(units, bytes)
        assert ctr.to_tokens(len(units)) == math.ceil(len(units) / ratio)
    ctr = ByteEstimateCounter()
    assert ctr.to_tokens(0) == 0 and ctr.to_tokens(1) == 1 and ctr.to_tokens(3) == 1 and ctr.to_tokens(4) == 2
    # multi-byte characters count as their UTF-8 bytes
    a = ctr.prompt_units([Message("user", "e")], [])
    b = ctr.prompt_units([Message("user", "é")], [])
    assert len(b) - len(a) == 1
    with pytest.raises(ValueError):
        ByteEstimateCounter(0)


@pytest.mark.parametrize("ctr", [ByteEstimateCounter(), RegexTokenCounter()])
def test_conversation_rendering_is_prefix_of_the_next(ctr):
    """The prefix-refund policy relies on this contract."""
    tools = [ToolSpec("search", "find", kind="read")]
    msgs = [Message("system", "sys"), Message("user", "q")]
    reply = Message("assistant", "let me look", tool_calls=(ToolCall("c1", "search", {"q": "x"}),))
    before = ctr.prompt_units(msgs, tools)
    after = ctr.prompt_units(msgs + [reply, Message("tool", "found", tool_call_id="c1", name="search")], tools)
    out = ctr.output_units(reply)
    assert tuple(after[:len(before) + len(out)]) == tuple(before) + tuple(out)


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_property_common_prefix_len(a, b):
    naive = 0
    while naive < min(len(a), len(b)) and a[naive] == b[naive]:
        naive += 1
    assert common_prefix_len(a, b) == naive
    assert common_prefix_len(bytes(a), bytes(b)) == naive


# ---- ledger ---------------------------------------------------------------------
def test_reservation_that_does_not_fit_reserves_nothing():
    led = TokenLedger(1000)
    r1 = led.reserve(300, 200)
    assert led.totals.left == 500
    with pytest.raises(TokenBudgetExceeded) as info:
        led.reserve(301, 200)
    assert "1000" in str(info.value) and "501" in str(info.value)
    assert led.totals.reserved == 500 and led.totals.outstanding == 500
    r2 = led.reserve(300, 200)  # exactly fits
    assert led.totals.left == 0
    for r in (r1, r2):
        led.settle(r, counter=IDS, prompt_units=(1,) * 300, output_units=(), outcome="ok")


def test_prefix_refund_charges_new_prompt_and_generated_output():
    led = TokenLedger(10_000, "prefix-refund")
    p1 = tuple(range(100))
    r = led.reserve(100, 50)
    rec = led.settle(r, counter=IDS, prompt_units=p1, output_units=(900,) * 20, outcome="ok",
                     usage=Usage(prompt_tokens=97, cached_tokens=0, output_tokens=21))
    assert (rec.reserved, rec.charged, rec.refunded) == (150, 120, 30)
    assert (rec.measured_prompt, rec.measured_cached, rec.measured_output) == (97, 0, 21)
    # the next request on the same context extends the prompt + output by 30
    p2 = p1 + (900,) * 20 + tuple(range(1000, 1030))
    r = led.reserve(len(p2), 50)
    rec = led.settle(r, counter=IDS, prompt_units=p2, output_units=(7,) * 5, outcome="ok")
    assert rec.prefix_reused == 120 and rec.charged_prompt == 30 and rec.charged_output == 5
    assert (rec.charged, rec.refunded) == (35, len(p2) + 50 - 35)
    assert rec.measured_prompt is None  # not reported is None, never zero
    # another context never reuses the coordinator's prefix
    r = led.reserve(len(p2), 10, role="worker", context_id="w1-0")
    rec = led.settle(r, counter=IDS, prompt_units=p2, output_units=(), outcome="ok")
    assert rec.charged == len(p2) and rec.context_id == "w1-0"
    # ...and an identical coordinator prompt is charged only for nothing new
    r = led.reserve(len(p2), 10)
    rec = led.settle(r, counter=IDS, prompt_units=p2, output_units=(), outcome="ok")
    assert rec.charged == 0 and rec.refunded == len(p2) + 10


def test_prefix_refund_unsent_refunded_whole_and_cut_charged_for_what_was_processed():
    led = TokenLedger(10_000, "prefix-refund")
    r = led.reserve(100, 50)
    rec = led.settle(r, counter=IDS, prompt_units=tuple(range(100)), output_units=(), outcome="error", sent=False)
    assert (rec.outcome, rec.charged, rec.refunded) == ("unsent", 0, 150)
    r = led.reserve(100, 50)
    rec = led.settle(r, counter=IDS, prompt_units=tuple(range(100)), output_units=(1,) * 7, outcome="cut")
    assert (rec.outcome, rec.charged, rec.refunded) == ("cut", 107, 43)
    assert led.totals.charged == 107 and led.totals.refunded == 193 and led.totals.outstanding == 0


def test_reserve_policy_charges_the_reservation_and_repeats_count_again():
    led = TokenLedger(10_000, "reserve")
    p = tuple(range(100))
    recs = []
    for _ in range(3):
        r = led.reserve(100, 50)
        recs.append(led.settle(r, counter=IDS, prompt_units=p, output_units=(1,), outcome="ok"))
    r = led.reserve(100, 50)
    recs.append(led.settle(r, counter=IDS, prompt_units=p, output_units=(), outcome="error", sent=False))
    assert [(x.charged, x.refunded) for x in recs] == [(150, 0)] * 4
    assert led.totals.charged == 600 and led.totals.refunded == 0


def test_final_record_is_not_reserved_against_the_budget():
    led = TokenLedger(1024)
    r = led.reserve(1000, 24)
    led.settle(r, counter=IDS, prompt_units=(1,) * 1000, output_units=(1,) * 24, outcome="ok")
    before = (led.totals.reserved, led.totals.charged, led.totals.left)
    rec = led.record_final(counter=IDS, estimated_prompt=5000, max_output=2048, output_units=(1,) * 300,
                           outcome="ok", usage=Usage(prompt_tokens=4999, output_tokens=300))
    assert (led.totals.reserved, led.totals.charged, led.totals.left) == before
    assert rec.role == "final" and rec.reserved == 0 and rec.output_tokens == 300 and rec.measured_prompt == 4999
    assert led.final_records == [rec] and rec not in led.records


def test_unknown_policy_rejected():
    with pytest.raises(ValueError):
        TokenLedger(1000, "free")  # type: ignore[arg-type]


# ---- ledger properties ------------------------------------------------------------
op = st.one_of(
    st.tuples(st.just("reserve"), st.integers(0, 400), st.integers(0, 300), st.sampled_from(["c", "w1", "w2"])),
    st.tuples(st.just("settle"), st.integers(0, 50), st.integers(0, 400), st.integers(0, 400),
              st.sampled_from(["ok", "cut", "error"]), st.booleans()),
)


def check_invariants(led: TokenLedger) -> None:
    t = led.totals
    assert min(t.reserved, t.charged, t.refunded, t.outstanding) >= 0
    assert t.reserved == t.charged + t.refunded + t.outstanding
    assert t.committed <= t.budget and t.charged <= t.budget and t.left >= 0
    for rec in led.records:
        assert rec.charged >= 0 and rec.refunded >= 0
        assert rec.reserved == rec.charged + rec.refunded
        assert rec.charged <= rec.reserved
        if led.policy == "reserve":
            assert rec.refunded == 0
    assert sum(r.charged for r in led.records) == t.charged
    assert sum(r.refunded for r in led.records) == t.refunded
    assert len(led.records) == t.requests


def apply(led: TokenLedger, ops, pending: list, counter) -> None:
    for o in ops:
        if o[0] == "reserve":
            _, prompt, max_out, ctx = o
            try:
                pending.append(led.reserve(prompt, max_out, context_id=ctx))
            except TokenBudgetExceeded:
                pass
        elif pending:
            _, pick, shared, out, outcome, sent = o
            r = pending.pop(pick % len(pending))
            units = tuple(range(min(shared, r.estimated_prompt))) + (10_000,) * max(0, r.estimated_prompt - shared)
            led.settle(r, counter=counter, prompt_units=units, output_units=(5,) * out, outcome=outcome, sent=sent)
        check_invariants(led)


@hsettings(max_examples=150, deadline=None)
@given(st.sampled_from(["reserve", "prefix-refund"]), st.integers(1, 3000), st.lists(op, max_size=60))
def test_property_ledger_balances_and_never_negative(policy, budget, ops):
    led = TokenLedger(budget, policy)
    pending: list = []
    apply(led, ops, pending, IDS)
    for r in pending:
        led.settle(r, counter=IDS, prompt_units=(), output_units=(), outcome="ok")
    check_invariants(led)
    assert led.totals.outstanding == 0 and led.totals.left == budget - led.totals.charged


@hsettings(max_examples=40, deadline=None)
@given(st.sampled_from(["reserve", "prefix-refund"]), st.integers(500, 5000),
       st.lists(st.lists(op, max_size=40), min_size=2, max_size=6))
def test_property_ledger_balances_under_concurrent_workers(policy, budget, per_thread):
    led = TokenLedger(budget, policy)
    ctr = ByteEstimateCounter(2)
    barrier = threading.Barrier(len(per_thread))
    errors: list[BaseException] = []

    def worker(ops):
        pending: list = []
        try:
            barrier.wait()
            apply(led, ops, pending, ctr)
            for r in pending:
                led.settle(r, counter=ctr, prompt_units=b"", output_units=b"", outcome="ok")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(ops,)) for ops in per_thread]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    check_invariants(led)
    assert led.totals.outstanding == 0
    assert len({r.id for r in led.records}) == len(led.records)


def test_concurrent_reservations_never_overcommit():
    """Many threads race for budgets that fit exactly 10 reservations; thread
    switches are forced as often as the interpreter allows."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(60):
            led = TokenLedger(1000, "reserve")
            got: list = []
            barrier = threading.Barrier(8)

            def grab():
                barrier.wait()
                for _ in range(4):
                    try:
                        got.append(led.reserve(60, 40))  # list.append is atomic
                    except TokenBudgetExceeded:
                        pass

            threads = [threading.Thread(target=grab) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(got) == 10 and led.totals.outstanding == 1000 == led.totals.reserved
            assert len({r.id for r in got}) == 10
    finally:
        sys.setswitchinterval(old)


# ---- negative allowances and reservations are refused where they are built (issue 45, item 10) ----
@hsettings(max_examples=150, deadline=None)
@given(st.sampled_from(["reserve", "prefix-refund"]), st.integers(1, 3000),
       st.lists(st.tuples(st.integers(-10**6, 400), st.integers(-10**6, 300)), max_size=40))
def test_property_a_negative_reservation_is_refused_and_changes_nothing(policy, budget, wants):
    """Any ints: a negative prompt estimate or output allowance raises
    ValueError and reserves nothing, so reservations never exceed the budget
    (a negative allowance once let 41 requests through on 1,024 tokens)."""
    led = TokenLedger(budget, policy)
    for prompt, max_out in wants:
        before = (led.totals.reserved, led.totals.outstanding)
        if prompt < 0 or max_out < 0:
            with pytest.raises(ValueError, match="max_output" if prompt >= 0 else "estimated_prompt"):
                led.reserve(prompt, max_out)
            assert (led.totals.reserved, led.totals.outstanding) == before
            continue
        try:
            led.reserve(prompt, max_out)
        except TokenBudgetExceeded:
            pass
        check_invariants(led)


@given(st.integers(max_value=-1), st.integers(0, 100))
def test_property_reservation_and_final_record_refuse_negatives(negative, fine):
    from imprint_core.budget import Reservation
    with pytest.raises(ValueError, match="max_output"):
        Reservation(1, "coordinator", "c", fine, negative)
    with pytest.raises(ValueError, match="estimated_prompt"):
        Reservation(1, "coordinator", "c", negative, fine)
    assert Reservation(1, "coordinator", "c", fine, fine).tokens == 2 * fine
    led = TokenLedger(1000)
    with pytest.raises(ValueError, match="max_output"):
        led.record_final(counter=IDS, estimated_prompt=fine, max_output=negative, output_units=(), outcome="ok",
                         usage=None)
    assert led.final_records == []


@given(st.integers(-10**9, 10**9))
def test_property_loop_config_takes_only_a_positive_output_allowance(n):
    from imprint_core.budget import MIN_OUTPUT_TOKENS
    from imprint_core.loop import LoopConfig
    if n < MIN_OUTPUT_TOKENS:
        with pytest.raises(ValueError, match="research_max_output_tokens"):
            LoopConfig(research_max_output_tokens=n)
    else:
        assert LoopConfig(research_max_output_tokens=n).research_max_output_tokens == n


@given(st.integers(max_value=0))
def test_property_workers_and_final_plan_refuse_an_allowance_below_one(n):
    from imprint_core.final import FinalPlan
    from imprint_core.workers import SectionWorkers
    with pytest.raises(ValueError, match="max_output"):
        SectionWorkers(None, "q", max_output=n, max_workers=2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="condense_max_output"):
        FinalPlan("q", [], "sys", max_tokens=64, deadline_sec=1.0, condense_max_output=n)
    with pytest.raises(ValueError, match="max_tokens"):
        FinalPlan("q", [], "sys", max_tokens=n, deadline_sec=1.0, condense_max_output=64)


@pytest.mark.parametrize("bad", [True, 2.5, "64"])
def test_an_allowance_that_is_not_an_integer_is_refused(bad):
    from imprint_core.loop import LoopConfig
    with pytest.raises(ValueError, match="research_max_output_tokens"):
        LoopConfig(research_max_output_tokens=bad)


# ---- a replayed request (settle_counted): the live settlement from counts -------------------------
@pytest.mark.parametrize("policy", ["reserve", "prefix-refund"])
def test_a_replayed_request_settles_as_a_live_one_with_the_same_counts(policy):
    counter = ByteEstimateCounter()
    live, replay = TokenLedger(10_000, policy), TokenLedger(10_000, policy)
    first, out1 = b"x" * 300, b"y" * 31
    second = first + out1 + b"z" * 90
    # the second request reuses the first's prompt and output (331 bytes: 111 tokens) and generates
    # past its allowance (clamped to it)
    for units, out, reused in ((first, out1, 0), (second, b"w" * 3000, 111)):
        est = counter.to_tokens(len(units))
        a = live.settle(live.reserve(est, 64), counter=counter, prompt_units=units, output_units=out, outcome="ok")
        b = replay.settle_counted(replay.reserve(est, 64), reused=reused, output=counter.to_tokens(len(out)),
                                  counter=counter.name)
        assert a.to_dict() == b.to_dict() and b.balanced
    assert live.totals == replay.totals


def test_a_replayed_request_is_settled_once_and_with_counts_that_are_counts():
    ledger = TokenLedger(1_000)
    r = ledger.reserve(100, 10)
    with pytest.raises(ValueError, match="reused"):
        ledger.settle_counted(r, reused=-1, output=0, counter="c")
    with pytest.raises(ValueError, match="output"):
        ledger.settle_counted(r, reused=0, output=1.5, counter="c")
    rec = ledger.settle_counted(r, reused=500, output=3, counter="c")     # reuse past the prompt: all of it
    assert (rec.charged, rec.prefix_reused, rec.refunded) == (3, 100, 107)
    with pytest.raises(KeyError):
        ledger.settle_counted(r, reused=0, output=0, counter="c")
    assert ledger.totals.outstanding == 0 and ledger.totals.requests == 1


# ---- a refused count names its own field, exactly (the message a caller reads) ----------------------
def test_each_refused_count_is_named_by_its_own_field():
    """The ValueError starts with the field's name as the caller spelled it,
    so a bad estimate, allowance, reuse or output count says which one it was."""
    from imprint_core.budget import Reservation
    led = TokenLedger(1000)
    for call, field in (
            (lambda: Reservation(1, "coordinator", "c", -1, 5), "estimated_prompt"),
            (lambda: Reservation(1, "coordinator", "c", 5, -1), "max_output"),
            (lambda: led.reserve(-1, 5), "estimated_prompt"),
            (lambda: led.reserve(5, -1), "max_output"),
            (lambda: led.record_final(counter=IDS, estimated_prompt=-1, max_output=5, output_units=(),
                                      outcome="ok", usage=None), "estimated_prompt"),
            (lambda: led.record_final(counter=IDS, estimated_prompt=5, max_output=-1, output_units=(),
                                      outcome="ok", usage=None), "max_output")):
        with pytest.raises(ValueError, match=rf"^{field} must be an integer of at least 0 tokens, not -1$"):
            call()
    r = led.reserve(100, 10)
    with pytest.raises(ValueError, match=r"^reused must be an integer of at least 0 tokens, not -1$"):
        led.settle_counted(r, reused=-1, output=0, counter="c")
    with pytest.raises(ValueError, match=r"^output must be an integer of at least 0 tokens, not -2$"):
        led.settle_counted(r, reused=0, output=-2, counter="c")
    assert led.totals.reserved == 110 and led.totals.outstanding == 110 and led.final_records == []


def test_a_refused_output_allowance_is_named_by_its_setting():
    from imprint_core.budget import MIN_OUTPUT_TOKENS
    from imprint_core.loop import LoopConfig
    from imprint_core.workers import SectionWorkers
    with pytest.raises(ValueError, match=rf"^research_max_output_tokens must be an integer of at least "
                                         rf"{MIN_OUTPUT_TOKENS} tokens, not 0$"):
        LoopConfig(research_max_output_tokens=0)
    with pytest.raises(ValueError, match=rf"^max_output must be an integer of at least {MIN_OUTPUT_TOKENS} tokens, "
                                         rf"not 0$"):
        SectionWorkers(None, "q", max_output=0, max_workers=2)  # type: ignore[arg-type]
