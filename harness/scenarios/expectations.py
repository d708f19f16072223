"""A run's result and trace judged against the scenario's `expect`."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from imprint_core.loop import ResearchResult

from .model import ExpectSpec, Range
from .selectors import parse_selector


@dataclass
class Failure:
    what: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"{self.what}: expected {self.expected}, got {self.actual}"


def _get(event: dict, dotted: str) -> Any:
    value: Any = event
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _as_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "null" if v is None else str(v)


def count_events(events: list[dict], selector: str) -> int:
    s = parse_selector(selector)
    return sum(1 for e in events if e.get("type") == s.type and all(_as_text(_get(e, k)) == v for k, v in s.filters))


def _check(failures: list[Failure], what: str, want: int | Range | None, got: float) -> None:
    if want is None:
        return
    ok = want.contains(got) if isinstance(want, Range) else got == want
    if not ok:
        failures.append(Failure(what, str(want), f"{got:g}" if isinstance(got, float) else str(got)))


def lost_writes(result: ResearchResult, events: list[dict]) -> list[str]:
    """Executed writes whose result is missing or recorded more than once,
    and calls without exactly one result."""
    problems = []
    results = Counter(e["call_id"] for e in events if e["type"] == "tool_result")
    for e in events:
        if e["type"] == "tool_call" and e.get("kind") == "write" and results[e["call_id"]] != 1:
            problems.append(f"write {e['call_id']} ({e['tool']}) has {results[e['call_id']]} recorded results")
    asked = [c.id for m in result.messages if m.role == "assistant" for c in m.tool_calls]
    answered = Counter(m.tool_call_id for m in result.messages if m.role == "tool")
    for cid in asked:
        if answered[cid] != 1:
            problems.append(f"call {cid} has {answered[cid]} tool results in the conversation")
    executed = sum(1 for e in events if e["type"] == "tool_result" and e.get("kind") == "write"
                   and e.get("status") != "not_executed")
    if executed != len(result.writes):
        problems.append(f"{executed} writes in the trace but {len(result.writes)} in the result")
    return problems


def check(expect: ExpectSpec, result: ResearchResult, events: list[dict]) -> list[Failure]:
    f: list[Failure] = []
    if expect.stop_reason and result.stop_reason is not expect.stop_reason:
        f.append(Failure("stop_reason", expect.stop_reason.value, result.stop_reason.value))
    if expect.final_mode and result.final_mode is not expect.final_mode:
        f.append(Failure("final_mode", expect.final_mode.value, result.final_mode.value))
    _check(f, "rounds", expect.rounds, result.rounds)
    _check(f, "requests", expect.requests, result.research_requests)
    _check(f, "reserved", expect.reserved, result.reserved)
    _check(f, "charged", expect.charged, result.charged)
    _check(f, "refunded", expect.refunded, result.refunded)
    _check(f, "writes_executed", expect.writes_executed, len(result.writes))
    for selector, want in expect.events.items():
        _check(f, f"events {selector}", want, count_events(events, selector))
    for needle in expect.answer_contains:
        if needle not in result.answer:
            f.append(Failure("answer", f"to contain {needle!r}", repr(result.answer[:120])))
    if expect.no_lost_writes:
        for problem in lost_writes(result, events):
            f.append(Failure("no_lost_writes", "every write and call recorded exactly once", problem))
    return f
