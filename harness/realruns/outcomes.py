"""A run's outcome as its source recorded it: `success`, `failure` or `unknown`.

The one rule of classification. An importer that knows its source's verdict
writes it into the round log's header labels as

    "outcome": {"value": "success", "field": "summary.max_reward", "raw": 1.0, "from": "ic_bash/gpt-4.json"}

(`field`: the source's own field, `raw`: its value there, `from`: where the
source keeps it). Round logs converted before that key existed carry the
source's field itself; `LEGACY_FIELDS` reads those, first present wins:

- `resolved` (SWE-bench's harness, mini-swe-agent's `index.jsonl`): true or false;
- `reward` (tau-bench, FireAct): 1 (or true) is success, anything lower failure;
- `correct` (Who&When's `is_correct`, the web runs): true or false;
- `score` (WebShop): 1.0 is success (a partial match is a failure).

An outcome is a label nobody here made: a stop rule does harm when it cuts
a run that went on to succeed, and saves what the rest of a failed run cost.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

OUTCOMES = ("success", "failure", "unknown")


@dataclass(frozen=True)
class Outcome:
    value: str                  # one of OUTCOMES
    field: str | None = None    # the source's own field it was read from
    raw: Any = None             # that field's value
    where: str | None = None    # where the source keeps it (a file), where known

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.value, "outcome_field": self.field, "outcome_raw": self.raw,
                "outcome_from": self.where}


UNKNOWN = Outcome("unknown")


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _truth(v: Any) -> str:
    return ("success" if v else "failure") if isinstance(v, bool) else "unknown"


def _full(v: Any) -> str:
    if isinstance(v, bool):         # FireAct records its reward as true or false
        return _truth(v)
    n = _number(v)
    return "unknown" if n is None else "success" if n >= 1.0 else "failure"


LEGACY_FIELDS = (("resolved", _truth), ("reward", _full), ("correct", _truth), ("score", _full))
"""Source fields of round logs written before `outcome`, in the order read."""


class OutcomeError(ValueError):
    """An `outcome` header key that is not one: the reader names the file."""

    def __init__(self, message: str, key: str, expected: str):
        super().__init__(message)
        self.key, self.expected = key, expected


def outcome_of(labels: Mapping[str, Any]) -> Outcome:
    """The outcome a round log's header labels record (UNKNOWN where none).
    An explicit `outcome` that is malformed raises `OutcomeError`."""
    given = labels.get("outcome")
    if given is not None:
        if not isinstance(given, Mapping):
            raise OutcomeError(f"outcome must be an object, not {type(given).__name__}", "labels.outcome",
                               'an object {"value": ..., "field": ..., "raw": ...}')
        value = given.get("value")
        if value not in OUTCOMES:
            raise OutcomeError(f"unknown outcome {value!r}", "labels.outcome.value", "one of " + ", ".join(OUTCOMES))
        field = given.get("field")
        if field is not None and not isinstance(field, str):
            raise OutcomeError("outcome field must be a string", "labels.outcome.field",
                               "the source's own field name, as text")
        where = given.get("from")
        return Outcome(value, field, given.get("raw"), where if isinstance(where, str) else None)
    for key, rule in LEGACY_FIELDS:
        if labels.get(key) is not None:
            value = rule(labels[key])
            if value != "unknown":
                return Outcome(value, key, labels[key], labels.get(f"{key}_source") or None)
    return UNKNOWN


def outcome_label(value: str, field: str, raw: Any, where: str | None = None) -> dict[str, Any]:
    """The header entry an importer writes (`labels["outcome"]`)."""
    if value not in OUTCOMES:
        raise ValueError(f"unknown outcome {value!r}: one of {', '.join(OUTCOMES)}")
    out = {"value": value, "field": field, "raw": raw}
    if where:
        out["from"] = where
    return out
