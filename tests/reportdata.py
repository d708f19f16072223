"""Traces and round logs for the report, tune and gate tests: a few inline
scenarios run on the virtual clock, hand-written traces for providers the
stub cannot play (a local model, a recorded server), and round logs."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.scenarios.runner import run_scenario
from harness.scenarios import parse_scenario

RAIN = """\
name: {name}
question: Summarize the rainfall survey, station by station.
policy: {policy}
settings:
  chat.research_token_budget: 4096
provider:
  kind: stub
  script:
    - repeat: 30
      calls: [{{tool: search, args: {{query: "rainfall station ${{i}}"}}}}]
    - answer: "not reached"
tools:
  - name: search
    parameters: {{type: object, properties: {{query: {{type: string}}}}, required: [query]}}
    default:
      text: "Report ${{n}} notes that station ${{n}} measured rainfall of ${{n}}0 mm in district ${{n}} during survey ${{n}} of the wet season."
"""

STAGNANT_WRITES = """\
name: stagnant-writes
question: Collect the facts about the museum's new wing.
settings:
  chat.research_no_progress_rounds: 4
provider:
  kind: stub
  script:
    - calls: [{tool: search, args: {query: "museum new wing"}}]
    - calls: [{tool: search, args: {query: "museum"}}]
    - calls: [{tool: save_note, args: {text: "note"}}]
    - calls: [{tool: search, args: {query: "x"}}, {tool: broken, args: {}}]
    - repeat: 6
      calls: [{tool: search, args: {query: "museum wing ${i}"}}]
tools:
  - name: search
    parameters: {type: object, properties: {query: {type: string}}, required: [query]}
    default:
      text: "The museum's new wing opens in May and adds three galleries for the textile collection."
  - name: broken
    parameters: {type: object, properties: {}}
    default: {error: "backend unavailable"}
  - name: save_note
    kind: write
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    default: {text: "saved"}
"""

OVERRUN = """\
name: overrun
question: What does the 2026 transit plan say about night buses?
settings:
  chat.research_timeout_sec: 10
provider:
  kind: stub
  script:
    - calls: [{tool: search, args: {query: "transit plan night buses"}}]
    - answer: "not reached"
tools:
  - name: search
    blocking: true
    duration: 25
    parameters: {type: object, properties: {query: {type: string}}, required: [query]}
    default: {text: "The transit plan adds four night bus lines that run every thirty minutes between midnight and five."}
