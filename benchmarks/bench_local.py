"""Provider `local` benchmark (a script, not a test): real SmolLM2 on the CPU.

Measures, in one run, and writes reports/bench/local.json:

- overhead: our provider against a bare `model.generate` on the same prompt
  ids and the same number of new tokens (greedy; runs interleaved, medians);
  target ratio <= 1.05. Our time includes rendering and tokenizing the chat
  template; the bare run is handed the ids. Also with the tool-call grammar.
- deadline overshoot: a deadline that passes while decoding, >= 20 trials at
  random points; how late the provider stopped (and how late the stream
  ended), p50 and p95 in ms, against the decode step time.
- prefix reuse: time to first token on a 1,000+ token shared prefix, with
  the context's KV cache reused and without.
- dtype: bfloat16 and int8 (int8 linear layers) against float32, prefill of
  the same 1,000+ token prompt, decode step time at a short and a long
  context, a whole research run, and how many of the tokens a greedy reply
  chose agree with float32's (the same prompt, the same number of tokens).
- tool calls: 5 prompts with tool_choice=required (valid calls) and auto
  (how often the model calls at all).

    python benchmarks/bench_local.py [--tokens 48] [--trials 20] [--out PATH] [--sections dtype,...]

The model folder must be built (`imprint model build`). The figures depend on
the machine and on what else runs on it: the load average is recorded too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from imprint_core import CancelToken, Message, ModelRequest, MonotonicClock, ToolSpec, collect  # noqa: E402
from harness.live.model_folder import load_local_provider  # noqa: E402
from imprint_core.counting import common_prefix_len  # noqa: E402
from imprint_core.providers.local import LocalProvider  # noqa: E402

TARGET_RATIO = 1.05
SECTIONS = ("overhead", "deadline", "prefix_cache", "tool_calls", "dtype")
STORY = [Message("user", "Write a long story about a dragon who reads books in an old library.")]
DOCUMENT = " ".join(
    f"Section {i}: the archive records that the harbour of Tessaly was rebuilt in {1700 + 3 * i} after a storm, "
    f"that its lighthouse keeper kept {i + 4} logbooks, and that the salt trade brought {i * 7} ships a year."
    for i in range(30))
SEARCH = ToolSpec("search", "Search the document corpus; returns matching passages.",
                  {"type": "object", "properties": {"query": {"type": "string", "maxLength": 40}},
                   "required": ["query"]})
FETCH = ToolSpec("fetch", "Read one document of the corpus by its number.",
                 {"type": "object", "properties": {"doc_id": {"type": "integer", "minimum": 1, "maximum": 9}},
                  "required": ["doc_id"]})
QUESTIONS = ["Who invented the telephone?", "What is the boiling point of water at sea level?",
             "When did the Berlin Wall fall?", "Open document 2 of the corpus.", "How tall is Mount Everest?"]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run(provider: LocalProvider, messages, tools=(), max_output=64, *, context="bench", deadline=None):
    clock = provider.clock
    req = ModelRequest(list(messages), list(tools), max_output,
                       deadline if deadline is not None else clock.now() + 3600, CancelToken(), context_id=context)
    got = collect(provider.generate(req))
    return got.text, list(got.calls), got.usage, provider.stats[-1]


def bench_overhead(p: LocalProvider, tokens: int, repeat: int) -> dict:
    """Paired runs in alternating order; the figures are medians of the
    per-pair ratios, in wall time and in process CPU time."""
    import torch
    ids = list(p.counter.prompt_units(STORY, []))
    tool_ids = list(p.counter.prompt_units(STORY, [SEARCH]))  # the tools' block makes this prompt longer
    p.forget()
    _, _, usage, st = run(p, STORY, max_output=tokens, context="warm")
    n = st.generated

    def timed(fn):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        return (time.perf_counter() - wall, time.process_time() - cpu), result

    def ours(context: str, tools=()):
        p.forget()
        (wall, cpu), (_, _, u, st) = timed(lambda: run(p, STORY, tools, max_output=n, context=context))
        assert tools or st.generated == n, (st.generated, n)
        return wall, cpu, list(u.output_units)

    def bare(prompt: list[int], count: int):
        x = torch.tensor([prompt])
        with torch.inference_mode():
            (wall, cpu), out = timed(lambda: p.model.generate(x, max_new_tokens=count, min_new_tokens=count,
                                                              do_sample=False,
                                                              pad_token_id=p.tokenizer.eos_token_id))
        return wall, cpu, out[0, len(prompt):].tolist()

    bare(ids, 4)  # warm-up
    rows, grammar_rows, same = [], [], True
    for i in range(repeat):
        o, b = (ours("o"), bare(ids, n)) if i % 2 == 0 else reversed((bare(ids, n), ours("o")))
        same = same and o[2] == b[2]
        rows.append((o, b))
        # With a tool offered, decoding follows the grammar; bare gets the same
        # (longer) prompt and as many tokens as the grammar-following run made.
        g = ours("g", [SEARCH])
        grammar_rows.append((g, bare(tool_ids, len(g[2]))))

    def med(values) -> float:
        return round(statistics.median(values), 4)

    wall_ratio = med(o[0] / b[0] for o, b in rows)
    cpu_ratio = med(o[1] / b[1] for o, b in rows)
    return {"prompt_tokens": len(ids), "new_tokens": n, "repeat": repeat,
            "ratio": wall_ratio, "cpu_ratio": cpu_ratio, "target_ratio": TARGET_RATIO,
            "meets_target": wall_ratio <= TARGET_RATIO, "meets_target_cpu": cpu_ratio <= TARGET_RATIO,
            "same_tokens_as_bare": same,
            "ours_s_median": med(o[0] for o, _ in rows), "bare_generate_s_median": med(b[0] for _, b in rows),
            "ours_cpu_s_median": med(o[1] for o, _ in rows),
            "bare_generate_cpu_s_median": med(b[1] for _, b in rows),
            "with_grammar_prompt_tokens": len(tool_ids),
            "with_grammar_ratio": med(g[0] / b[0] for g, b in grammar_rows),
            "with_grammar_cpu_ratio": med(g[1] / b[1] for g, b in grammar_rows),
            "pair_ratios": [round(o[0] / b[0], 4) for o, b in rows],
            "pair_cpu_ratios": [round(o[1] / b[1], 4) for o, b in rows],
            "note": "ratio: median of paired wall-time ratios; cpu_ratio: the same in process CPU time, "
                    "which other processes on a shared machine disturb far less"}


def bench_deadline(p: LocalProvider, trials: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    p.forget("dl")
    _, _, _, st = run(p, STORY, max_output=16, context="dl")
    step = st.decode_seconds / max(st.generated - 1, 1)
    late_stop, late_end, steps, generated = [], [], [], []
    for _ in range(trials):
        # The prompt is cached, so decoding starts at once; the deadline
        # falls after 3 to 12 decode steps.
        clock = p.clock
        deadline = clock.now() + rng.uniform(3, 12) * step
        _, _, usage, st = run(p, STORY, max_output=400, context="dl", deadline=deadline)
        end = clock.now()
        assert st.stop == "deadline", st
        late_stop.append((st.stopped_at - deadline) * 1000)
        late_end.append((end - deadline) * 1000)
        steps.append(st.decode_seconds / max(st.generated, 1) * 1000)  # this trial's own step time
        generated.append(st.generated)
    in_steps = [late / step_ms for late, step_ms in zip(late_stop, steps)]
    return {"trials": trials, "decode_step_ms_p50": round(statistics.median(steps), 2),
            "overshoot_ms_p50": round(pct(late_stop, 0.5), 2), "overshoot_ms_p95": round(pct(late_stop, 0.95), 2),
            "overshoot_ms_max": round(max(late_stop), 2),
            "overshoot_steps_p50": round(pct(in_steps, 0.5), 3), "overshoot_steps_p95": round(pct(in_steps, 0.95), 3),
            "within_one_step_fraction": round(sum(v <= 1.0 for v in in_steps) / trials, 3),
            "stream_end_overshoot_ms_p50": round(pct(late_end, 0.5), 2),
            "stream_end_overshoot_ms_p95": round(pct(late_end, 0.95), 2),
            "target": "within one decode step", "tokens_generated_per_trial": generated}


def long_prompt() -> tuple[list[Message], list[Message]]:
    first = [Message("system", "You answer questions about the document."),
             Message("user", DOCUMENT + "\n\nWhen was the harbour rebuilt after the storm?")]
    return first, first + [Message("assistant", "It was rebuilt in 1700."),
                           Message("user", "How many logbooks did the keeper keep in section 3?")]


def bench_prefix(p: LocalProvider, repeat: int) -> dict:
    first, second = long_prompt()
    shared = len(p.counter.prompt_units(first, []))
    with_cache, without, reused, prefilled = [], [], 0, 0
    for _ in range(repeat):
        p.forget()
        _, _, _, st_a = run(p, first, max_output=8, context="px")
        _, _, u, st = run(p, second, max_output=1, context="px")
        with_cache.append(st.prefill_seconds)
        reused, prefilled = u.cached_tokens, u.prompt_tokens - u.cached_tokens
        _, _, _, st_fresh = run(p, second, max_output=1, context="fresh")
        without.append(st_fresh.prefill_seconds)
        p.forget("fresh")
    w, wo = statistics.median(with_cache), statistics.median(without)
    return {"shared_prefix_tokens": shared, "prompt_tokens": len(p.counter.prompt_units(second, [])),
            "reused_tokens": reused, "prefilled_tokens_with_reuse": prefilled, "repeat": repeat,
            "ttft_with_reuse_s_median": round(w, 4), "ttft_without_reuse_s_median": round(wo, 4),
            "speedup": round(wo / w, 2) if w else None}


def research_run(p: LocalProvider) -> tuple[float, int, int]:
    """The loop the exact-count test runs: scripted corpus tools, every
    reply a call, stopped by the no-progress rule, then the final answer."""
    from imprint_core import FunctionTool, LoopConfig, ResearchLoop, ResearchSettings, ToolOutput
    passages = ("Alexander Graham Bell was awarded the first US patent for the telephone in March 1876.",
                "Antonio Meucci had filed a caveat for a talking telegraph in 1871.")
    tools = [FunctionTool(SEARCH, lambda a, c: ToolOutput("\n\n".join(passages), segments=passages)),
             FunctionTool(FETCH, lambda a, c: passages[0])]
    p.forget()
    p.tool_choice = "required"
    try:
        first = len(p.stats)
        loop = ResearchLoop(p, tools, ResearchSettings(research_timeout_sec=3600, research_no_progress_rounds=2,
                                                       max_tokens=64),
                            clock=p.clock, config=LoopConfig(research_max_output_tokens=48))
        t = time.perf_counter()
        loop.run("Who invented the telephone?")
        elapsed = time.perf_counter() - t
    finally:
        p.tool_choice = "auto"
    stats = p.stats[first:]
    return elapsed, sum(s.prefilled for s in stats), sum(s.generated for s in stats)


DTYPES = ("float32", "bfloat16", "int8")  # float32 first: the reference the others are compared with


def bench_dtypes(repeat: int) -> dict:
    """Every dtype loaded at once and run in turn (the order rotating), so
    that they share the machine's load; medians of the paired ratios against
    float32. Decode is timed at a short and at a long context, and a whole
    research run is timed too."""
    first, _ = long_prompt()
    providers = {d: load_local_provider(clock=MonotonicClock(), dtype=d) for d in DTYPES}
    m: dict[str, dict[str, list[float]]] = {d: {"prefill": [], "step_long": [], "step_short": [], "run": []}
                                            for d in providers}
    replies = {}
    for d, p in providers.items():
        run(p, STORY, max_output=4, context="warm")
        p.forget()
        replies[d] = list(run(p, STORY, max_output=48, context="agree")[2].output_units)
    work = (0, 0)
    for i in range(repeat):
        for d in DTYPES[i % len(DTYPES):] + DTYPES[:i % len(DTYPES)]:
            p = providers[d]
            p.forget()
            _, _, _, st = run(p, first, max_output=16, context="d")
            m[d]["prefill"].append(st.prefill_seconds)
            m[d]["step_long"].append(st.decode_seconds / max(st.generated - 1, 1) * 1000)
            _, _, _, st = run(p, STORY, max_output=16, context="s")
            m[d]["step_short"].append(st.decode_seconds / max(st.generated - 1, 1) * 1000)
            if i < 2:
                elapsed, *work = research_run(p)
                m[d]["run"].append(elapsed)
    out: dict = {"repeat": repeat, "long_prompt_tokens": len(providers["float32"].counter.prompt_units(first, [])),
                 "short_prompt_tokens": len(providers["float32"].counter.prompt_units(STORY, [])),
                 "research_run": {"prefilled_tokens": work[0], "generated_tokens": work[1]}}
    for d, p in providers.items():
        out[d] = {"load_s": round(p.load_seconds, 2),
                  "prefill_s_median": round(statistics.median(m[d]["prefill"]), 4),
                  "prefill_tokens_per_s": round(out["long_prompt_tokens"] / statistics.median(m[d]["prefill"]), 1),
                  "decode_step_ms_median_long_context": round(statistics.median(m[d]["step_long"]), 2),
                  "decode_step_ms_median_short_context": round(statistics.median(m[d]["step_short"]), 2),
                  "research_run_s_median": round(statistics.median(m[d]["run"]), 2)}

    def speedup(d: str, key: str) -> float:
        return round(statistics.median(f / b for f, b in zip(m["float32"][key], m[d][key])), 2)

    def agreement(d: str) -> str:
        same = common_prefix_len(replies[d], replies["float32"])
        return f"{same}/{len(replies['float32'])}"

    for d, key in (("bfloat16", "bf16_speedup"), ("int8", "int8_speedup")):
        out[key] = {"prefill": speedup(d, "prefill"), "decode_long_context": speedup(d, "step_long"),
                    "decode_short_context": speedup(d, "step_short"), "research_run": speedup(d, "run")}
        out[d]["greedy_reply_prefix_same_as_float32"] = agreement(d)
    return out


def bench_tool_calls(p: LocalProvider) -> dict:
    import jsonschema
    specs = {t.name: t for t in (SEARCH, FETCH)}
    result = {}
    for choice in ("required", "auto"):
        p.tool_choice = choice
        rows, valid, called = [], 0, 0
        for q in QUESTIONS:
            msgs = [Message("system", "You are a research assistant. Search the corpus before you answer."),
                    Message("user", q)]
            text, calls, _, _ = run(p, msgs, [SEARCH, FETCH], max_output=64, context="tools")
            ok = bool(calls)
            for c in calls:
                try:
                    assert c.invalid_arguments is None
                    jsonschema.validate(c.arguments, specs[c.name].parameters)
                except (AssertionError, KeyError, jsonschema.ValidationError):
                    ok = False
            called += bool(calls)
            valid += ok
            rows.append({"question": q, "calls": [c.to_dict() for c in calls], "text": text[:120]})
        result[choice] = {"tries": len(QUESTIONS), "replies_with_calls": called, "valid": valid, "replies": rows}
    p.tool_choice = "auto"
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=48, help="new tokens per overhead run")
    ap.add_argument("--repeat", type=int, default=7, help="repetitions of the overhead/prefix/dtype runs")
    ap.add_argument("--overhead-repeat", type=int, default=11, help="paired runs for the overhead ratio")
    ap.add_argument("--trials", type=int, default=20, help="deadline trials (>= 20)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "local.json"))
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated sections to run, of {', '.join(SECTIONS)} (default: all); the "
                         f"others are kept from the existing report at --out")
    args = ap.parse_args(argv)
    chosen = [x.strip() for x in args.sections.split(",") if x.strip()]
    if not chosen or set(chosen) - set(SECTIONS):
        raise SystemExit(f"--sections: choose from {', '.join(SECTIONS)}, got {args.sections!r}")
    load_before = os.getloadavg()
    started = time.perf_counter()
    provider = load_local_provider(clock=MonotonicClock())
    import torch
    import transformers
    report = {"machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                          "torch": torch.__version__, "transformers": transformers.__version__,
                          "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                          "loadavg_before": [round(v, 2) for v in load_before]},
              "model": {"path": str(provider.model_path), "dtype": provider.dtype,
                        "context_window": provider.context_window, "load_s": round(provider.load_seconds, 2)}}
    marker = provider.model_path / "imprint-model.json"
    if marker.is_file():
        report["model"]["gguf_load_s_at_build"] = json.loads(marker.read_text()).get("load_seconds")
    sections = [("overhead", lambda: bench_overhead(provider, args.tokens, args.overhead_repeat)),
                ("deadline", lambda: bench_deadline(provider, max(args.trials, 20))),
                ("prefix_cache", lambda: bench_prefix(provider, args.repeat)),
                ("tool_calls", lambda: bench_tool_calls(provider)),
                ("dtype", lambda: bench_dtypes(max(args.repeat - 2, 3)))]
    out = Path(args.out)
    if set(chosen) != set(SECTIONS) and out.is_file():
        kept = json.loads(out.read_text())
        report.update({k: kept[k] for k in SECTIONS if k not in chosen and k in kept})
        report["machine_of_kept_sections"] = kept.get("machine_of_kept_sections", kept.get("machine"))
    sections = [(name, fn) for name, fn in sections if name in chosen]
    for name, fn in sections:
        t = time.perf_counter()
        report[name] = fn()
        print(f"{name}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    report["machine"]["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    report["seconds"] = round(time.perf_counter() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, out)
    o, d, px, dt = report["overhead"], report["deadline"], report["prefix_cache"], report["dtype"]
    print(f"overhead ratio {o['ratio']} wall, {o['cpu_ratio']} CPU (target <= {TARGET_RATIO}); "
          f"with grammar {o['with_grammar_ratio']} wall, {o['with_grammar_cpu_ratio']} CPU")
    print(f"deadline overshoot p50 {d['overshoot_ms_p50']} ms, p95 {d['overshoot_ms_p95']} ms "
          f"(decode step {d['decode_step_ms_p50']} ms)")
    print(f"prefix: TTFT {px['ttft_without_reuse_s_median']} s -> {px['ttft_with_reuse_s_median']} s "
          f"on {px['shared_prefix_tokens']} shared tokens")
    print(f"dtype: bf16 against fp32 (x = speedup): {dt['bf16_speedup']}; int8: {dt.get('int8_speedup')}")
    tc = report["tool_calls"]
    print(f"tool calls: required {tc['required']['valid']}/5 valid; auto {tc['auto']['replies_with_calls']}/5 called")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
