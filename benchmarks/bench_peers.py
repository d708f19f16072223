"""Long conversations: our local provider against peer servers (a script, not a test).

A growing research conversation on SmolLM2-135M, run side by side in one
run through our local provider and through the peer servers of
`harness.live.servers` (transformers serve, llama-cpp-python's server),
each where it is set up (`imprint servers setup`); a kind that is not set
up, or whose server does not start, is recorded as skipped with the reason.

Each round appends one tool call and a tool result of ~630 prompt tokens to
the conversation (7.5k tokens by round 12), then asks for `--tokens` output
tokens greedily, with no tools offered. The systems take turns round by
round (round r on every system, then round r+1), so a load that changes
during the run weighs on all of them alike. Recorded per system and round:
wall time, time to first token, the prompt tokens the system reports (for
llama-cpp-python, whose stream carries no usage, the count of its
`/extras/tokenize` on the prompt its chat format renders), output tokens,
and CPU seconds of the process that did the work (ours, or the server's).

The limit: the local model at short-context speed. In the same run, before
and after the conversation, the local provider prefills round 1's prompt
(~650 tokens) from an empty cache and decodes `--tokens` tokens after it;
from the medians, limit = sum over rounds of (tokens prefilled that round /
short prefill rate + output tokens that round x short decode time per
token). Written to reports/bench/peers.json (atomically); `make bench`
puts the ratios into reports/bench/README.md.

    python benchmarks/bench_peers.py [--rounds 12] [--only local-float32,local-int8,transformers,llamacpp]
    python benchmarks/bench_peers.py --profile   # where the local provider's time goes, round 2 against
                                                 # the last: reports/bench/peers-profile.md, no peers.json

Stops the servers it started on any error, Ctrl-C or SIGTERM.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from imprint_core import (CancelToken, Message, ModelRequest, MonotonicClock, TextDelta, ToolCall,  # noqa: E402
                          UsageEvent, atomic_write_text)

# "local": the provider's default dtype ("auto": bfloat16 where the CPU has
# native bf16); "local-<dtype>": that dtype, each loaded beside the others in
# the same run. By default float32 (the exact reference) and int8.
SYSTEMS = ("local", "local-float32", "local-bfloat16", "local-int8", "transformers", "llamacpp")
DEFAULT_SYSTEMS = ("local-float32", "local-int8", "transformers", "llamacpp")
LLAMA_N_CTX = 8192
COMPARABLE = 0.15  # a peer whose last prompt differs from ours by more is not running the same conversation
TARGETS = {"local_vs_limit": 1.3, "local_vs_best_peer": 0.5, "round_last_vs_round_2": 1.5}


def local_dtype(name: str) -> str | None:
    """The dtype a local system runs: None for `local` (the default), else
    what follows `local-`."""
    return name.split("-", 1)[1] if name.startswith("local-") else None


def is_local(name: str) -> bool:
    return name == "local" or name.startswith("local-")


def ratio_key(name: str, key: str) -> str:
    """A local system's ratio key: `local`'s as TARGETS names it, another
    local system's with its name in front (local-int8_vs_limit,
    local-int8_round_last_vs_round_2)."""
    if name == "local":
        return key
    return name + key[len("local"):] if key.startswith("local_") else f"{name}_{key}"
TOPICS = ("harbour", "lighthouse", "salt trade", "archive", "storm", "guild", "canal", "granary", "market", "bridge",
          "mill", "school")
NAMES = ("Ada", "Bram", "Cleo", "Dov", "Esa", "Fenn", "Gil")


# ---- the conversation ----------------------------------------------------------------------
def tool_result(r: int, entries: int = 12) -> str:
    """Round r's search result: ~600 tokens of records, different every round."""
    topic = TOPICS[r % len(TOPICS)]
    return " ".join(f"Record {r}.{i}: the {topic} ledger of year {1701 + 13 * r + i} lists {3 + (r * 7 + i * 5) % 41} "
                    f"entries, notes that the keeper named {NAMES[(r + i) % len(NAMES)]} moved {r * 11 + i * 3} "
                    f"crates, and that repairs cost {(r + 1) * (i + 2) * 17} silver coins." for i in range(entries))


