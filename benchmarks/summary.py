"""reports/bench/README.md: every benchmark figure beside its target, read
from the JSON files the benchmark scripts wrote."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "reports" / "bench"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_peers names the local systems' ratios

from imprint_core.files import atomic_write_text  # noqa: E402


def _load(name: str) -> dict | None:
    p = BENCH / name
    return json.loads(p.read_text()) if p.exists() else None


def rows() -> list[tuple[str, str, str, str]]:
    out = []
    nov, loop, local, tune = _load("novelty.json"), _load("loop.json"), _load("local.json"), _load("tune.json")
    peers = _load("peers.json")
    if nov:
        mbs = nov["mb_per_s"]
        out.append(("novelty tracker throughput (default normalization, CPU time)", f"{mbs['tracker_default']} MB/s",
                    "≥ 25 MB/s", "met" if mbs["tracker_default"] >= 25 else "missed"))
        ratio = mbs["tracker_default"] / mbs["datasketch_minhash128"]
        out.append(("… against datasketch MinHash(128) on the same input", f"{ratio:.1f}×", "≥ 10×",
                    "met" if ratio >= 10 else "missed"))
        if "rensa_rminhash128" in mbs:
            vs = mbs["tracker_default"] / mbs["rensa_rminhash128"]
            out.append(("… against rensa RMinHash(128), a Rust MinHash, on the same input",
                        f"{vs:.2f}× (rensa {mbs['rensa_rminhash128']} MB/s)", "≥ 0.5×", "met" if vs >= 0.5 else "missed"))
        if "tracker_default_pure" in mbs:
            out.append(("… the compiled novelty path against the pure-Python one (IMPRINT_NOVELTY_PURE=1), same run",
                        f"{mbs['tracker_default'] / mbs['tracker_default_pure']:.2f}× "
                        f"(pure {mbs['tracker_default_pure']} MB/s)", "(measured)", "-"))
        elif "compiled_path" in nov:
            out.append(("… the compiled novelty path", "not built: every figure above is the pure path", "(measured)",
                        "-"))
        out.append(("… against xxh3_64 / blake2b of the same bytes",
                    f"{mbs['tracker_default'] / mbs['xxh3_64_bytes']:.5f}× / "
                    f"{mbs['tracker_default'] / mbs['blake2b_bytes']:.4f}×", "(reference)", "-"))
        prof = nov.get("profile")
        if prof:
            top = ", ".join(f"{k.split(' (')[0]} {v:.0%}" for k, v in sorted(prof["stage_share"].items(),
                                                                             key=lambda kv: -kv[1])[:4])
            out.append(("… where the tracker's time goes (cProfile, stages' shares, nested)", top,
                        "(what remains)", "-"))
        mem = nov.get("memory") or {}
        if mem:
            out.append(("tracker memory after 1,000 → 10,000 rounds (tracemalloc)",
                        f"{mem['at_1000_bytes'] / 2**20:.1f} → {mem['at_10000_bytes'] / 2**20:.1f} MiB "
                        f"(peak {mem['peak_traced_bytes'] / 2**20:.1f})", "bounded",
                        "met" if mem.get("bounded") else "missed"))
    if loop:
        lo = loop["loop_overhead"]
        out.append((f"loop overhead per round ({lo['evidence_bytes_per_round'] // 1000} KB evidence a round, "
                    f"zero-latency stub), against a bare loop" + (", CPU time" if lo.get("timer") else ""),
                    f"{lo['overhead_ms_per_round']} ms ({lo['ratio_ours_to_bare']}× bare)", "≤ 1 ms",
                    "met" if lo["met"] else "missed"))
        if lo.get("pure_path"):
            pp = lo["pure_path"]
            out.append(("… with novelty on the pure-Python path instead (IMPRINT_NOVELTY_PURE=1), same run",
                        f"{pp['overhead_ms_per_round']} ms (novelty {pp['novelty_ms_per_round']} ms; compiled "
                        f"{pp['ratio_compiled_to_pure_overhead']}× of it)", "(measured)", "-"))
        if "novelty_ms_per_round" in lo:
            out.append(("… of which the novelty tracker (its calls replayed alone) / the rest of the loop",
                        f"{lo['novelty_ms_per_round']} ms / {lo['non_novelty_ms_per_round']} ms "
                        f"({lo['novelty_share']:.0%} novelty)", "(what limits it)", "-"))
            g = lo["growth"]
            first_last = " / ".join(f"{g[k]['first_ms_per_round']} → {g[k]['last_ms_per_round']} ms"
                                    for k in ("novelty", "non_novelty"))
            out.append((f"… first {g['rounds_compared']} rounds → last {g['rounds_compared']}: novelty / the rest",
                        first_last, "flat", "-"))
        lib = loop["scenario_library"]
        out.append((f"scenario library on the virtual clock ({lib['scenarios']} stub scenarios)", f"{lib['wall_s']} s",
                    "≤ 10 s", "met" if lib["met"] else "missed"))
        sw = loop["tuning_sweep"]
        out.append((f"tuning sweep: {sw['rounds']:,} rounds × {sw['patience_values']} patience × "
                    f"{sw['normalizations']} normalizations", f"{sw['sweep_total_s']} s "
                    f"({sw['ratio_sweep_to_judging']}× judging once)", "≤ 30 s", "met" if sw["met"] else "missed"))
    if tune:
        out.append((f"`imprint tune` default sweep: {tune['settings']} settings × {tune['labelled_runs']} labelled runs "
                    f"of {', '.join(tune['corpora'])}, 1 process against {tune['all_cores_jobs']}",
                    f"{tune['one_process_s']} s → {tune['all_cores_s']} s ({tune['speedup']}×; CPU "
                    f"{tune.get('cpu_s', {}).get('one_process', '?')} s / {tune.get('cpu_s', {}).get('all_cores', '?')} s; "
                    f"load average {tune.get('load_average_at_start', {}).get('all_cores', '?')} on "
                    f"{tune['machine']['cores']} cores; loading {tune['load_s']} s apart)", "(measured)",
                    "-" if tune["identical"] else "results differ"))
    if tune and tune.get("shared_work"):
        sh = tune["shared_work"]
        out.append(("cold default sweep, 1 process: configs sharing normalization and shingles, against each "
                    "config alone (share=False), CPU time", f"{sh['unshared_cpu_s']} s → {sh['shared_cpu_s']} s "
                    f"({sh['speedup_cpu']}×; load average {sh['load_average_at_start']['shared']})",
                    "(measured; share=False has today's echoes and compiled path too)", "-"))
    base = _load("sweep_baseline.json")
    if base:
        out.append((f"cold default sweep, 1 process, {base['runs']} labelled runs: commit {base['baseline_commit']} (before "
                    "this work) against today's code, interleaved in one run, CPU time",
                    f"{base['baseline_cpu_s']} s → {base['main_cpu_s']} s ({base['speedup_cpu']}×)", "≥ 5×",
                    "met" if base["speedup_cpu"] >= 5 else "missed"))
    scale = _load("scale.json")
    if scale and scale.get("targets", {}).get("cpu_per_run"):
        cpu, mem = scale["targets"]["cpu_per_run"], scale["targets"].get("peak_memory")
        lo, hi = cpu["sizes"]
        out.append((f"`imprint tune` over synthetic corpora, 1 process, cold: CPU per run at {hi:,} against {lo:,} runs",
                    f"{cpu['ratio']}×", "≤ 1.2× (at 100,000 against 1,000)",
                    ("met" if cpu["met"] else "missed") if hi >= 100_000 else f"not measured at 100,000 (up to {hi:,})"))
        if mem:
            below, top = mem["sizes"]
            out.append((f"… peak memory at {below:,} → {top:,} runs", f"{mem['mib'][0]} MiB → {mem['mib'][1]} MiB "
                        f"({mem['ratio']}×)", "≤ 2× from 10,000 to 100,000",
                        ("met" if mem["met"] else "missed") if top >= 100_000 else "not measured at 100,000"))
    elif scale and scale.get("memory_check"):
        mc = scale["memory_check"]
        rss = mc["peak_rss_mib_cold_1_process"]
        out.append(("`imprint tune` over synthetic corpora, 1 process, cold: CPU per run at 10,000 against 1,000 runs",
                    f"{mc['cpu_ms_per_run_ratio_10000_to_1000']}×", "≤ 1.2× (at 100,000 against 1,000)",
                    "not measured at 100,000"))
        out.append(("… peak memory at " + " / ".join(f"{int(k):,}" for k in rss) + " runs",
                    " / ".join(f"{v} MiB" for v in rss.values()) + f" ({mc['ratio_10000_to_1000']}× for 10× the runs)",
                    "≤ 2× from 10,000 to 100,000", "not measured at 100,000"))
    sm = (scale or {}).get("sweep_memory")
    if sm:
        (lo, hi), rows = sm["sizes"], {r["size"]: r for r in sm["results"]}
        out.append((f"… the same with the novelty judgement stubbed (`bench_sweep_memory.py`, commit {sm['commit']}): "
                    f"peak memory at {lo:,} → {hi:,} runs", f"{rows[lo]['peak_rss_mib']} MiB → "
                    f"{rows[hi]['peak_rss_mib']} MiB ({sm['ratio']}×)", "≤ 2× from 10,000 to 100,000",
                    "met" if sm["met"] else "missed"))
    cmp_ = (scale or {}).get("compare")
    if cmp_:
        c, p = cmp_["compiled"], cmp_["pure"]
        out.append((f"`imprint compare` of every built-in ({c['rules']} rules) over every labelled run ({c['runs']:,}), "
                    "1 process, CPU per run and rule (loading included), against the pure path in the same run"
                    + (f", the least of {cmp_['repeat']} runs a path, in turn" if cmp_.get("repeat", 1) > 1 else ""),
                    f"{c['cpu_ms_per_run_and_rule']} ms (pure {p['cpu_ms_per_run_and_rule']} ms; {c['cpu_s']} s "
                    f"against {p['cpu_s']} s)", f"≤ {cmp_['target_ms']:g} ms", "met" if cmp_["met"] else "missed"))
    dask = (scale or {}).get("targets", {}).get("dask_2_workers")
    if dask:
        one, two = dask["wall_s"]
        out.append((f"… a Dask LocalCluster of 2 workers against 1, {dask['size']:,} runs, cold, wall time",
                    f"{one} s → {two} s ({dask['ratio']}×)", "≥ 1.7× at 100,000",
                    ("met" if dask["met"] else "missed") if dask["size"] >= 100_000
                    else f"not measured at 100,000 (up to {dask['size']:,})"))
    if local:
        ov, dl, pc = local["overhead"], local["deadline"], local["prefix_cache"]
        out.append(("local provider against bare model.generate (same prompt and tokens)", f"{ov['ratio']}×",
                    "≤ 1.05×", "met" if ov["ratio"] <= 1.05 else "missed"))
        out.append((f"deadline overshoot while decoding ({dl['trials']} trials)",
                    f"p50 {dl['overshoot_ms_p50']} ms, p95 {dl['overshoot_ms_p95']} ms "
                    f"(decode step {dl['decode_step_ms_p50']} ms)", "within one decode step",
                    "met" if dl["within_one_step_fraction"] == 1.0 else "missed"))
        out.append((f"time to first token on a {pc['shared_prefix_tokens']:,}-token shared prefix",
                    f"{pc['ttft_without_reuse_s_median']} s → {pc['ttft_with_reuse_s_median']} s with reuse "
                    f"({pc['speedup']}×)", "(measured)", "-"))
        out += dtype_rows(local.get("dtype") or {})
    if peers:
        out += peer_rows(peers)
    rules = _load("rules.json")
    if rules:
        sw, pr = rules["sweep"], rules["per_round"]
        out.append((f"imprint compare: {len(sw['rules'])} rules × {sw['runs']} labelled runs (CPU)",
                    f"{sw['compare']['cpu_s']} s", f"tune's default sweep: {sw['tune_default_sweep']['cpu_s']} s",
                    f"{sw['compare_over_tune_cpu']}×"))
        ratio = pr["over_record"]["repeat-aware"]
        out.append(("candidate rule (repeat-aware) per round, against the record's rule",
                    f"{ratio}× ({pr['ms_per_round']['repeat-aware']} ms)", "≤ 2×", "met" if ratio <= 2 else "missed"))
    return out


def dtype_rows(dt: dict) -> list[tuple[str, str, str, str]]:
    """bench_local.py's dtype section: each dtype against float32, paired in one run."""
    out = []
    for d, key in (("bfloat16", "bf16_speedup"), ("int8", "int8_speedup")):
        if key not in dt:
            continue
        sp, ref, got = dt[key], dt["float32"], dt[d]
        out.append((f"local provider, {d} against float32: decode step at a {dt['short_prompt_tokens']}-token / "
                    f"{dt['long_prompt_tokens']:,}-token context",
                    f"{got['decode_step_ms_median_short_context']} / {got['decode_step_ms_median_long_context']} ms "
                    f"against {ref['decode_step_ms_median_short_context']} / "
                    f"{ref['decode_step_ms_median_long_context']} ms ({sp['decode_short_context']}× / "
                    f"{sp['decode_long_context']}× as fast)", "(measured)", "-"))
        out.append((f"… {d}: prefill of {dt['long_prompt_tokens']:,} tokens, a research run, a greedy reply's "
                    f"tokens before the first that differs from float32's", f"{sp['prefill']}× / {sp['research_run']}× as fast; "
                    f"{got.get('greedy_reply_prefix_same_as_float32', '?')}", "(measured)", "-"))
    return out


