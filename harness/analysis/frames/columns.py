"""The four tables of `frames.Frames`, column by column, and how a cell's
number is read (`num`): the one schema the trace and round-log loaders fill.
"""
from __future__ import annotations

import math
from typing import Any

from imprint_core.counting import COUNTED_MODES

REQUEST_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "policy", "source", "id", "role", "context_id",
    "round", "attempt", "outcome", "estimated", "max_output", "reserved", "charged", "refunded", "charged_prompt",
    "charged_output", "prefix_reused", "output_tokens", "measured_prompt", "measured_cached", "measured_output",
    "ratio", "duration", "t", "error", "counting_mode", "counting_used", "counting_exact", "counter",
    *(f"est_{m}" for m in COUNTED_MODES), "reconciled"]

TOOL_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "source", "reply", "round", "index", "call_id", "tool",
    "kind", "status", "blocking", "verdict", "paragraphs", "new_paragraphs", "new_shingles", "repeated_error",
    "started", "finished", "duration", "deadline", "after_deadline", "overrun", "arguments", "text", "segments"]

ROUND_COLUMNS = [
    "run", "name", "scenario", "provider", "provider_kind", "source", "reply", "round", "kind", "progress",
    "new_paragraphs", "new_shingles", "patience_counter", "patience", "calls", "errors", "writes", "reserved",
    "charged", "t", "deadline", "stop"]

RUN_COLUMNS = [
    "run", "name", "path", "source", "scenario", "scenario_file", "provider", "provider_kind", "policy",
    "normalization", "patience", "timeout", "token_budget", "question", "stop_reason", "stop_detail",
    "stop_round", "final_mode", "rounds", "requests", "reserved", "charged", "refunded", "final_requests",
    "final_estimated", "final_measured_prompt", "writes", "evidence", "paused", "deadline", "stop_t", "end_t",
    "overshoot", "budget_requested", "tool_overruns", "max_tool_overrun", "complete", "warnings", "labels",
    "reward", "t0", "stop_rule"]

# the columns read as float64 (a missing figure is NaN)
NUMERIC_COLUMNS = {"estimated", "max_output", "reserved", "charged", "refunded", "charged_prompt", "charged_output",
            "prefix_reused", "output_tokens", "measured_prompt", "measured_cached", "measured_output", "ratio",
            "duration", "t", "started", "finished", "deadline", "overrun", "overshoot", "max_tool_overrun",
            "stop_t", "end_t", "final_estimated", "final_measured_prompt", "budget_requested", "t0"}



def num(v: Any) -> float | None:
    """A figure as a float; None for a missing, boolean, non-numeric or NaN one."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f
