"""Round logs (`imprint-rounds/1`, and raw trajectories converted to them)
into rows of the four tables (`frames.Frames`), replayed through a stop
rule: they carry no model, budgets or novelty of their own, so the verdicts,
the patience counter and the stop are the replay's.
"""
from __future__ import annotations

from pathlib import Path

from ...realruns.roundlogs import RoundLog, RuleFactory, replay_rule
from .columns import num


def roundlog_rows(log: RoundLog, rid: str, acc: dict[str, list[dict]], *, factory: RuleFactory, rule: str,
                   normalization: str, user_turns: str) -> None:
    """Append the rows of `log` (run id `rid`), replayed through `factory`'s rule, to the tables in `acc`."""
    path = Path(log.path)
    name = path.stem
    source = log.source
    base = {"run": rid, "name": name, "scenario": None, "provider": None, "provider_kind": None}
    # The same replay the tuner, compare and `imprint replay` use: one rule,
    # reset at each reply, seeing each round as the loop would.
    replayed = replay_rule(log, factory, user_turns)
    stop_round = replayed.stop_round
    patience = None
    for reply_no, view, notes in replayed.rounds:
        number = view.index
        verdicts = notes.get("verdicts") or {}
        for i, c in enumerate(view.calls):
            v = verdicts.get(i)
            if v is None:
                verdict = "not_evidence" if c.kind != "read" else None
            elif c.status == "error":
                verdict = "repeated_error" if v.repeated_error else "error"
            elif c.status == "empty" or not v.paragraphs:
                verdict = "empty"
            else:
                verdict = "new" if v.new_paragraphs else "repeat"
            acc["tool_calls"].append(base | {
                "source": "roundlog", "reply": reply_no, "round": number, "index": i, "call_id": f"{number}.{i}",
                "tool": c.tool, "kind": c.kind, "status": c.status, "blocking": None, "verdict": verdict,
                "paragraphs": v.paragraphs if v else None, "new_paragraphs": v.new_paragraphs if v else None,
                "new_shingles": v.new_shingles if v else None,
                "repeated_error": v.repeated_error if v and c.status == "error" else None, "started": None,
                "finished": None, "duration": None, "deadline": None, "after_deadline": False, "overrun": None,
                "arguments": c.args, "text": c.result, "segments": list(c.segments) if c.segments is not None else None})
        patience = notes.get("patience", patience)
        acc["rounds"].append(base | {
            "source": "roundlog", "reply": reply_no, "round": number, "kind": view.kind,
            "progress": notes.get("progress"), "new_paragraphs": notes.get("new_paragraphs"),
            "new_shingles": notes.get("new_shingles"), "patience_counter": notes.get("patience_counter"),
            "patience": notes.get("patience"), "calls": len(view.calls),
            "errors": sum(c.status == "error" for c in view.calls), "writes": sum(c.kind == "write" for c in view.calls),
            "reserved": None, "charged": None, "t": None, "deadline": None,
            "stop": "no_progress" if number == stop_round else None})
    reward = num(log.labels.get("reward"))
    acc["runs"].append(base | {
        "path": str(path), "source": "roundlog", "scenario_file": None, "policy": None,
        "normalization": normalization if rule == "record" else None, "patience": patience, "timeout": None,
        "token_budget": None, "question": None, "stop_reason": "no_progress" if stop_round else None,
        "stop_detail": f"replayed: {replayed.reason}" if stop_round else None,
        "stop_round": stop_round, "final_mode": None, "rounds": len(log.rounds), "requests": None,
        "reserved": None, "charged": None, "refunded": None, "final_requests": 0, "final_estimated": None,
        "final_measured_prompt": None, "writes": sum(c.kind == "write" for r in log.rounds for c in r.calls),
        "evidence": None, "paused": None, "deadline": None, "stop_t": None, "end_t": None, "overshoot": None,
        "budget_requested": None, "t0": None, "tool_overruns": 0, "max_tool_overrun": None, "complete": True, "warnings": 0,
        "labels": dict(log.labels) | {"source": source}, "reward": reward, "stop_rule": rule})