def peer_rows(peers: dict) -> list[tuple[str, str, str, str]]:
    """bench_peers.py: the long conversation, each local system (a dtype of
    our provider) against each peer, its own limit and its round 2."""
    from bench_peers import is_local, ratio_key
    out = []
    n, systems, ratios = peers["rounds"], peers["systems"], peers.get("ratios", {})
    targets, met = ratios.get("targets", {}), ratios.get("met", {})
    limits = peers.get("limits") or ({"local": peers["limit"]} if "limit" in peers else {})

    def verdict(key: str) -> str:
        return "-" if key not in met else ("met" if met[key] else "missed")

    for name, s in systems.items():
        if "total_s" in s:
            walls = [r["wall_s"] for r in s["rounds"]]
            out.append((f"{n}-round conversation, {name}: total (round 1 → round {n}; prompt tokens reported "
                        f"in round {n}; CPU time)", f"{s['total_s']:.1f} s ({walls[0]:.1f} s → {walls[-1]:.1f} s; "
                        f"{s.get('prompt_tokens_last_round')}; CPU {s.get('cpu_total_s')} s)", "(measured)",
                        "-" if s["status"] == "ran" else "error"))
        else:
            out.append((f"{n}-round conversation, {name}", f"skipped: {(s.get('skipped') or '').splitlines()[0]}",
                        "(measured)", "-"))
    if "loadavg_before" in peers.get("machine", {}):
        m = peers["machine"]
        out.append(("… load average before and after the run (2 shared cores)",
                    f"{m['loadavg_before'][0]} → {m.get('loadavg_after', ['?'])[0]}", "(measured)", "-"))
    for local in [k for k in systems if is_local(k)]:
        key = lambda k: ratio_key(local, k)  # noqa: E731
        if local in limits:
            lim = limits[local]
            out.append((f"… the limit of {local}: short-context prefill {lim['prefill_tokens_per_s']} tokens/s, "
                        f"decode {lim['decode_s_per_token'] * 1000:.0f} ms/token", f"{lim['total_s']} s",
                        "(measured)", "-"))
        if key("local_vs_limit") in ratios:
            out.append((f"… {local} against its limit", f"{ratios[key('local_vs_limit')]}×",
                        f"≤ {targets.get('local_vs_limit')}×", verdict(key("local_vs_limit"))))
        for other in [k for k in systems if is_local(k) and f"{local}_vs_{k}" in ratios]:
            out.append((f"… {local} against {other}", f"{ratios[f'{local}_vs_{other}']}×", "(measured)", "-"))
        for name in systems:
            k = key(f"local_vs_{name}")
            if k in ratios and not is_local(name):
                cpu = ratios.get(key(f"local_vs_{name}_cpu"))
                out.append((f"… {local} against {name}", f"{ratios[k]}×"
                            + (f" (CPU time {cpu}×)" if cpu is not None else ""), "(measured)", "-"))
        if key("local_vs_best_peer") in ratios:
            out.append((f"… {local} against the best peer ({ratios['best_peer']})",
                        f"{ratios[key('local_vs_best_peer')]}×", f"≤ {targets.get('local_vs_best_peer')}×",
                        verdict(key("local_vs_best_peer"))))
        if key("round_last_vs_round_2") in ratios:
            out.append((f"… {local}, round {n} time against round 2",
                        f"{ratios[key('round_last_vs_round_2')]}× (CPU time "
                        f"{ratios.get(key('round_last_vs_round_2_cpu'))}×)",
                        f"≤ {targets.get('round_last_vs_round_2')}×", verdict(key("round_last_vs_round_2"))))
    return out


def main() -> int:
    lines = ["# Benchmarks", "", "Generated by `benchmarks/summary.py` from the JSON files beside it "
             "(`make bench` runs every benchmark, then this). Each figure is a ratio or a rate measured in "
             "one run against a baseline on the same input; the machine is 2 shared cores, so timings are "
             "noisy.", "", "| figure | measured | target | |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows()]
    atomic_write_text(BENCH / "README.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
