"""What judging stop rules costs, measured side by side in one run (a script,
not a test):

1. `imprint compare`'s work: every labelled run × every built-in rule (the
   default rule set of `imprint compare`), against `imprint tune`'s default
   sweep over the same runs, each from a cold in-memory cache and no disk
   cache, in CPU and wall seconds.
2. The cost per round of each rule on `bench_novelty.py`'s corpus (the same
   generated rounds, seeded), against the record's rule, each pass
   interleaved so a slow spell of the shared machine falls on all of them:
   the candidate's target is at most 2× the record's.

    python benchmarks/bench_rules.py [--bytes N] [--out reports/bench/rules.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from bench_novelty import _interleaved, generate_rounds, machine  # noqa: E402
from harness.analysis.compare import DEFAULT_RULES, SHIPPED, RuleChoice, compare  # noqa: E402
from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache  # noqa: E402
from harness.analysis.sweep.progress import load_corpora  # noqa: E402
from harness.analysis.tune.search import tune  # noqa: E402
from harness.cli.corpora import corpora_from  # noqa: E402
from harness.cli.ruleargs import rules_of  # noqa: E402
from harness.realruns.noveltyconfigs import default_grid, expand  # noqa: E402
from harness.realruns.roundlogs import PATIENCE  # noqa: E402
from imprint_core.files import atomic_write_text  # noqa: E402
from imprint_core.stoprules import CallView, RoundView, build  # noqa: E402


def _timed(fn):
    clear_memory_cache()
    c0, w0 = os.times(), time.perf_counter()
    out = fn()
    c1 = os.times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system) + (c1.children_user - c0.children_user) \
        + (c1.children_system - c0.children_system)
    return out, round(cpu, 3), round(time.perf_counter() - w0, 3)


def sweep_costs(jobs: int) -> dict:
    corpora, _ = corpora_from(argparse.Namespace())
    runs, _ = load_corpora(corpora)
    choices = [RuleChoice(label, spec, params) for label, spec, params in
               rules_of(argparse.Namespace(rules=None, params=None, param=None), list(DEFAULT_RULES))]
    grid, _ = default_grid()
    configs = expand(grid)
    patiences = list(range(PATIENCE.min, PATIENCE.max + 1))
    nocache = ProgressCache(None)
    _, cmp_cpu, cmp_wall = _timed(lambda: compare(runs, choices, cache=nocache, jobs=jobs))
    _, tune_cpu, tune_wall = _timed(lambda: tune(runs, configs, patiences, jobs=jobs, cache=nocache))
    return {"runs": len(runs), "rounds": sum(r.rounds for r in runs), "rules": [c.label for c in choices],
            "tune_settings": len(configs) * len(patiences), "jobs": jobs,
            "compare": {"cpu_s": cmp_cpu, "wall_s": cmp_wall},
            "tune_default_sweep": {"cpu_s": tune_cpu, "wall_s": tune_wall},
            "compare_over_tune_cpu": round(cmp_cpu / tune_cpu, 3) if tune_cpu else None}


def per_round_costs(target_bytes: int) -> dict:
    rounds = generate_rounds(target_bytes)
    views = [RoundView.of(i, [CallView("search", {"q": f"query {i}.{j}"}, "read", st, text)
                              for j, (st, text, _) in enumerate(rnd)]) for i, rnd in enumerate(rounds, start=1)]
    names = [n for n in DEFAULT_RULES if "[" not in n] + ["outcome-repeat"]
    names = list(dict.fromkeys(names))

    def runner(name):
        def run():
            rule = build(name)
            for v in views:
                rule.observe(v)
        return run
    best = _interleaved({n: (runner(n), 3) for n in names}, 3)
    base = best["record"]["cpu"]
    return {"rounds": len(views), "bytes": sum(len(c.result.encode()) for v in views for c in v.calls),
            "ms_per_round": {n: round(1000 * b["cpu"] / len(views), 4) for n, b in best.items()},
            "over_record": {n: round(b["cpu"] / base, 3) for n, b in best.items()},
            "shipped": SHIPPED, "shipped_target": f"{SHIPPED} ≤ 2× record",
            "shipped_met": best[SHIPPED]["cpu"] <= 2 * base}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=2_000_000, help="size of the per-round corpus (default 2 MB)")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the record rule's novelty in both sweeps")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "rules.json"))
    args = ap.parse_args()
    out = {"machine": machine(), "load_average": round(os.getloadavg()[0], 2),
           "sweep": sweep_costs(args.jobs), "per_round": per_round_costs(args.bytes)}
    atomic_write_text(Path(args.out), json.dumps(out, indent=1) + "\n")
    s, pr = out["sweep"], out["per_round"]
    print(f"compare: {len(s['rules'])} rules × {s['runs']} runs in {s['compare']['cpu_s']} s CPU; tune's default "
          f"sweep ({s['tune_settings']} settings) {s['tune_default_sweep']['cpu_s']} s CPU "
          f"({s['compare_over_tune_cpu']}×)")
    print("per round (ms): " + ", ".join(f"{k} {v}" for k, v in pr["ms_per_round"].items()))
    print(f"shipped rule ({SHIPPED}) / record: {pr['over_record'][SHIPPED]}× (target ≤ 2×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
