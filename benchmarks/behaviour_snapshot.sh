#!/usr/bin/env bash
# What a behaviour-preserving change must leave byte-identical: the scenario
# library's results and traces, `imprint replay --json` over every labelled
# corpus (the outcome corpora too), and the report's summary.md. Writes them
# under $1; compare two snapshots with `diff -r BEFORE AFTER`. Run ids and wall-clock fields are
# replaced by stand-ins (the report's generation time too), and the
# real-clock scenario is left out, so only behaviour differs. Section
# workers' traces are deterministic since they reserve and settle in order.
set -euo pipefail
out=${1:?usage: benchmarks/behaviour_snapshot.sh OUT_DIR}
bin=${BIN:-.venv/bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/imprint" run scenarios --json --traces "$tmp/runs" > "$tmp/run.json" || true
"$bin/python" - "$tmp" "$out" <<'PY'
import json, pathlib, re, sys
tmp, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def scrub(text):
    text = text.replace(str(tmp), "TMP")
    text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{4}", "RUN", text)
    return re.sub(r'"wall": "[^"]*"', '"wall": "WALL"', text)
results = json.loads((tmp / "run.json").read_text())
# `imprint run --json` prints a summary whose "scenarios" are the rows; the
# real-clock scenario's row and its share of the pass counts are left out.
rows = [r for r in results["scenarios"] if "real-clock" not in str(r.get("file", ""))]
results |= {"scenarios": rows, "passed": sum(r["passed"] for r in rows),
            "failed": sum(not r["passed"] for r in rows)}
(out / "run.json").write_text(scrub(json.dumps(results, indent=1, sort_keys=True)))
(out / "traces").mkdir(exist_ok=True)
for f in sorted((tmp / "runs").glob("*/*.jsonl")):
    if "real-clock" in f.name:
        continue
    (out / "traces" / f.name).write_text(scrub(f.read_text()))
PY
n=0
for corpus in ../shared/data/roundlogs/tau-bench-airline ../shared/data/raw/mini-swe-agent \
              ../shared/data/raw/who-and-when traces/webruns traces/outcomes/*/; do
  n=$((n+1))
  "$bin/imprint" replay --json "$corpus" > "$out/replay-$n-$(basename "$corpus").json" 2>&1 || true
done
"$bin/imprint" report --out "$tmp/report" > /dev/null 2>&1 || true
if [ -f "$tmp/report/summary.md" ]; then
  sed -E 's/generated [0-9-]+ [0-9:]+ UTC/generated WHEN/' "$tmp/report/summary.md" > "$out/summary.md"
else
  echo "no summary.md" > "$out/summary.md"
fi
echo "snapshot in $out"