def conversation(rounds: int) -> list[list[Message]]:
    """The prompt of every round: each one the previous plus a call and its result."""
    messages = [Message("system", "You are a research assistant. Answer from the tool results."),
                Message("user", "Research the history of the town of Tessaly and summarize what the records say.")]
    prompts = []
    for r in range(rounds):
        call = ToolCall(f"call_{r + 1}", "search", {"query": f"Tessaly {TOPICS[r % len(TOPICS)]} records"})
        messages = messages + [Message("assistant", "", tool_calls=(call,)),
                               Message("tool", tool_result(r), tool_call_id=call.id, name="search")]
        prompts.append(messages)
    return prompts


# ---- measuring one request -------------------------------------------------------------------
def proc_cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU seconds of a process and its waited-for children
    (Linux /proc); our own process when pid is None."""
    if pid is None:
        return time.process_time()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@dataclass
class System:
    name: str
    provider: Any
    pid: int | None = None                 # the server process; None: this process
    count_prompt: Callable[[list[Message]], int] | None = None  # where the stream reports no usage
    count_text: Callable[[str], int] | None = None
    adapt: Callable[[list[Message]], list[Message]] | None = None  # the conversation as this system must get it
    rounds: list[dict] = field(default_factory=list)
    error: str | None = None


def request(provider: Any, messages: list[Message], tokens: int) -> ModelRequest:
    return ModelRequest(list(messages), [], tokens, provider.clock.now() + 3600, CancelToken(), context_id="peers")


def one_round(system: System, messages: list[Message], tokens: int) -> dict:
    if system.adapt is not None:
        messages = system.adapt(messages)
    cpu0 = proc_cpu_seconds(system.pid)
    started = time.perf_counter()
    first, usage, parts = None, None, []
    for event in system.provider.generate(request(system.provider, messages, tokens)):
        if isinstance(event, UsageEvent):
            usage = event.usage
        elif isinstance(event, TextDelta) and event.text:
            parts.append(event.text)
        if first is None and (isinstance(event, TextDelta) and event.text or
                              isinstance(event, UsageEvent) and event.usage.output_tokens):
            first = time.perf_counter() - started
    wall = time.perf_counter() - started
    cpu1 = proc_cpu_seconds(system.pid)
    row = {"wall_s": round(wall, 4), "ttft_s": round(first, 4) if first is not None else None,
           "cpu_s": round(cpu1 - cpu0, 3) if cpu0 is not None and cpu1 is not None else None,
           "prompt_tokens": usage.prompt_tokens if usage else None,
           "cached_tokens": usage.cached_tokens if usage else None,
           "output_tokens": usage.output_tokens if usage else None, "text": "".join(parts)[:80]}
    if row["prompt_tokens"] is None and system.count_prompt is not None:
        row["prompt_tokens"] = system.count_prompt(messages)
        row["prompt_tokens_source"] = "server tokenize endpoint (the stream reports no usage)"
    if row["output_tokens"] is None and system.count_text is not None:
        row["output_tokens"] = system.count_text("".join(parts))
    if is_local(system.name):
        st = system.provider.stats[-1]
        row.update(fed_tokens=st.fed, prefill_s=round(st.prefill_seconds, 4), decode_s=round(st.decode_seconds, 4))
    return row


# ---- the limit: short-context rates of the local model ---------------------------------------------
def short_rates(provider: Any, messages: list[Message], tokens: int, repeat: int) -> list[dict]:
    """Prefill `messages` from an empty cache, decode `tokens` after it: `repeat` samples."""
    samples = []
    for _ in range(repeat):
        provider.forget("short")
        req = ModelRequest(list(messages), [], tokens, provider.clock.now() + 3600, CancelToken(),
                           context_id="short")
        for _event in provider.generate(req):
            pass
        st = provider.stats[-1]
        samples.append({"prefill_tokens": st.fed, "prefill_s": round(st.prefill_seconds, 4),
                        "decode_steps": max(st.generated - 1, 1), "decode_s": round(st.decode_seconds, 4)})
        provider.forget("short")
    return samples


def limit_of(samples: list[dict], local_rounds: list[dict], tokens: int) -> dict:
    prefill_rate = statistics.median(s["prefill_tokens"] / s["prefill_s"] for s in samples)
    decode_step = statistics.median(s["decode_s"] / s["decode_steps"] for s in samples)
    per_round = [r["fed_tokens"] / prefill_rate + (r["output_tokens"] or tokens) * decode_step
                 for r in local_rounds]
    return {"prefill_tokens_per_s": round(prefill_rate, 1), "decode_s_per_token": round(decode_step, 5),
            "samples": samples, "per_round_s": [round(v, 3) for v in per_round], "total_s": round(sum(per_round), 3),
            "rule": "sum over rounds of (tokens the local provider prefilled / short-context prefill rate + output "
                    "tokens x short-context decode time per token)"}


# ---- the systems --------------------------------------------------------------------------
def start_peer(kind: str, stack: contextlib.ExitStack, progress: Callable[[str], None]) -> System | dict:
    """The peer's server started inside `stack` (stopped when it closes), or
    {"skipped": why} when it is not set up or does not start."""
    from harness.live import servers
    from imprint_core.providers.remote import RemoteProvider
    try:
        if not servers.is_set_up(kind):
            return {"skipped": f"not set up in {servers.venv_dir()}; run: imprint servers setup {kind}"}
        # llama.cpp's n_ctx: the model's whole window (the recordings' 4,096 is too short for 12 rounds).
        running = stack.enter_context(servers.server(kind, progress=progress, n_ctx=LLAMA_N_CTX))
    except Exception as exc:  # ServerError, a missing model folder: recorded, the others still run
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    provider = RemoteProvider(running.base_url, running.model, clock=MonotonicClock(), stream=True,
                              temperature=0.0, context_window=8192, request_timeout=600.0, name=f"remote:{kind}")
    stack.callback(provider.close)
    system = System(kind, provider, pid=running.process.pid if running.process else None)
    system.ready_s = running.ready_seconds  # type: ignore[attr-defined]
    if kind == "llamacpp":
        from imprint_core.providers import remote_tokens as rt
        counter = rt.LlamaCppTokenize(provider.client, running.base_url, running.model,
                                      rt.chatml_function_calling(None))
        system.count_prompt = lambda messages: len(counter.prompt_units(messages, []))
        system.count_text = lambda text: len(counter._tokenize(text)) if text else 0
        system.adapt = tool_results_as_user_turns
    return system


def tool_results_as_user_turns(messages: list[Message]) -> list[Message]:
    """For llama-cpp-python's server: its chat format (chatml-function-calling)
    leaves tool messages out of the prompt, so that the results would never
    reach the model; sent as user turns, the same text is prefilled."""
    return [Message("user", m.content) if m.role == "tool" else m for m in messages]


def summarize(system: System) -> dict:
    out: dict[str, Any] = {"status": "error" if system.error else "ran", "rounds": system.rounds}
    if system.error:
        out["error"] = system.error
    walls = [r["wall_s"] for r in system.rounds]
    if walls:
        out["total_s"] = round(sum(walls), 3)
        cpus = [r["cpu_s"] for r in system.rounds]
        out["cpu_total_s"] = round(sum(cpus), 3) if None not in cpus else None
        out["ttft_total_s"] = round(sum(r["ttft_s"] or 0 for r in system.rounds), 3)
        out["prompt_tokens_last_round"] = system.rounds[-1]["prompt_tokens"]
    if hasattr(system, "ready_s"):
        out["server_ready_s"] = round(system.ready_s, 2)  # type: ignore[attr-defined]
    return out


def ratios(report: dict) -> dict:
    """Every local system against the peers, its own limit and its round 2;
    another local system's keys carry its name (`ratio_key`), and `met`
    judges each against TARGETS. Every other local system is compared with
    float32 too (local-int8_vs_local-float32; with `local` where float32 did
    not run)."""
    systems, rounds = report["systems"], report["rounds"]
    out: dict[str, Any] = {"targets": TARGETS}
    complete = {k: v for k, v in systems.items() if v.get("status") == "ran" and len(v["rounds"]) == rounds}
    peers = {k: v for k, v in complete.items() if not is_local(k)}
    met: dict[str, bool] = {}
    for name, local in complete.items():
        if not is_local(name):
            continue
        key = lambda k: ratio_key(name, k)  # noqa: E731
        total, ours = local["total_s"], local["prompt_tokens_last_round"]
        comparable = {}
        for kind, peer in peers.items():
            theirs = peer.get("prompt_tokens_last_round")
            if not theirs or abs(theirs - ours) > COMPARABLE * ours:
                out[f"{kind}_not_comparable"] = f"its last prompt was {theirs} tokens against our {ours}"
                continue
            comparable[kind] = peer
            out[key(f"local_vs_{kind}")] = round(total / peer["total_s"], 3)
            if local.get("cpu_total_s") and peer.get("cpu_total_s"):
                out[key(f"local_vs_{kind}_cpu")] = round(local["cpu_total_s"] / peer["cpu_total_s"], 3)
        if comparable:
            best = min(comparable, key=lambda k: comparable[k]["total_s"])
            out["best_peer"] = best
            out[key("local_vs_best_peer")] = round(total / comparable[best]["total_s"], 3)
        limit = report.get("limits", {}).get(name)
        if limit:
            out[key("local_vs_limit")] = round(total / limit["total_s"], 3)
        reference = "local-float32" if "local-float32" in complete else "local"
        if name != reference and reference in complete:
            out[f"{name}_vs_{reference}"] = round(total / complete[reference]["total_s"], 3)
        if rounds >= 2:
            walls = [r["wall_s"] for r in local["rounds"]]
            out[key("round_last_vs_round_2")] = round(walls[-1] / walls[1], 3)
            cpus = [r["cpu_s"] for r in local["rounds"]]
            if None not in cpus:
                out[key("round_last_vs_round_2_cpu")] = round(cpus[-1] / cpus[1], 3)
        met.update({key(k): out[key(k)] <= v for k, v in TARGETS.items() if key(k) in out})
    out["met"] = met
    return out


def run(args: argparse.Namespace, progress: Callable[[str], None]) -> dict:
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"--only: unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    prompts = conversation(args.rounds)
    import torch
    import transformers
    report: dict[str, Any] = {
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                    "torch": torch.__version__, "transformers": transformers.__version__,
                    "loadavg_before": [round(v, 2) for v in os.getloadavg()]},
        "rounds": args.rounds, "output_tokens": args.tokens, "systems": {}}
    with contextlib.ExitStack() as stack:
        systems: list[System] = []
        locals_: list[System] = []
        for name in only:
            if is_local(name):
                from harness.live.model_folder import load_local_provider
                dtype = local_dtype(name)
                local = load_local_provider(clock=MonotonicClock(), **({"dtype": dtype} if dtype else {}))
                report.setdefault("locals", {})[name] = {"dtype": local.dtype, "load_s": round(local.load_seconds, 2),
                                                         "torch_threads": torch.get_num_threads()}
                locals_.append(System(name, local))
                progress(f"{name}: loaded ({local.dtype}) in {local.load_seconds:.1f} s")
        if "local" in report.get("locals", {}):
            report["local"] = report["locals"]["local"]
        systems += locals_
        for kind in only:
            if not is_local(kind):
                got = start_peer(kind, stack, progress)
                if isinstance(got, dict):
                    report["systems"][kind] = got
                    progress(f"{kind}: skipped: {got['skipped'].splitlines()[0]}")
                else:
                    systems.append(got)
        for system in systems:  # warm-up: first-request costs (allocations, lazy imports) stay out of round 1
            with contextlib.suppress(Exception):
                one_round(system, [Message("user", "Hello.")], 4)
            if system in locals_:
                system.provider.forget()
        samples: dict[str, list[dict]] = {s.name: short_rates(s.provider, prompts[0], args.tokens, args.rate_repeat)
                                          for s in locals_}
        for r, messages in enumerate(prompts, 1):
            for system in systems:
                if system.error:
                    continue
                try:
                    row = one_round(system, messages, args.tokens)
                except Exception as exc:  # a failing system is recorded; the others go on
                    system.error = f"round {r}: {type(exc).__name__}: {exc}"
                    progress(f"{system.name}: {system.error}")
                    continue
                system.rounds.append(dict(round=r, **row))
                progress(f"round {r:2d} {system.name:12s} {row['wall_s']:7.2f} s  ttft {row['ttft_s'] or 0:6.2f} s  "
                         f"prompt {row['prompt_tokens']} tokens  output {row['output_tokens']}")
        for s in locals_:
            samples[s.name] += short_rates(s.provider, prompts[0], args.tokens, args.rate_repeat)
            if not s.error:
                report.setdefault("limits", {})[s.name] = limit_of(samples[s.name], s.rounds, args.tokens)
        if "local" in report.get("limits", {}):
            report["limit"] = report["limits"]["local"]
        for system in systems:
            report["systems"][system.name] = summarize(system)
    report["ratios"] = ratios(report)
    report["machine"]["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    return report


# ---- --profile: where the local provider's time goes ------------------------------------------
CATEGORIES = (("attention kernel", ("scaled_dot_product", "flash_attention")),  # matched anywhere in an op's name
              ("matrix multiplies (linear layers, lm_head)", ("aten::mm", "aten::addmm", "aten::bmm")),
              ("KV cache writes and copies", ("aten::copy_", "aten::cat", "aten::index_copy", "aten::clone")),
              ("masks", ("aten::where", "aten::masked_fill", "aten::logical_not", "aten::__and__", "aten::__or__",
                         "aten::le", "aten::ge", "aten::gt", "aten::lt", "aten::arange")),
              ("element-wise (norms, rotary, activations)", ("aten::mul", "aten::add", "aten::pow", "aten::mean",
                                                             "aten::rsqrt", "aten::neg", "aten::silu", "aten::sum",
                                                             "aten::div", "aten::sub", "aten::exp", "aten::softmax",
                                                             "aten::argmax", "aten::embedding")))


def categorize(prof: Any) -> dict[str, float]:
    """Self CPU seconds by category (the first that names a part of the op's
    name); what no category claims is 'other ops'."""
    out = {name: 0.0 for name, _ in CATEGORIES}
    out["other ops"] = 0.0
    for e in prof.key_averages():
        seconds = e.self_cpu_time_total / 1e6
        for name, prefixes in CATEGORIES:
            if any(p in e.key for p in prefixes):
                out[name] += seconds
                break
        else:
            out["other ops"] += seconds
    return out


def profile(args: argparse.Namespace, progress: Callable[[str], None]) -> str:
    """The conversation on the local provider alone, with torch.profiler on
    round 2 and the last round: a Markdown summary."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile
    from harness.live.model_folder import load_local_provider
    local = load_local_provider(clock=MonotonicClock(), **({"dtype": args.dtype} if args.dtype else {}))
    system = System("local", local)
    one_round(system, [Message("user", "Hello.")], 4)
    local.forget()
    args.rounds = max(args.rounds, 2)
    prompts, rows = conversation(args.rounds), {}
    for r, messages in enumerate(prompts, 1):
        if r in (2, args.rounds):
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                row = one_round(system, messages, args.tokens)
            ops = categorize(prof)
            ops["Python and framework (wall time not inside any op)"] = max(row["wall_s"] - sum(ops.values()), 0.0)
            rows[r] = (row, ops)
        else:
            row = one_round(system, messages, args.tokens)
        progress(f"profile: round {r} {row['wall_s']:.2f} s (prompt {row['prompt_tokens']})")
    (r2, ops2), (rn, opsn) = rows[2], rows[args.rounds]
    lines = [f"# Where the local provider's time goes: round 2 against round {args.rounds}", "",
             f"`python benchmarks/bench_peers.py --profile` ({args.rounds}-round conversation of bench_peers.py, "
             f"{args.tokens} output tokens a round; local provider, {local.dtype}, "
             f"{torch.get_num_threads()} torch threads; torch.profiler self CPU time by operator category, "
             f"summed over threads, so a category can exceed the wall time). The profiler slows rounds down; the "
             f"ratios between categories are the point.", "",
             f"| | round 2 | round {args.rounds} |", "| --- | --- | --- |"]
    for label, key, fmt in (("prompt tokens (context)", "prompt_tokens", "{}"), ("tokens prefilled", "fed_tokens", "{}"),
                            ("output tokens", "output_tokens", "{}"), ("wall time", "wall_s", "{:.2f} s"),
                            ("prefill", "prefill_s", "{:.2f} s"), ("decode", "decode_s", "{:.2f} s")):
        lines.append(f"| {label} | {fmt.format(r2[key])} | {fmt.format(rn[key])} |")
    lines.append(f"| decode per token | {r2['decode_s'] / max(r2['output_tokens'] - 1, 1) * 1000:.0f} ms | "
                 f"{rn['decode_s'] / max(rn['output_tokens'] - 1, 1) * 1000:.0f} ms |")
    for name in ops2:
        lines.append(f"| {name} | {ops2[name]:.2f} s | {opsn[name]:.2f} s |")
    lines += ["", "## Arithmetic per token, from the model's shape", "", *arithmetic(local, r2, rn)]
    return "\n".join(lines) + "\n"


