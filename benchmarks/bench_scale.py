"""How `imprint tune` scales with the corpus (a script, not a test): wall
time, CPU time and peak memory of `imprint tune` over synthetic labelled
corpora of N runs (benchmarks/synthcorpus.py: drawn from the real corpora's
distributions, built once into the cache outside git), tune's default grid.

Each size runs on one process (`--jobs 1`), on all cores (`--jobs CORES`)
and on a Dask LocalCluster of 1 and of 2 worker processes (`--scheduler`),
each cold (an empty disk cache) and then warm (the same command again, a
new process reading the disk cache the cold run wrote). `imprint tune` runs
as a subprocess; its figures come from os.wait4 (its CPU time and that of
the pool processes it waited for; the peak RSS of the largest of them), a
Dask worker's from psutil and /proc (VmHWM), its cluster started afresh for
each run. The load average is recorded beside every figure: the machine is
shared, so wall times are noisy and CPU times and ratios within one run are
the figures to compare.

    python benchmarks/bench_scale.py [--sizes 100,1000] [--modes one,all,dask1,dask2] [--seed 0]
    python benchmarks/bench_scale.py --sizes 10000,100000      # the large corpora (hours, gigabytes)
    python benchmarks/bench_scale.py --sizes 10000,100000 --modes one --cold-only --merge   # the scale targets
    python benchmarks/bench_scale.py --compare-only --merge   # `imprint compare` over the whole labelled set

`--compare` (and `--compare-only`) also measures `imprint compare` of every
built-in rule over the whole labelled set, as reports/compare/command.txt
runs it (its output to a temporary folder, no disk cache, one process), on
the compiled novelty path and, as the baseline in the same run, on the
pure-Python one (IMPRINT_NOVELTY_PURE=1): CPU milliseconds per run and rule,
loading the corpora included (target: at most 1 ms), the least of
`--compare-repeat` runs of each path taken in turn.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import synthcorpus  # noqa: E402

MODES = {"one": "1 process", "all": "all cores", "dask1": "Dask, 1 worker", "dask2": "Dask, 2 workers"}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _mib(kib: float) -> float:
    return round(kib / 1024, 1)


def _hwm_kib(pid: int) -> int | None:
    """A process's peak resident set (Linux VmHWM), in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _tune(corpus: synthcorpus.Corpus, cache: Path, out: Path, extra: list[str]) -> dict:
    """One `imprint tune` in a subprocess: wall, CPU (its own and its
    reaped children's) and peak RSS."""
    cmd = [sys.executable, "-m", "harness.cli", "tune", "--corpus", str(corpus.runs), "--labels", str(corpus.labels),
           "--cache-dir", str(cache), "--out", str(out), "--json", *extra]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    load = _load()
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        # Output to files, not pipes (nothing to read while it runs), so that
        # wait4 reaps it and gives its rusage.
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"imprint tune failed ({proc.returncode}): {err.read().decode()[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": _mib(usage.ru_maxrss), "load_average": load}


COMPARE_TARGET_MS = 1.0


