"""The ledger's reconciliation (issue 14) and its prefix check against the two
parts a context has seen (issue 15), exercised on the ledger alone: fast
enough for the mutation run's test selection (pyproject `[tool.mutmut]`),
which the end-to-end tests of tests/test_counting_modes.py are not."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from imprint_core import TokenLedger, Usage
from imprint_core.budget import _reused
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


def test_a_reconciled_charge_may_exceed_the_reservation():
    ledger = TokenLedger(1000)
    rec = settle(ledger, (1, 2), (3,), estimated=2, max_output=4, usage=Usage(prompt_tokens=20, output_tokens=1))
    assert rec.charged == 21 and rec.reserved == 6 and rec.refunded == -15
    assert ledger.totals.charged == 21 and ledger.totals.refunded == -15


def test_reserve_policy_reconciles_to_the_measured_prompt_and_the_whole_allowance():
    ledger = TokenLedger(1000, policy="reserve")
    rec = settle(ledger, (1, 2, 3), (4,), max_output=10, usage=Usage(prompt_tokens=5, output_tokens=1))
    assert rec.reconciled is True
    assert (rec.charged_prompt, rec.charged_output, rec.charged) == (5, 10, 15)
    plain = settle(ledger, (1, 2, 3), (4,), max_output=10, usage=Usage(prompt_tokens=5), reconcile=False)
    assert plain.reconciled is False and plain.charged == plain.reserved == 13


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
    assert _reused((grown(b"abcdef", 4, same), b""), grown(b"abcdef", 6, same)) == 4
    # Different lineages: the contents decide (the first byte differs).
    assert _reused((grown(b"xbcd", 4, object()), b""), grown(b"abcdef", 6, object())) == 0
    assert _reused((grown(b"xbcd", 4, None), b""), grown(b"abcdef", 6, None)) == 0


def test_output_bytes_past_the_prompt_s_length_in_its_buffer_do_not_count():
    # An earlier view of one lineage: its buffer has since been written past
    # its length by a later prompt, and only its first n bytes are its own.
    series = object()
    prompt = grown(b"hello", 5, series)
    assert _reused((prompt, b"XYZ"), grown(b"helloXYZ", 5, series)) == 5
    units = grown(b"hello__XYZ", 7, series)
    assert _reused((prompt, b"XYZ"), units) == 5
    assert _reused((prompt, b"__"), units) == 7
    assert _reused((prompt, b"__X"), units) == 7
    assert _reused((prompt, b"_-"), units) == 6


def test_a_partly_echoed_output_counts_its_common_prefix():
    assert _reused((b"abc", b"defg"), b"abcdeX") == 5
    assert _reused((b"abc", b"defg"), grown(b"abcdeXgg", 6)) == 5
    assert _reused((b"abc", b"de"), grown(b"abcdeXgg", 8)) == 5


@given(st.binary(max_size=12), st.binary(max_size=6), st.binary(max_size=16), st.binary(max_size=6),
       st.booleans(), st.booleans())
def test_reused_is_the_prefix_against_the_parts_joined(prompt, output, units, spare, wrap_prompt, wrap_units):
    """Drawn beyond what the fast paths take: buffers with spare bytes after
    their length, plain bytes, either side wrapped or not."""
    seen_prompt = grown(prompt + spare, len(prompt)) if wrap_prompt else prompt
    seen_units = grown(units + spare, len(units)) if wrap_units else units
    assert _reused((seen_prompt, output), seen_units) == common_prefix_len(prompt + output, units)


@given(st.binary(max_size=12), st.binary(max_size=6), st.binary(max_size=16), st.binary(max_size=6))
def test_reused_within_one_lineage_is_the_prefix_against_the_parts_joined(prompt, output, extra, spare):
    """Two views of one lineage (the later one extends the earlier), the
    buffer written on past both."""
    series = object()
    buffer = bytearray(prompt + extra + spare)
    seen, units = GrownBytes(buffer, len(prompt), series), GrownBytes(buffer, len(prompt) + len(extra), series)
    assert _reused((seen, output), units) == common_prefix_len(prompt + output, prompt + extra)