def weight_bytes(model: Any) -> int:
    """Bytes of weights a decoded token reads: every layer's (int8 ones at a
    byte a weight), lm_head included, the embedding not (one row of it)."""
    import torch
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear
    total = 0
    for m in model.modules():
        if isinstance(m, Int8Linear):
            total += m.weight().numel()
        elif not isinstance(m, torch.nn.Embedding) and not list(m.children()):
            total += sum(p.numel() * p.element_size() for p in m.parameters(recurse=False))
    return total


def arithmetic(local: Any, r2: dict, rn: dict) -> list[str]:
    """What exact attention must compute and read at a context, against the
    linear layers: why no kernel brings a long context to short-context speed."""
    cfg = local.model.config
    layers, heads, kv_heads = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    params = sum(p.numel() for p in local.model.model.layers.parameters())
    linear = 2 * params  # multiply-adds of the decoder layers, per token
    width = 2 if local.dtype == "bfloat16" else 4  # of the KV cache; int8 keeps it in float32

    def attention(context: int) -> int:  # QK^T and PV for one query over `context` positions, all layers
        return 4 * layers * heads * head_dim * context

    def kv_bytes(context: int) -> int:
        return 2 * layers * kv_heads * head_dim * context * width

    lines = [f"Decoder layers: {params / 1e6:.0f}M parameters, {linear / 1e6:.0f} MFLOP per token; attention adds "
             f"{attention(1) / 1e3:.0f} kFLOP per token per position of context; the KV cache holds "
             f"{kv_bytes(1) / 1e3:.1f} kB per position ({local.dtype}).", "",
             "| | round 2 | last round |", "| --- | --- | --- |"]
    for label, fn in (("mean context of a prefilled token (positions)",
                       lambda r: f"{r['prompt_tokens'] - r['fed_tokens'] / 2:.0f}"),
                      ("attention / linear arithmetic, prefill",
                       lambda r: f"{attention(int(r['prompt_tokens'] - r['fed_tokens'] / 2)) / linear:.2f}×"),
                      ("KV cache read per decoded token",
                       lambda r: f"{kv_bytes(r['prompt_tokens']) / 1e6:.0f} MB"),
                      ("weights read per decoded token",
                       lambda r: f"{weight_bytes(local.model) / 1e6:.0f} MB")):
        lines.append(f"| {label} | {fn(r2)} | {fn(rn)} |")
    lines += ["", "A prefilled token costs the linear layers' arithmetic plus attention over everything before it; "
              "a decoded token reads the weights plus the whole KV cache. Both grow with the context whatever the "
              "kernel, so the machine's limit (every round at short-context rates) is a bound that exact attention "
              "cannot reach at this context; the part of the growth that was overhead (cache copies, per-layer mask "
              "conversion, repeated key/value heads) is what the provider removed."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=12, help="conversation rounds (default 12)")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens asked for each round (default 32)")
    ap.add_argument("--only", default=",".join(DEFAULT_SYSTEMS),
                    help=f"comma-separated systems to run, of {', '.join(SYSTEMS)} (default: {','.join(DEFAULT_SYSTEMS)})")
    ap.add_argument("--rate-repeat", type=int, default=3,
                    help="short-context samples before and after the conversation (default 3 each)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "peers.json"))
    ap.add_argument("--profile", nargs="?", const=str(ROOT / "reports" / "bench" / "peers-profile.md"),
                    metavar="PATH", help="profile the local provider instead (default reports/bench/peers-profile.md)")
    ap.add_argument("--dtype", default=None, help="with --profile: the local provider's dtype (default: its default)")
    args = ap.parse_args(argv)
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {line}", file=sys.stderr, flush=True)

    if args.profile:
        text = profile(args, progress)
        atomic_write_text(Path(args.profile), text)
        print(text + f"wrote {args.profile}")
        return 0

    report = run(args, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(report, indent=2) + "\n")
    for name, s in report["systems"].items():
        print(f"{name}: " + (f"{s['total_s']} s total" if "total_s" in s else s.get("skipped") or s.get("error")))
    for name, limit in report.get("limits", {}).items():
        print(f"limit of {name}: {limit['total_s']} s")
    print("ratios: " + json.dumps({k: v for k, v in report["ratios"].items() if k not in ("targets", "met")}))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
