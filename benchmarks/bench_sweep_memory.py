"""Peak memory of `imprint tune` at 10,000 and 100,000 synthetic runs with
the novelty judgement stubbed (a script, not a test).

`bench_scale.py` measures the real thing, cold: at 100,000 runs it is some
20 minutes of CPU, hours on a loaded 2-core machine. What sets its peak
memory is what the sweep holds a run (the runs, their progress, the
settings × runs matrices, the caches) and what one work item holds (a
bounded share of `HOLD_CHARS`), not the novelty arithmetic, so this runs
the same command, on one process, cold, with each reply's per-round verdict
replaced by a stand-in (every round a read without progress): loading,
finding the files, reading the runs not held again in the work items, the
progress table, the caches, the scores, the split, cross-validation and
the report are the real code. Figures: peak RSS of the process (wait4), at
each size, and their ratio, written under `sweep_memory` in
`reports/bench/scale.json` with the commit.

    python benchmarks/bench_sweep_memory.py [--sizes 10000,100000]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import bench_scale  # noqa: E402
import synthcorpus  # noqa: E402

STUB = """
import sys
from harness.analysis.sweep import work
def stand_in(reps, configs):
    # every round a read without progress: the verdicts' shape, none of their arithmetic
    return [[tuple(("read", False) for _ in rep.rounds) for rep in reps] for _ in configs]
work.shared_progress = stand_in
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def peak(corpus: synthcorpus.Corpus) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-sweep-memory-") as tmp, tempfile.TemporaryFile() as err:
        cmd = [sys.executable, "-c", STUB, "tune", "--corpus", str(corpus.runs), "--labels", str(corpus.labels),
               "--no-disk-cache", "--jobs", "1", "--out", tmp, "--json"]
        env = dict(os.environ, PYTHONPATH=str(bench_scale.ROOT))
        load = bench_scale._load()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=bench_scale.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"tune failed: {err.read().decode()[-2000:]}")
    return {"size": corpus.size, "peak_rss_mib": bench_scale._mib(usage.ru_maxrss),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(time.perf_counter() - t0, 2),
            "load_average": load}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--out", default=str(bench_scale.ROOT / "reports" / "bench" / "scale.json"))
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows = []
    for size in sizes:
        rows.append(peak(synthcorpus.build(size)))
        print(f"{size:>7} runs: peak {rows[-1]['peak_rss_mib']} MiB, {rows[-1]['cpu_s']} s CPU "
              f"(load {rows[-1]['load_average'][0]})", flush=True)
    lo, hi = rows[0], rows[-1]
    figure = {"what": "imprint tune, 1 process, cold, no disk cache, novelty judgement stubbed (every round a read "
                      "without progress; benchmarks/bench_sweep_memory.py): peak RSS (wait4)",
              "commit": bench_scale._commit(), "results": rows,
              "ratio": round(hi["peak_rss_mib"] / lo["peak_rss_mib"], 2), "sizes": [lo["size"], hi["size"]],
              "target": 2.0}
    figure["met"] = figure["ratio"] <= figure["target"]
    out = Path(args.out)
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    report["sweep_memory"] = figure
    from imprint_core.files import atomic_write_text
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    print(f"{lo['size']:,} -> {hi['size']:,} runs: {lo['peak_rss_mib']} -> {hi['peak_rss_mib']} MiB "
          f"({figure['ratio']}x); wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