def _compare_once(pure: bool) -> dict:
    """reports/compare/command.txt's `imprint compare` in a subprocess, its
    output to a temporary folder, without the disk cache, on one process: CPU
    (wait4), wall, and the runs and rules it judged (from its compare.json)."""
    import shlex
    words = shlex.split((ROOT / "reports" / "compare" / "command.txt").read_text(encoding="utf-8").strip())
    if "--out" in words:
        i = words.index("--out")
        del words[i:i + 2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("IMPRINT_NOVELTY_PURE", None)
    if pure:
        env["IMPRINT_NOVELTY_PURE"] = "1"
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as out, tempfile.TemporaryFile() as err:
        cmd = [sys.executable, "-m", "harness.cli", *words[1:], "--out", out, "--no-disk-cache", "--jobs", "1"]
        load = _load()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        # exit 1: a --decide that does not pass (compare.json is written all the same)
        if os.waitstatus_to_exitcode(status) not in (0, 1) or not (Path(out) / "compare.json").exists():
            err.seek(0)
            raise RuntimeError(f"imprint compare failed: {err.read().decode()[-2000:]}")
        report = json.loads((Path(out) / "compare.json").read_text(encoding="utf-8"))
    runs, rules = len(report["runs"]), len(report["rules"])
    cpu = usage.ru_utime + usage.ru_stime
    return {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "runs": runs, "rules": rules,
            "cpu_ms_per_run_and_rule": round(1000 * cpu / (runs * rules), 3), "load_average": load}


def compare_figure(repeat: int = 1) -> dict:
    """`imprint compare` of every built-in over the whole labelled set: the
    compiled path, and the pure path as the baseline, one after the other,
    `repeat` times in turn; each path's figure is its least CPU (the run the
    shared machine disturbed least: the CPU of one command moves by a quarter
    with the load), with every run's CPU beside it."""
    runs = [(_compare_once(False), _compare_once(True)) for _ in range(repeat)]
    compiled = min((c for c, _ in runs), key=lambda r: r["cpu_s"]) | {"cpu_s_each": [c["cpu_s"] for c, _ in runs]}
    pure = min((p for _, p in runs), key=lambda r: r["cpu_s"]) | {"cpu_s_each": [p["cpu_s"] for _, p in runs]}
    ms = compiled["cpu_ms_per_run_and_rule"]
    return {"what": "reports/compare/command.txt's imprint compare (every built-in rule, the record's, the decided "
                    "candidates) over every labelled corpus, no disk cache, 1 process; CPU of the process (wait4), "
                    "loading and converting the corpora included; the least of `repeat` runs a path, taken in turn",
            "repeat": repeat,
            "command": (ROOT / "reports" / "compare" / "command.txt").read_text(encoding="utf-8").strip(),
            "commit": _commit(), "compiled": compiled, "pure": pure,
            "compiled_over_pure_cpu": round(compiled["cpu_s"] / pure["cpu_s"], 3) if pure["cpu_s"] else None,
            "target_ms": COMPARE_TARGET_MS, "met": ms <= COMPARE_TARGET_MS}


def _commit() -> str:
    """The commit measured (with "+changes" when the tree differs from it
    outside reports/, where the benchmarks write: a second size of one
    `make bench` would otherwise read the first size's results as a change)."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports") else "")


def _cluster(workers: int):
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    pids = list(client.run(os.getpid).values())
    return cluster, client, pids


def _workers_cpu(pids: list[int]) -> float:
    import psutil
    total = 0.0
    for pid in pids:
        t = psutil.Process(pid).cpu_times()
        total += t.user + t.system
    return total


def measure(corpus: synthcorpus.Corpus, mode: str, work: Path, phases: tuple[str, ...] = ("cold", "warm")) -> list[dict]:
    """Cold then warm runs of one mode over one corpus (warm reads the disk cache of the cold run)."""
    cache = work / f"cache-{mode}"
    extra, cluster = [], None
    if mode == "one":
        extra = ["--jobs", "1"]
    elif mode == "all":
        extra = ["--jobs", str(os.cpu_count() or 1)]
    out = []
    for phase in phases:
        if mode.startswith("dask"):   # a fresh cluster per run: its workers' peaks are this run's
            cluster, client, pids = _cluster(int(mode[4:]))
            extra = ["--scheduler", cluster.scheduler_address]
            before = _workers_cpu(pids)
        try:
            got = _tune(corpus, cache, work / f"out-{mode}-{phase}", extra)
            if cluster is not None:
                got["workers"] = {"cpu_s": round(_workers_cpu(pids) - before, 2),
                                  "peak_rss_mib": max((_mib(h) for h in map(_hwm_kib, pids) if h), default=None)}
                got["cpu_s_with_workers"] = round(got["cpu_s"] + got["workers"]["cpu_s"], 2)
        finally:
            if cluster is not None:
                client.close()
                cluster.close()
                cluster = None
        total_cpu = got.get("cpu_s_with_workers", got["cpu_s"])
        got.update(size=corpus.size, mode=MODES[mode], phase=phase, commit=_commit(),
                   cpu_ms_per_run=round(1000 * total_cpu / corpus.size, 2))
        print(f"{corpus.size:>7} runs  {MODES[mode]:<16} {phase}: {got['wall_s']:>7} s wall, {total_cpu:>7} s CPU, "
              f"peak {got['peak_rss_mib']} MiB (load {got['load_average'][0]})", flush=True)
        out.append(got)
    return out


def corpus_figures(corpus: synthcorpus.Corpus) -> dict:
    files = sorted(corpus.runs.glob("*.jsonl"))
    rounds = sum(max(0, sum(1 for _ in f.open(encoding="utf-8")) - 1) for f in files)
    return {"runs": len(files), "rounds": rounds, "mib": round(sum(f.stat().st_size for f in files) / 2 ** 20, 1)}


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in MODES.values():
        for phase, style in (("cold", "-o"), ("warm", "--s")):
            rows = sorted((r for r in report["results"] if r["mode"] == mode and r["phase"] == phase),
                          key=lambda r: r["size"])
            if not rows:
                continue
            sizes = [r["size"] for r in rows]
            ax_t.plot(sizes, [r["wall_s"] for r in rows], style, label=f"{mode}, {phase}")
            ax_m.plot(sizes, [max(r["peak_rss_mib"], (r.get("workers") or {}).get("peak_rss_mib") or 0)
                              for r in rows], style, label=f"{mode}, {phase}")
    for ax, what in ((ax_t, "wall time (s)"), (ax_m, "peak RSS of the largest process (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("labelled runs in the corpus")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7)
    fig.suptitle(f"imprint tune, default grid, synthetic corpora ({report['machine']['cores']} shared cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def targets(results: list[dict]) -> dict:
    """The issue's two scale targets, from the cold one-process runs (the
    latest of each size, with the commit each measured): CPU per run at the
    largest size against 1,000 runs (<= 1.2x), peak memory at the largest
    against the size below it (<= 2x)."""
    one = {r["size"]: r for r in results if r["mode"] == MODES["one"] and r["phase"] == "cold"}
    out: dict = {"measured_sizes": sorted(one)}

    def commits(*sizes: int) -> list[str]:
        return [one[s].get("commit") for s in sizes]   # None: measured before results named their commit
    if 1000 in one and max(one) > 1000:
        hi = max(one)
        ratio = round(one[hi]["cpu_ms_per_run"] / one[1000]["cpu_ms_per_run"], 2)
        out["cpu_per_run"] = {"sizes": [1000, hi], "ratio": ratio, "target": 1.2, "met": ratio <= 1.2,
                              "ms": [one[1000]["cpu_ms_per_run"], one[hi]["cpu_ms_per_run"]], "commits": commits(1000, hi)}
    if len(one) > 1:
        hi, below = sorted(one)[-1], sorted(one)[-2]
        ratio = round(one[hi]["peak_rss_mib"] / one[below]["peak_rss_mib"], 2)
        out["peak_memory"] = {"sizes": [below, hi], "mib": [one[below]["peak_rss_mib"], one[hi]["peak_rss_mib"]],
                              "ratio": ratio, "target": 2.0, "met": ratio <= 2.0, "commits": commits(below, hi)}
    # Dask: wall time of 1 worker against 2 at the largest size both ran at, cold (>= 1.7x at 100,000)
    d1 = {r["size"]: r for r in results if r["mode"] == MODES["dask1"] and r["phase"] == "cold"}
    d2 = {r["size"]: r for r in results if r["mode"] == MODES["dask2"] and r["phase"] == "cold"}
    both = sorted(set(d1) & set(d2))
    if both:
        size = both[-1]
        ratio = round(d1[size]["wall_s"] / d2[size]["wall_s"], 2)
        out["dask_2_workers"] = {"size": size, "wall_s": [d1[size]["wall_s"], d2[size]["wall_s"]], "ratio": ratio,
                                 "target": 1.7, "met": ratio >= 1.7,
                                 "commits": [d1[size].get("commit"), d2[size].get("commit")],
                                 "load_average": [d1[size]["load_average"], d2[size]["load_average"]]}
    return out


def _compare_target(c: dict) -> dict:
    return {"ms_per_run_and_rule": c["compiled"]["cpu_ms_per_run_and_rule"],
            "pure_ms_per_run_and_rule": c["pure"]["cpu_ms_per_run_and_rule"], "target": c["target_ms"],
            "met": c["met"], "commit": c.get("commit")}


def merged(old: dict, new: dict) -> dict:
    """OUT's report with this run's results in place of the (size, mode, phase) runs
    measured again."""
    again = {(r["size"], r["mode"], r["phase"]) for r in new["results"]}
    out = {**old, **{k: v for k, v in new.items() if k not in ("results", "sizes", "corpora")}}
    out["results"] = [r for r in old.get("results", []) if (r["size"], r["mode"], r["phase"]) not in again] + new["results"]
    out["sizes"] = sorted({*old.get("sizes", []), *new["sizes"]})
    out["corpora"] = {**old.get("corpora", {}), **new["corpora"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000", help="corpus sizes, runs (default 100,1000; also 10000,100000)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)} (default all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold-only", action="store_true",
                    help="skip the warm runs (at 100,000 runs a cold run takes most of an hour on 2 cores)")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "scale.json"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the results of OUT for the sizes and modes not measured now (the large corpora take hours)")
    ap.add_argument("--compare", action="store_true",
                    help="also measure `imprint compare` over the whole labelled set (compiled and pure path)")
    ap.add_argument("--compare-only", action="store_true", help="measure only that (with --merge: into OUT)")
    ap.add_argument("--compare-repeat", type=int, default=2, metavar="N",
                    help="runs of each path, in turn, the least CPU kept (default 2: the load moves one run's CPU "
                         "by a quarter)")
    args = ap.parse_args()
    if args.compare_only:
        out = Path(args.out)
        report = json.loads(out.read_text(encoding="utf-8")) if args.merge and out.exists() else {"results": []}
        report["compare"] = compare_figure(args.compare_repeat)
        report["targets"] = targets(report.get("results", [])) | {"compare": _compare_target(report["compare"])}
        from imprint_core.files import atomic_write_text
        atomic_write_text(out, json.dumps(report, indent=1) + "\n")
        c = report["compare"]
        print(f"compare: {c['compiled']['cpu_ms_per_run_and_rule']} ms CPU per run and rule "
              f"({c['compiled']['runs']} runs x {c['compiled']['rules']} rules; pure path "
              f"{c['pure']['cpu_ms_per_run_and_rule']} ms); wrote {out}")
        return 0
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not sizes:
        ap.error(f"unknown mode {unknown[0]}" if unknown else "no size")
    report: dict = {
        "what": "imprint tune (default grid: 4 novelty configs x 19 patience values) over synthetic labelled corpora "
                "drawn from the real corpora's distributions (benchmarks/synthcorpus.json), cold (empty disk cache) "
                "and warm (the disk cache of the cold run, a new process)",
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cores": os.cpu_count()},
        "sizes": sizes, "seed": args.seed, "corpora": {}, "results": [],
        "note": "a shared machine: the load average (1, 5, 15 min) at the start of each run is beside it; "
                "cpu_s is the tune process and the pool processes it reaped (Dask workers apart, under workers); "
                "peak_rss_mib is the largest single process, from wait4",
    }
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for size in sizes:
            t0, load = time.perf_counter(), _load()
            corpus = synthcorpus.build(size, args.seed)
            report["corpora"][str(size)] = {**corpus_figures(corpus), "build_or_find_s": round(time.perf_counter() - t0, 2),
                                            "load_average": load}
            for mode in modes:
                work = Path(tmp) / f"{size}-{mode}"
                work.mkdir()
                report["results"] += measure(corpus, mode, work, ("cold",) if args.cold_only else ("cold", "warm"))
    if args.merge and out.exists():
        report = merged(json.loads(out.read_text(encoding="utf-8")), report)
    one = {r["size"]: r for r in report["results"] if r["mode"] == MODES["one"] and r["phase"] == "cold"}
    if len(one) > 1:
        lo, hi = min(one), max(one)
        report["growth_one_process_cold"] = {
            "sizes": [lo, hi], "runs_ratio": round(hi / lo, 1),
            "cpu_per_run_ratio": round(one[hi]["cpu_ms_per_run"] / one[lo]["cpu_ms_per_run"], 2),
            "peak_rss_ratio": round(one[hi]["peak_rss_mib"] / one[lo]["peak_rss_mib"], 2)}
    if args.compare:
        report["compare"] = compare_figure(args.compare_repeat)
    report["targets"] = targets(report["results"])
    if "compare" in report:
        report["targets"]["compare"] = _compare_target(report["compare"])
    from imprint_core.files import atomic_write_text
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    plot(report, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
