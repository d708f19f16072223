"""Token charges past their reservation (research-loop.md, "Token accounting").

Under `prefix-refund` with reconciliation the charge follows what the
provider measured, so a request whose prompt was under-estimated is charged
more than it reserved: an overrun, which the report shows and the gate
judges, every one. Read from the requests frame alone (charged above
reserved on a research request), so traces written before the ledger
recorded `overrun` are judged the same way.
"""
from __future__ import annotations

from typing import Any

import pandas as pd


def token_overruns(requests: pd.DataFrame) -> pd.DataFrame:
    """The research requests charged past their reservation, with the
    tokens past it (`tokens_over`), largest first."""
    if requests.empty:
        return requests.assign(tokens_over=pd.Series(dtype=float))
    r = requests[(requests["role"] != "final") & requests["reserved"].notna() & requests["charged"].notna()]
    r = r.assign(tokens_over=r["charged"] - r["reserved"])
    r = r[r["tokens_over"] > 0]
    # A replayed cassette repeats its recording's charges (as `Frames.measured_requests` says of its
    # measurements): a recorded session read beside the run that replayed it is one session, counted once.
    who = r["scenario"].where(r["scenario"].notna(), r["run"]) if "scenario" in r else r["run"]
    r = r[~r.assign(_who=who).duplicated(subset=[c for c in ("provider", "_who", "id", "role", "attempt", "reserved",
                                                               "charged") if c in r.columns or c == "_who"])]
    return r.sort_values("tokens_over", ascending=False)


def token_overrun_row(requests: pd.DataFrame, max_count: int = 0) -> dict[str, Any]:
    """One gate row: how many research requests overran, in how many runs."""
    over = token_overruns(requests)
    count = len(over)
    largest = int(over["tokens_over"].max()) if count else 0
    return {"subject": "token charges past the reservation",
            "figure": f"{count} request(s) in {over['run'].nunique() if count else 0} run(s), largest {largest} tokens",
            "value": count, "threshold": f"≤ {max_count}", "passed": count <= max_count}


def token_overrun_details(requests: pd.DataFrame, limit: int = 10) -> list[str]:
    """A line per overrun (the largest `limit`), then how many more."""
    over = token_overruns(requests)
    lines = [f"{r.run}: request {int(r.id) if pd.notna(r.id) else '?'} ({r.role}, round "
             f"{int(r['round']) if pd.notna(r['round']) else '?'}) charged {int(r.charged)} of "
             f"{int(r.reserved)} reserved, {int(r.tokens_over)} past it"
             for _, r in over.head(limit).iterrows()]
    if len(over) > limit:
        lines.append(f"… and {len(over) - limit} more")
    return lines
