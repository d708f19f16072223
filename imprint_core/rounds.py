"""What a round is to the stop rule: its kind, and whether it made progress.

One definition, used by the loop and by replaying round logs of other agents.
"""
from __future__ import annotations

from typing import Iterable, Literal

RoundKind = Literal["read", "write", "ask", "error"]


def classify_round(calls: Iterable[tuple[str, str]], *, novelty_progress: bool) -> tuple[RoundKind, bool]:
    """`calls`: (tool kind, result status) of each call in the batch.

    A batch holding a write is a write round (left out of the patience rule);
    else one holding an ask is an ask round; else a read round. Progress is
    new evidence, or an answered ask (amendment 0159: an answer counts)."""
    kinds: set[str] = set()
    answered = False
    for kind, status in calls:
        kinds.add(kind)
        answered = answered or (kind == "ask" and status == "ok")
    kind: RoundKind = "write" if "write" in kinds else "ask" if "ask" in kinds else "read"
    return kind, novelty_progress or answered
