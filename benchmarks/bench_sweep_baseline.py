"""The cold default sweep of `imprint tune` on today's code against the code
before the speed issue's work (commit e433b27), in one run, interleaved (a
script, not a test).

The baseline is a git worktree of that commit (made here when absent, under
the system's temp folder); each side runs in its own process with its own tree
first on sys.path, loads the default labelled corpora, and times `tune()` with
an empty in-memory cache and no disk cache, on one process, CPU time. The
baseline runs pure Python (it has no compiled path). Results go to
reports/bench/sweep_baseline.json.

    python benchmarks/bench_sweep_baseline.py [--repeat 2] [--baseline-tree DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "e433b27"

# Runs inside each tree's process: the names moved between the two commits.
_SIDE = r'''
import argparse, json, sys, time
sys.path.insert(0, sys.argv[1])
try:                                       # analysis in rooms (issue 43)
    import harness.analysis.sweep.progress as sweep
    from harness.analysis.tune.search import tune
except ImportError:                        # analysis as flat modules
    from harness.analysis import sweep
    from harness.analysis.tune import tune
from harness.cli.tune import corpora_from
try:
    from harness.realruns.noveltyconfigs import default_grid, expand
    from harness.realruns.roundlogs import PATIENCE
except ImportError:
    from harness.realruns.noveltyfields import default_grid, expand
    from harness.realruns.rounds import PATIENCE
try:
    from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache
except ImportError:
    try:
        from harness.analysis.progresscache import ProgressCache, clear_memory_cache
    except ImportError:
        from harness.analysis.sweep import ProgressCache, clear_memory_cache
runs, _ = sweep.load_corpora(corpora_from(argparse.Namespace())[0])
grid, _ = default_grid()
clear_memory_cache()
c0 = time.process_time()
t = tune(runs, expand(grid), list(range(PATIENCE.min, PATIENCE.max + 1)), grid=grid, jobs=1, cache=ProgressCache(None))
print(json.dumps({"cpu_s": round(time.process_time() - c0, 2), "runs": len(runs),
                  "recommended": t.scores.settings[t.best].label()}))
'''


def side(tree: Path, pure: bool) -> dict:
    env = dict(os.environ, IMPRINT_NOVELTY_PURE="1") if pure else dict(os.environ)
    env.pop("PYTHONPATH", None)
    got = subprocess.run([sys.executable, "-c", _SIDE, str(tree)], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return {**json.loads(got.stdout.strip().splitlines()[-1]), "load_average": round(os.getloadavg()[0], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline-tree", type=Path, default=Path(tempfile.gettempdir()) / f"imprint-{BASELINE}")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "sweep_baseline.json"))
    args = ap.parse_args()
    if not (args.baseline_tree / "harness").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(args.baseline_tree), BASELINE], cwd=ROOT, check=True)
    rows: dict[str, list[dict]] = {"baseline": [], "main": []}
    for _ in range(args.repeat):
        rows["baseline"].append(side(args.baseline_tree, pure=True))
        rows["main"].append(side(ROOT, pure=False))
        print(f"baseline {rows['baseline'][-1]['cpu_s']} s CPU, main {rows['main'][-1]['cpu_s']} s CPU", flush=True)
    base = round(statistics.median(r["cpu_s"] for r in rows["baseline"]), 2)
    ours = round(statistics.median(r["cpu_s"] for r in rows["main"]), 2)
    report = {"what": f"tune's default grid over the default labelled corpora, cold, 1 process, CPU time: commit {BASELINE} "
                      "(before the speed issue's work) against today's code, interleaved in one run",
              "baseline_commit": BASELINE, "runs": rows["main"][0]["runs"], "rows": rows,
              "baseline_cpu_s": base, "main_cpu_s": ours, "speedup_cpu": round(base / ours, 2), "target": 5.0,
              "same_recommendation": len({r["recommended"] for rs in rows.values() for r in rs}) == 1}
    sys.path.insert(0, str(ROOT))
    from imprint_core.files import atomic_write_text
    atomic_write_text(Path(args.out), json.dumps(report, indent=1) + "\n")
    print(f"{base} s -> {ours} s CPU ({report['speedup_cpu']}x); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