"""


def run_inline(text: str, name: str, out: Path) -> Path:
    scn = parse_scenario(text, f"{name}.yaml")
    path = out / f"{name}.jsonl"
    run = run_scenario(scn, path, run_id="test-run")
    assert run.error is None, run.error
    return path


def scenario_traces(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {
        "policy-reserve": run_inline(RAIN.format(name="policy-reserve", policy="reserve"), "policy-reserve", out),
        "policy-prefix-refund": run_inline(RAIN.format(name="policy-prefix-refund", policy="prefix-refund"),
                                           "policy-prefix-refund", out),
        "stagnant-writes": run_inline(STAGNANT_WRITES, "stagnant-writes", out),
        "overrun": run_inline(OVERRUN, "overrun", out),
    }


def _event(t: float, type: str, **data: Any) -> dict:
    return {"type": type, "t": t, "wall": "2026-01-01T00:00:00.000+00:00", **data}


def handmade_trace(path: Path, *, provider: str, provider_kind: str, ratios: list[float], scenario: str = "handmade",
                   overrun: float = 0.0, header_extra: dict | None = None, counting: dict | None = None) -> Path:
    """A minimal complete trace: one research request per ratio (estimate /
    measured = ratio, measured 1000), one read round per request, and,
    with `overrun`, a blocking tool finishing that long after the deadline."""
    ev = [_event(0, "header", format="imprint-trace/1", scenario=scenario, file=f"{scenario}.yaml", run_id="hand",
                 provider_kind=provider_kind, clock="virtual", **(header_extra or {})),
          _event(0, "run_start", question=f"q {scenario}", settings={"chat.research_timeout_sec": 300,
                                                                     "chat.research_token_budget": 65536,
                                                                     "chat.research_no_progress_rounds": 4,
                                                                     "chat.max_tokens": 1024},
                 policy="prefix-refund", provider=provider, counter="x", context_window=8192, deadline=300.0,
                 normalization="default", tools=[], **({"counting": counting} if counting else {}))]
    reserved = charged = 0
    t = 0.0
    for i, ratio in enumerate(ratios, start=1):
        est = round(1000 * ratio)
        res, chg = est + 256, est // 2
        reserved += res
        charged += chg
        ev.append(_event(t, "request_reserved", id=i, role="coordinator", context_id="coordinator", attempt=0,
                         estimated_prompt=est, max_output=256, reserved=res, budget_left=65536 - reserved))
        t += 1
        ev.append(_event(t, "request_settled", id=i, role="coordinator", context_id="coordinator", policy="prefix-refund",
                         outcome="ok", estimated_prompt=est, max_output=256, reserved=res, charged=chg, refunded=res - chg,
                         charged_prompt=chg, charged_output=0, prefix_reused=0, output_tokens=10, measured_prompt=1000,
                         measured_cached=None, measured_output=10, duration=1.0, error=None, interrupted=None, round=i))
        ev.append(_event(t, "tool_call", round=i, index=0, call_id=f"c{i}", tool="search", kind="read",
                         arguments={"q": f"query {chr(96 + i)}"}, blocking=True))
        ev.append(_event(t, "tool_result", round=i, call_id=f"c{i}", tool="search", kind="read", status="ok", chars=10,
                         after_deadline=False, started=t, finished=t, arguments={"q": f"query {chr(96 + i)}"},
                         text=f"evidence number {i} about the topic at hand", segments=None,
                         novelty={"paragraphs": 1, "new_paragraphs": 1, "new_shingles": 5}))
        ev.append(_event(t, "round_end", round=i, kind="read", progress=True, new_paragraphs=1, new_shingles=5,
                         patience_counter=0, patience=4, reserved=reserved, charged=charged, deadline=300.0))
    n = len(ratios)
    stop_reason, overshoot = "answered", 0.0
    if overrun:
        n += 1
        finished = 300.0 + overrun
        ev.append(_event(t, "tool_call", round=n, index=0, call_id="slow", tool="crawl", kind="read",
                         arguments={}, blocking=True))
        ev.append(_event(finished, "tool_result", round=n, call_id="slow", tool="crawl", kind="read", status="ok",
                         chars=5, after_deadline=True, started=t, finished=finished, arguments={}, text="late news",
                         segments=None, novelty={"paragraphs": 1, "new_paragraphs": 1, "new_shingles": 2}))
        ev.append(_event(finished, "round_end", round=n, kind="read", progress=True, new_paragraphs=1, new_shingles=2,
                         patience_counter=0, patience=4, reserved=reserved, charged=charged, deadline=300.0))
        t, stop_reason, overshoot = finished, "time_budget", overrun
    ev.append(_event(t, "stop", reason=stop_reason, detail="", round=n, reserved=reserved, charged=charged,
                     refunded=reserved - charged, overshoot=overshoot))
    mode = "answered" if stop_reason == "answered" else "synthesized"
    ev.append(_event(t, "answer", mode=mode, text="done"))
    ev.append(_event(t, "run_end", stop_reason=stop_reason, final_mode=mode, rounds=n, requests=len(ratios),
                     reserved=reserved, charged=charged, refunded=reserved - charged, writes=0, evidence=n, paused=0.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in ev), encoding="utf-8")
    return path


def round_log(path: Path, rounds: list[list[dict]], labels: dict | None = None) -> Path:
    """An imprint-rounds/1 log; each call: {"result": text} plus optional kind/status/tool."""
    lines = [json.dumps({"format": "imprint-rounds/1", "source": "test", "labels": labels or {}})]
    for i, calls in enumerate(rounds, start=1):
        full = [{"tool": c.get("tool", "search"), "args": c.get("args", {}), "kind": c.get("kind", "read"),
                 "status": c.get("status", "ok"), "result": c.get("result", "")} for c in calls]
        lines.append(json.dumps({"round": i, "calls": full}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def fact(n: int) -> str:
    """A distinct sentence per n (its 5-word windows all hold n)."""
    return f"Fact {n} says item {n} weighs {n}0 kg in crate {n} of shipment {n} for depot {n}."


def gate_toml(patience: int, labels: list[str] | None = None) -> str:
    """A small gate config: the stop rule at `patience`, the stub excluded
    from condition 2, no overrun allowed; with `labels`, [inputs] naming them."""
    inputs = ("[inputs]\ntraces = [\"traces\"]\nlatest_run = false\nround_logs = []\n"
              f"labels = {json.dumps(labels)}\n\n") if labels is not None else ""
    return (inputs + f"[premature_stops]\npatience = {patience}\nmax_premature = 0\n\n"
            "[divergence]\nmin_requests = 3\nexclude = [\"stub\"]\n\n[overruns]\nmax_count = 0\nmax_overrun_sec = 5.0\n")


def web_runs(root: Path, lull: str, fine: str, loop: str) -> None:
    """Three web runs under `root` (paths without .jsonl): a useful run whose
    first four rounds repeat one fact (the rule stops it early at patience 3),
    a useful run of new facts, and a loop of one fact from round 3 on."""
    round_log(root / f"{lull}.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}], [{"result": fact(3)}]])
    round_log(root / f"{fine}.jsonl", [[{"result": fact(n)}] for n in range(10, 16)])
    round_log(root / f"{loop}.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)


def page_sections(page: str) -> list[tuple[str, str]]:
    """A report page's (title, body) of each section, in order."""
    parts = re.split(r'<h2 id="[^"]*">', page.split("<nav>", 1)[1])[1:]
    return [(p.split("</h2>", 1)[0], p.split("</h2>", 1)[1]) for p in parts]
