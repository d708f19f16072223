"""`imprint tune`'s full default sweep over the labelled corpora: wall
time on 1 process against all cores (a script, not a test), in one run, and
the sweep before work was shared across configs (`share=False`: each config
normalizes and shingles every text itself) against the shared one, both on
1 process, cold, in the same run.

The corpora are loaded once (that part is the same either way and is
reported apart); each sweep's CPU time (this process and its workers) and
the load average when it started are recorded beside its wall time, since
on a shared machine the cores may be busy with other work. Each sweep starts with an empty in-memory cache and no disk
cache, so both compute every (run, novelty config) pair. The two results
must agree setting by setting.

    python benchmarks/bench_tune.py [--jobs N] [--out reports/bench/tune.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache  # noqa: E402
from harness.analysis.sweep.progress import load_corpora  # noqa: E402
from harness.analysis.tune.search import tune  # noqa: E402
from harness.cli.tune import corpora_from  # noqa: E402
from harness.realruns.noveltyconfigs import default_grid, expand  # noqa: E402
from harness.realruns.roundlogs import PATIENCE  # noqa: E402
from imprint_core.errors import UserInputError  # noqa: E402
from imprint_core.files import atomic_write_text  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="the parallel run's processes (all cores)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "tune.json"))
    args = ap.parse_args()
    # The same default corpora as `imprint tune`: one that is absent, or the
    # regressions corpus while no run is labelled in it, is left out.
    try:
        corpora, notes = corpora_from(argparse.Namespace())
    except UserInputError as e:
        print(f"no corpora to tune on: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    t0 = time.perf_counter()
    runs, _ = load_corpora(corpora)
    load_s = time.perf_counter() - t0
    grid, _ = default_grid()
    configs = expand(grid)
    patiences = list(range(PATIENCE.min, PATIENCE.max + 1))
    timings, cpu, load, results = {}, {}, {}, {}
    # (name, processes, configs sharing work); "unshared" is the path before sharing.
    for name, jobs, share in (("unshared", 1, False), (1, 1, True), (args.jobs, args.jobs, True)):
        clear_memory_cache()
        load[name] = round(os.getloadavg()[0], 2)
        c0, t = os.times(), time.perf_counter()
        tuned = tune(runs, configs, patiences, grid=grid, jobs=jobs, cache=ProgressCache(None), share=share)
        timings[name], c1 = time.perf_counter() - t, os.times()
        cpu[name] = round(c1.user + c1.system + c1.children_user + c1.children_system
                          - (c0.user + c0.system + c0.children_user + c0.children_system), 2)
        results[name] = (tuned.scores.stops.tolist(), tuned.best)
        print(f"{name}: {jobs} process(es){'' if share else ', configs not sharing work'}: {timings[name]:.1f} s wall, "
              f"{cpu[name]:.1f} s CPU ({tuned.stats.computed} pairs computed; load average {load[name]})", flush=True)
    one, many = timings[1], timings[args.jobs]
    report = {
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cores": os.cpu_count()},
        "corpora": [c.name for c in corpora], "labelled_runs": len(runs),
        "rounds": sum(r.rounds for r in runs), "novelty_configs": len(configs), "patience_values": len(patiences),
        "settings": len(configs) * len(patiences), "load_s": round(load_s, 2),
        "one_process_s": round(one, 2), "all_cores_jobs": args.jobs, "all_cores_s": round(many, 2),
        "speedup": round(one / many, 2),
        "identical": results[1] == results[args.jobs] == results["unshared"],
        "cpu_s": {"one_process": cpu[1], "all_cores": cpu[args.jobs]},
        "load_average_at_start": {"one_process": load[1], "all_cores": load[args.jobs]},
        "shared_work": {
            "what": "cold sweep on 1 process, configs sharing each text's normalization and shingles, against each "
                    "config computing its own (share=False, the path before sharing), in the same run",
            "unshared_s": round(timings["unshared"], 2), "shared_s": round(one, 2),
            "unshared_cpu_s": cpu["unshared"], "shared_cpu_s": cpu[1],
            "speedup_wall": round(timings["unshared"] / one, 2),
            "speedup_cpu": round(cpu["unshared"] / cpu[1], 2) if cpu[1] else None,
            "load_average_at_start": {"unshared": load["unshared"], "shared": load[1]}},
        "note": "wall times on a shared machine: a load average above its cores means other work took them; "
                "CPU-time ratios are the steadier figure",
    }
    atomic_write_text(Path(args.out), json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
