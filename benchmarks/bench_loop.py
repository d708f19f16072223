"""Loop and harness speed (a script, not a test). Each figure is measured
in one run against a baseline on the same input:

- loop overhead per round with a zero-latency stub and 20 KB of new evidence
  a round, against a bare loop that only calls the same provider and tool and
  keeps the same transcript (target: 1 ms or less of overhead per round);
- the whole scenario library's wall time on the virtual clock (target 10 s);
- the tuning sweep over 10,000 rounds x 19 patience values x 3
  normalizations (target 30 s), against judging the rounds once.

    python benchmarks/bench_loop.py [--rounds 40] [--repeat 3] [--out reports/bench/loop.json]
    python benchmarks/bench_loop.py --overhead-only [--repeat 10]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from imprint_core import (CancelToken, FunctionTool, LoopConfig, Message, ModelRequest, NoveltyTracker,  # noqa: E402
                          ResearchLoop, ResearchSettings, ScriptedProvider, ToolCall, ToolSpec, TraceWriter, Turn,
                          VirtualClock, collect)
from imprint_core.events import RoundEnd  # noqa: E402
from imprint_core.novelty._fast import accel  # noqa: E402
from imprint_core.files import atomic_write_text  # noqa: E402

WORDS = [f"w{i}" for i in range(50_000)]


def evidence(round_no: int, size: int = 20_000) -> str:
    rng = random.Random(round_no)
    out, n = [], 0
    while n < size:
        para = " ".join(rng.choice(WORDS) for _ in range(60))
        out.append(para)
        n += len(para) + 2
    return "\n\n".join(out)[:size]


def _script(rounds: int) -> list[Turn]:
    return [Turn(tool_calls=[ToolCall(f"c{i}", "search", {"q": i})], usage=None) for i in range(rounds)] + \
        [Turn(text="done", usage=None)]


def run_ours(rounds: int, texts: list[str], marks: list[float] | None = None, *, trace_file: bool = False) -> float:
    """CPU seconds of one ResearchLoop run. `marks`: the CPU clock at the end
    of every round, read by a trace listener (a separate run from the timed
    ones, so the listener costs them nothing). `trace_file`: write the trace
    to a file, as a real run does."""
    clock = VirtualClock()
    provider = ScriptedProvider(_script(rounds), clock=clock, context_window=10**9)
    tool = FunctionTool(ToolSpec("search"), lambda a, ctx: texts[a["q"]])
    trace = None
    if trace_file:
        trace = TraceWriter(Path(tempfile.gettempdir()) / f"bench_loop_{os.getpid()}.jsonl", clock)
    if marks is not None:
        trace = TraceWriter(None, clock)
        trace.subscribe(lambda e: marks.append(time.process_time()) if isinstance(e, RoundEnd) else None)
    loop = ResearchLoop(provider, [tool], ResearchSettings(research_token_budget=2_000_000), clock=clock,
                        config=LoopConfig(research_max_output_tokens=64), trace=trace)
    t = time.process_time()
    result = loop.run("q")
    elapsed = time.process_time() - t
    assert result.rounds == rounds + 1 and result.stop_reason.value == "answered", result.stop_reason
    if trace is not None:
        trace.close()
        if trace.path is not None:
            trace.path.unlink()
    if marks is not None:
        marks.insert(0, t)
    return elapsed


def run_bare(rounds: int, texts: list[str], marks: list[float] | None = None) -> float:
    """The same provider and tool calls, the same transcript, nothing else:
    no budgets, counting, novelty or trace. CPU seconds."""
    clock = VirtualClock()
    provider = ScriptedProvider(_script(rounds), clock=clock, context_window=10**9)
    t = time.process_time()
    if marks is not None:
        marks.append(t)
    messages = [Message("user", "q")]
    while True:
        got = collect(provider.generate(ModelRequest(messages, [], 64, 1e18, CancelToken())))
        calls, text = got.calls, got.text
        if not calls:
            break
        messages.append(Message("assistant", text, tool_calls=tuple(calls)))
        for c in calls:
            messages.append(Message("tool", texts[c.arguments["q"]], tool_call_id=c.id))
        if marks is not None:
            marks.append(time.process_time())
    return time.process_time() - t


def run_novelty(rounds: int, texts: list[str], marks: list[float] | None = None) -> float:
    """The novelty tracker's share of the loop's work, alone: the same
    judge and commit calls the loop makes on the same results. CPU seconds."""
    tracker = NoveltyTracker(LoopConfig().novelty)
    t = time.process_time()
    if marks is not None:
        marks.append(t)
    for i in range(rounds):
        tracker.commit_round([tracker.judge("ok", texts[i], None, {"q": i})])
        if marks is not None:
            marks.append(time.process_time())
    return time.process_time() - t


def pure(fn):
    """fn on the pure-Python novelty path (IMPRINT_NOVELTY_PURE=1's)."""
    def run(*args, **kwargs):
        with accel.compiled(False):
            return fn(*args, **kwargs)
    return run


def _per_round(marks: list[float]) -> list[float]:
    return [b - a for a, b in zip(marks, marks[1:])]


def bench_overhead(rounds: int, repeat: int) -> dict:
    """Overhead = our loop less the bare loop, per round (rounds + 1 requests,
    the last one answering), in CPU time: the machine is shared, and CPU
    time leaves out the time other processes take. Split into the novelty
    tracker's work (the same calls replayed alone) and the rest (requests,
    counting, ledger, trace events, tool dispatch). The three are run in
    turn in each repeat and the fastest of each kept. Growth compares the
    first and last ten research rounds of one run (median over the repeats),
    so a cost that grows with the transcript shows and load that comes and
    goes between runs does not."""
    texts = [evidence(i) for i in range(rounds)]
    run_ours(rounds, texts), run_bare(rounds, texts), run_novelty(rounds, texts)  # warm: imports, caches
    timed: dict[str, list[float]] = {"ours": [], "bare": [], "novelty": [], "traced": [], "ours_pure": [],
                                     "novelty_pure": []}
    growth: dict[str, list[tuple[float, float]]] = {"overhead": [], "novelty": [], "non_novelty": []}
    ten = min(10, rounds // 2) or 1

    def first_last(ms: list[float]) -> tuple[float, float]:
        return statistics.fmean(ms[:ten]), statistics.fmean(ms[-ten:])

    for _ in range(repeat):
        timed["ours"].append(run_ours(rounds, texts))
        timed["novelty"].append(run_novelty(rounds, texts))
        timed["bare"].append(run_bare(rounds, texts))
        timed["traced"].append(run_ours(rounds, texts, trace_file=True))
        if accel.active():        # the same loop on the pure-Python novelty path, for the comparison
            timed["ours_pure"].append(pure(run_ours)(rounds, texts))
            timed["novelty_pure"].append(pure(run_novelty)(rounds, texts))
        per = {}
        for name, fn in (("ours", run_ours), ("bare", run_bare), ("novelty", run_novelty)):
            marks: list[float] = []
            fn(rounds, texts, marks)
            per[name] = [m * 1000 for m in _per_round(marks)[:rounds]]
        overhead = [o - b for o, b in zip(per["ours"], per["bare"])]
        growth["overhead"].append(first_last(overhead))
        growth["novelty"].append(first_last(per["novelty"]))
        growth["non_novelty"].append(first_last([o - n for o, n in zip(overhead, per["novelty"])]))
    ours, bare, novelty, traced = (min(timed[k]) for k in ("ours", "bare", "novelty", "traced"))
    n = rounds + 1
    per_round = (ours - bare) / n * 1000
    novelty_ms = novelty / n * 1000

    def summary(pairs: list[tuple[float, float]]) -> dict:
        first, last = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        ratios = [p[1] / p[0] for p in pairs if p[0] > 0]
        return {"first_ms_per_round": round(first, 3), "last_ms_per_round": round(last, 3),
                "ratio_last_to_first": round(statistics.median(ratios), 3) if ratios else None}

    return {"rounds": rounds, "evidence_bytes_per_round": 20_000, "timer": "process CPU time",
            "ours_s": round(ours, 4), "bare_s": round(bare, 4), "novelty_s": round(novelty, 4),
            "ratio_ours_to_bare": round(ours / bare, 2), "overhead_ms_per_round": round(per_round, 3),
            "novelty_ms_per_round": round(novelty_ms, 3),
            "non_novelty_ms_per_round": round(per_round - novelty_ms, 3),
            "novelty_share": round(novelty_ms / per_round, 3) if per_round > 0 else None,
            # Not part of the figure (the bare loop writes no trace either): what
            # writing the trace lines, JSON with the 20 KB text, adds in a real run.
            "trace_file_ms_per_round": round((traced - ours) / n * 1000, 3),
            "growth": {"rounds_compared": ten, **{k: summary(v) for k, v in growth.items()}},
            "compiled_path": accel.active(), "pure_path": pure_path(timed, bare, n, per_round),
            "target_ms_per_round": 1.0, "met": per_round <= 1.0}


def pure_path(timed: dict, bare: float, n: int, per_round: float) -> dict | None:
    """The overhead with novelty on the pure-Python path, in the same run (None: the compiled path is not built)."""
    if not timed["ours_pure"]:
        return None
    overhead = (min(timed["ours_pure"]) - bare) / n * 1000
    return {"overhead_ms_per_round": round(overhead, 3),
            "novelty_ms_per_round": round(min(timed["novelty_pure"]) / n * 1000, 3),
            "ratio_compiled_to_pure_overhead": round(per_round / overhead, 3) if overhead > 0 else None}


def bench_library() -> dict:
    from harness.scenarios.runner import run_scenario
    from harness.scenarios import load_scenario, scenario_files
    files = scenario_files([ROOT / "scenarios"])
    scenarios = [load_scenario(f) for f in files if f.name != "schema.json"]
    stub = [s for s in scenarios if s.provider.kind == "stub"]
    t = time.perf_counter()
    runs = [run_scenario(s) for s in stub]
    wall = time.perf_counter() - t
    virtual = sum(r.result.messages and 0 or 0 for r in runs)  # noqa: F841 (kept simple)
    return {"scenarios": len(stub), "passed": sum(r.passed for r in runs), "wall_s": round(wall, 3),
            "target_s": 10.0, "met": wall <= 10.0}


def bench_sweep(total_rounds: int = 10_000) -> dict:
    from harness.realruns.roundlogs import Round, RoundCall, RoundLog, apply_patience, round_progress
    from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig
    rng = random.Random(5)
    logs, made = [], 0
    while made < total_rounds:
        n = min(rng.randint(20, 200), total_rounds - made)
        rounds = []
        for r in range(n):
            topic = rng.randint(0, 40) if rng.random() < 0.5 else made + r
            text = " ".join(WORDS[(topic * 97 + k) % len(WORDS)] for k in range(80))
            rounds.append(Round(r + 1, [RoundCall("search", {"q": topic}, "read", "ok", text)]))
        logs.append(RoundLog(f"synthetic-{len(logs)}", "bench", {}, rounds))
        made += n
    t = time.perf_counter()
    judged = {norm: [round_progress(log, NoveltyConfig(normalization=norm)) for log in logs] for norm in NORMALIZATIONS}
    judge_s = time.perf_counter() - t
    stops = 0
    for norm in NORMALIZATIONS:
        for patience in range(2, 21):
            for progress in judged[norm]:
                stops += apply_patience(progress, patience)[0] is not None
    total = time.perf_counter() - t
    return {"rounds": total_rounds, "runs": len(logs), "patience_values": 19, "normalizations": len(NORMALIZATIONS),
            "judge_once_s": round(judge_s, 3), "sweep_total_s": round(total, 3),
            "ratio_sweep_to_judging": round(total / judge_s, 3), "target_s": 30.0, "met": total <= 30.0,
            "stops_counted": stops}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "loop.json"))
    ap.add_argument("--overhead-only", action="store_true",
                    help="print the loop overhead figures alone and write nothing (while working on the loop)")
    args = ap.parse_args()
    if args.overhead_only:
        print("loop_overhead", json.dumps(bench_overhead(args.rounds, args.repeat)))
        return 0
    results = {"machine": {"python": platform.python_version(), "processor": platform.machine(),
                           "cores": os.cpu_count(), "load_average_at_start": round(os.getloadavg()[0], 2)},
               "loop_overhead": bench_overhead(args.rounds, args.repeat),
               "scenario_library": bench_library(), "tuning_sweep": bench_sweep()}
    atomic_write_text(Path(args.out), json.dumps(results, indent=2) + "\n")
    for name, figures in results.items():
        print(name, json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
