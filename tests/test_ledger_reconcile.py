"""The ledger's reconciliation with reported usage and its prefix check
against the two parts a context has seen (the cheap per-round form), exercised on the ledger alone: fast
enough for the mutation run's test selection (pyproject `[tool.mutmut]`),
which the end-to-end tests of tests/test_counting_modes.py are not."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from imprint_core import TokenLedger, Usage
from imprint_core.errors import TokenBudgetExceeded
from imprint_core.counting import reused_prefix
from imprint_core.counting import GrownBytes, common_prefix_len


class Ids:
    """Units are token ids: to_tokens is the identity."""
    name = "ids-counter"

    def to_tokens(self, units: int) -> int:
        return units


IDS = Ids()


def settle(ledger: TokenLedger, prompt, output, *, usage=None, reconcile=True, estimated=None, max_output=10,
           context="c", sent=True, estimates=None):
    r = ledger.reserve(len(prompt) if estimated is None else estimated, max_output, context_id=context)
    return ledger.settle(r, counter=IDS, prompt_units=prompt, output_units=output, outcome="ok", usage=usage,
                         sent=sent, reconcile=reconcile, estimates=estimates)


# ---- reconciliation ----------------------------------------------------------------------------
def test_a_reported_prompt_replaces_the_estimate_under_prefix_refund():
    ledger = TokenLedger(1000)
    rec = settle(ledger, (1, 2, 3, 4), (9,), usage=Usage(prompt_tokens=7, output_tokens=1),
                 estimates={"byte": 9, "tokenizer": 7})
    assert rec.reconciled is True
    assert rec.estimates == {"byte": 9, "tokenizer": 7}
    assert (rec.charged_prompt, rec.charged_output, rec.charged) == (7, 1, 8)
    assert rec.refunded == rec.reserved - 8 == 14 - 8
    assert rec.counter == "ids-counter"
    assert (rec.measured_prompt, rec.measured_cached, rec.measured_output) == (7, None, 1)


def test_reported_cached_tokens_are_refunded_and_without_them_the_prefix_counted():
    ledger = TokenLedger(1000)
    settle(ledger, (1, 2, 3), (4,), usage=Usage(prompt_tokens=3, output_tokens=1))
    # Five units of the second prompt are the first prompt and its output.
    rec = settle(ledger, (1, 2, 3, 4, 5, 6), (7,), usage=Usage(prompt_tokens=6, output_tokens=1))
    assert rec.prefix_reused == 4
    assert (rec.charged_prompt, rec.charged) == (2, 3)  # measured 6, less the 4 reused
    other = TokenLedger(1000)
    settle(other, (1, 2, 3), (4,), usage=Usage(prompt_tokens=3, output_tokens=1))
    rec = settle(other, (1, 2, 3, 4, 5, 6), (7,), usage=Usage(prompt_tokens=6, cached_tokens=1, output_tokens=1))
    assert (rec.charged_prompt, rec.charged) == (5, 6)  # the provider's cached count wins over ours
    assert rec.measured_cached == 1


def test_cached_tokens_above_the_prompt_charge_nothing_for_it():
    rec = settle(TokenLedger(1000), (1, 2), (), usage=Usage(prompt_tokens=3, cached_tokens=8, output_tokens=0))
    assert (rec.charged_prompt, rec.charged_output, rec.charged) == (0, 0, 0)


def test_an_unreported_output_keeps_the_counted_one():
    rec = settle(TokenLedger(1000), (1, 2), (5, 6, 7), usage=Usage(prompt_tokens=4))
    assert (rec.charged_prompt, rec.charged_output, rec.charged) == (4, 3, 7)


def test_a_reconciled_charge_above_the_reservation_is_an_overrun_never_a_negative_refund():
    ledger = TokenLedger(1000)
    rec = settle(ledger, (1, 2), (3,), estimated=2, max_output=4, usage=Usage(prompt_tokens=20, output_tokens=1))
    assert (rec.charged, rec.reserved, rec.refunded, rec.overrun) == (21, 6, 0, 15) and rec.balanced
    assert (ledger.totals.charged, ledger.totals.refunded, ledger.totals.overrun, ledger.totals.overruns) == (21, 0, 15, 1)
    under = settle(ledger, (1, 2), (3,), estimated=2, max_output=4, usage=Usage(prompt_tokens=1, output_tokens=1),
                   context="d")
    assert (under.charged, under.refunded, under.overrun) == (2, 4, 0) and ledger.totals.overruns == 1


def test_the_totals_add_up_every_overrun_and_count_each_overrunning_request():
    ledger = TokenLedger(1000)
    first = settle(ledger, (1, 2), (3,), estimated=2, max_output=4, usage=Usage(prompt_tokens=20, output_tokens=1),
                   context="a")
    second = settle(ledger, (1, 2), (3,), estimated=2, max_output=4, usage=Usage(prompt_tokens=9, output_tokens=1),
                    context="b")
    assert (first.overrun, second.overrun) == (15, 4)
    assert (ledger.totals.overrun, ledger.totals.overruns) == (19, 2)


def test_an_overrun_that_spends_the_budget_stops_the_next_reservation():
    """A server reporting 5,000 prompt tokens against an estimate of 944 on a
    4,096 budget: the charge is the measurement, the overrun is recorded, and
    nothing more fits."""
    ledger = TokenLedger(4_096)
    rec = settle(ledger, tuple(range(944)), (1,) * 10, max_output=1_000,
                 usage=Usage(prompt_tokens=5_000, output_tokens=10))
    assert (rec.reserved, rec.charged, rec.refunded, rec.overrun) == (1_944, 5_010, 0, 3_066)
    assert ledger.totals.left < 0
    with pytest.raises(TokenBudgetExceeded):
        ledger.reserve(1, 1)


def test_reserve_policy_charges_the_reservation_and_records_the_measurement_beside_it():
    ledger = TokenLedger(1000, policy="reserve")
    for measured in (5, 500):    # below and above the estimate of 3
        rec = settle(ledger, (1, 2, 3), (4,), max_output=10, usage=Usage(prompt_tokens=measured, output_tokens=1))
        assert rec.reconciled is True and rec.charged == rec.reserved == 13 and rec.refunded == 0
        assert rec.measured_charge == measured + 10 and rec.overrun == 0 and rec.balanced
    plain = settle(ledger, (1, 2, 3), (4,), max_output=10, usage=Usage(prompt_tokens=5), reconcile=False)
    assert plain.reconciled is False and plain.charged == plain.reserved == 13 and plain.measured_charge is None


@given(st.sampled_from(["reserve", "prefix-refund"]), st.integers(0, 50), st.integers(1, 20),
       st.one_of(st.none(), st.integers(0, 5_000)), st.one_of(st.none(), st.integers(0, 5_000)),
       st.one_of(st.none(), st.integers(0, 500)), st.booleans(), st.booleans())
def test_property_no_negative_refund_and_the_ledger_balances(policy, estimated, max_output, prompt, cached, output,
                                                             reconcile, sent):
    ledger = TokenLedger(1_000_000, policy)
    usage = Usage(prompt_tokens=prompt, cached_tokens=cached, output_tokens=output)
    rec = settle(ledger, tuple(range(estimated)), (1,) * 3, estimated=estimated, max_output=max_output,
                 usage=usage, reconcile=reconcile, sent=sent)
    assert rec.refunded >= 0 and rec.overrun >= 0 and rec.balanced
    assert rec.overrun == max(rec.charged - rec.reserved, 0)
    if policy == "reserve":
        assert rec.charged == rec.reserved and rec.overrun == 0
    t = ledger.totals
    assert t.reserved + t.overrun == t.charged + t.refunded


@pytest.mark.parametrize("usage, reconcile, sent", [
    (Usage(prompt_tokens=50, output_tokens=1), False, True),   # not asked to
    (None, True, True),                                        # nothing reported
    (Usage(output_tokens=1), True, True),                      # no prompt reported
    (Usage(prompt_tokens=50, output_tokens=1), True, False),   # never sent
])
def test_no_reconciliation_without_a_measured_prompt_of_a_sent_request(usage, reconcile, sent):
    rec = settle(TokenLedger(1000), (1, 2, 3), (4,), usage=usage, reconcile=reconcile, sent=sent)
    assert rec.reconciled is False
    assert rec.charged == (4 if sent else 0)


def test_the_final_request_records_its_counter_and_measurement():
    ledger = TokenLedger(1000)
    rec = ledger.record_final(counter=IDS, estimated_prompt=30, max_output=5, output_units=(1, 2, 3, 4, 5, 6),
                              outcome="ok", usage=Usage(prompt_tokens=31, cached_tokens=2, output_tokens=6),
                              estimates={"byte": 40})
    assert rec.counter == "ids-counter" and rec.estimates == {"byte": 40}
    assert (rec.output_tokens, rec.charged, rec.reserved) == (5, 0, 0)
    assert (rec.measured_prompt, rec.measured_cached, rec.measured_output) == (31, 2, 6)
    assert ledger.final_records == [rec] and ledger.totals.charged == 0


# ---- the prefix against the two parts seen ------------------------------------------------------
def grown(data: bytes, n: int, lineage=None) -> GrownBytes:
    return GrownBytes(bytearray(data), n, lineage)


def test_views_of_one_lineage_compare_by_length_and_of_two_by_content():
    same = object()
    assert reused_prefix((grown(b"abcdef", 4, same), b""), grown(b"abcdef", 6, same)) == 4
    # Different lineages: the contents decide (the first byte differs).
    assert reused_prefix((grown(b"xbcd", 4, object()), b""), grown(b"abcdef", 6, object())) == 0
    assert reused_prefix((grown(b"xbcd", 4, None), b""), grown(b"abcdef", 6, None)) == 0


def test_output_bytes_past_the_prompt_s_length_in_its_buffer_do_not_count():
    # An earlier view of one lineage: its buffer has since been written past
    # its length by a later prompt, and only its first n bytes are its own.
    series = object()
    prompt = grown(b"hello", 5, series)
    assert reused_prefix((prompt, b"XYZ"), grown(b"helloXYZ", 5, series)) == 5
    units = grown(b"hello__XYZ", 7, series)
    assert reused_prefix((prompt, b"XYZ"), units) == 5
    assert reused_prefix((prompt, b"__"), units) == 7
    assert reused_prefix((prompt, b"__X"), units) == 7
    assert reused_prefix((prompt, b"_-"), units) == 6


def test_a_partly_echoed_output_counts_its_common_prefix():
    assert reused_prefix((b"abc", b"defg"), b"abcdeX") == 5
    assert reused_prefix((b"abc", b"defg"), grown(b"abcdeXgg", 6)) == 5
    assert reused_prefix((b"abc", b"de"), grown(b"abcdeXgg", 8)) == 5


@given(st.binary(max_size=12), st.binary(max_size=6), st.binary(max_size=16), st.binary(max_size=6),
       st.booleans(), st.booleans())
def test_reused_is_the_prefix_against_the_parts_joined(prompt, output, units, spare, wrap_prompt, wrap_units):
    """Drawn beyond what the fast paths take: buffers with spare bytes after
    their length, plain bytes, either side wrapped or not."""
    seen_prompt = grown(prompt + spare, len(prompt)) if wrap_prompt else prompt
    seen_units = grown(units + spare, len(units)) if wrap_units else units
    assert reused_prefix((seen_prompt, output), seen_units) == common_prefix_len(prompt + output, units)


@given(st.binary(max_size=12), st.binary(max_size=6), st.binary(max_size=16), st.binary(max_size=6))
def test_reused_within_one_lineage_is_the_prefix_against_the_parts_joined(prompt, output, extra, spare):
    """Two views of one lineage (the later one extends the earlier), the
    buffer written on past both."""
    series = object()
    buffer = bytearray(prompt + extra + spare)
    seen, units = GrownBytes(buffer, len(prompt), series), GrownBytes(buffer, len(prompt) + len(extra), series)
    assert reused_prefix((seen, output), units) == common_prefix_len(prompt + output, prompt + extra)
