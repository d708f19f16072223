"""Overruns past the reservation: recorded by the ledger, shown by a gate row."""
from __future__ import annotations

import pandas as pd

from imprint_core import TokenLedger, Usage
from harness.analysis.gate.overruns import token_overrun_details, token_overrun_row, token_overruns


class Ids:
    name = "ids"

    def to_tokens(self, units: int) -> int:
        return units


def frame(ledger: TokenLedger, run: str) -> pd.DataFrame:
    return pd.DataFrame([{"run": run, "id": r.id, "role": r.role, "round": 1, "reserved": r.reserved,
                          "charged": r.charged} for r in ledger.records + ledger.final_records])


def test_every_overrun_is_counted_and_named():
    ledger = TokenLedger(100_000)
    for i, measured in enumerate((10, 5_000, 900)):     # the estimate is 944 prompt tokens
        r = ledger.reserve(944, 10, context_id=f"worker-{i}")
        ledger.settle(r, counter=Ids(), prompt_units=tuple(range(944)), output_units=(1,), outcome="ok",
                      usage=Usage(prompt_tokens=measured, output_tokens=1), reconcile=True)
    ledger.record_final(counter=Ids(), estimated_prompt=5, max_output=5, output_units=(1,), outcome="ok",
                        usage=Usage(prompt_tokens=9_000, output_tokens=1))
    assert [r.overrun for r in ledger.records] == [0, 5_001 - 954, 0]
    df = frame(ledger, "run-a")
    assert len(token_overruns(df)) == 1 == ledger.totals.overruns          # the final request is never one
    row = token_overrun_row(df)
    assert row["value"] == 1 and not row["passed"] and "largest 4047 tokens" in row["figure"]
    assert token_overrun_row(df, max_count=1)["passed"]
    assert token_overrun_details(df) == ["run-a: request 2 (coordinator, round 1) charged 5001 of 954 reserved, "
                                         "4047 past it"]


def test_no_overrun_under_reserve_or_without_reconciliation():
    for policy, reconcile in (("reserve", True), ("prefix-refund", False)):
        ledger = TokenLedger(100_000, policy)
        r = ledger.reserve(944, 10)
        ledger.settle(r, counter=Ids(), prompt_units=tuple(range(944)), output_units=(1,), outcome="ok",
                      usage=Usage(prompt_tokens=5_000, output_tokens=1), reconcile=reconcile)
        row = token_overrun_row(frame(ledger, "b"))
        assert row["value"] == 0 and row["passed"] and ledger.totals.overruns == 0
    assert token_overrun_row(pd.DataFrame(columns=["run", "role", "reserved", "charged"]))["value"] == 0


def test_the_report_names_every_overrun_of_a_recorded_session(tmp_path):
    """Session 51 was recorded when a reconciled charge could pass its
    reservation unnoticed (a negative refund): the report's section names it."""
    from pathlib import Path

    from harness.analysis.frames.load import load_frames
    from harness.analysis.report.sections import build_sections
    root = Path(__file__).resolve().parents[3] / "traces" / "cassettes" / "llamacpp"
    frames = load_frames([root / "51-remote-llamacpp-research-nostream.trace.jsonl",
                          root / "50-remote-llamacpp-research-stream.trace.jsonl"])
    (section,) = [s for s in build_sections(frames, tmp_path) if s.title == "Token charges past the reservation"]
    (_, table), = section.tables
    assert table["tokens_over"].tolist() == [25] and table["run"].str.contains("51-remote").all()
    assert token_overrun_row(frames.requests)["value"] == 1
