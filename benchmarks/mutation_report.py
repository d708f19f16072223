"""reports/mutation.md from the last `mutmut run` (`make mutate`).

Reads the files mutated (`[tool.mutmut] only_mutate` in pyproject.toml, the
one list), mutmut's per-file results (mutants/<file>.meta) and the verdicts
on known survivors (benchmarks/mutation_verdicts.toml, keyed by mutant name,
each with the mutated line it was written for). Writes the score per file
and every surviving mutant with its diff and its verdict.

A run may be restricted (`mutmut run "imprint_core.novelty.rule*"`): the
mutants it did not check are then taken from the verdicts file's
`[carried."<file>"]` figures of an earlier full run of that file (counts and
survivor names), when their number is the one recorded there.

Exit status 1 when a survivor has no verdict (or its verdict was written for
another line), or when carried figures do not fit: kill it with a test, or
explain it in the verdicts file.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = ROOT / "benchmarks" / "mutation_verdicts.toml"

# mutmut's exit codes per mutant (mutmut/stats.py, 3.8).
KILLED = {1, 3}
TIMEOUT = {36, -24, 24, 152, 255}
SURVIVED = {0}
NO_TESTS = {5, 33}
TYPE_CHECK = {37}
SKIPPED = {34}


def status(code: int | None) -> str:
    if code is None:
        return "not checked"
    for name, codes in (("killed", KILLED), ("timeout", TIMEOUT), ("survived", SURVIVED), ("no tests", NO_TESTS),
                        ("type check", TYPE_CHECK), ("skipped", SKIPPED)):
        if code in codes:
            return name
    return "suspicious"


def mutated_files(root: Path) -> list[str]:
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]


def results(root: Path, path: str) -> dict[str, str]:
    meta = root / "mutants" / (path + ".meta")
    if not meta.exists():
        raise SystemExit(f"{meta} is missing: run `mutmut run` first (make mutate)")
    return {name: status(code) for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()}


def diff(root: Path, name: str, path: str) -> str:
    """The mutant's diff, as `mutmut show` prints it (in this process when mutmut's function is importable:
    one `mutmut show` per survivor costs a second or more each)."""
    try:
        from mutmut.mutation.diff_apply import get_diff_for_mutant
    except ImportError:
        out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=root, capture_output=True,
                             text=True, check=True).stdout
        return "\n".join(line for line in out.splitlines() if not line.startswith("# "))
    cwd = Path.cwd()
    os.chdir(root)
    try:
        return get_diff_for_mutant(name, path=path)
    finally:
        os.chdir(cwd)


def changed_lines(text: str) -> list[str]:
    return [line[1:].strip() for line in text.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--out", type=Path, default=None, help="default: <root>/reports/mutation.md")
    args = ap.parse_args(argv)
    root = args.root
    out_path = args.out or root / "reports" / "mutation.md"
    verdicts_doc = tomllib.loads(VERDICTS.read_text()) if VERDICTS.exists() else {}
    verdicts: dict[str, dict] = verdicts_doc.get("verdicts", {})

    files = mutated_files(root)
    by_file = {f: results(root, f) for f in files}
    carried: dict[str, dict] = verdicts_doc.get("carried", {})
    carried_note: dict[str, str] = {}
    extra: dict[str, list[int]] = {}   # carried counts, less the carried survivors (listed in by_file)
    problems: list[str] = []
    for f, res in by_file.items():
        unchecked = {n for n, s in res.items() if s == "not checked"}
        c = carried.get(f)
        if not unchecked or c is None:
            continue
        if len(unchecked) != c["mutants"] or not set(c["survivors"]) <= unchecked:
            problems.append(f"{f}: {len(unchecked)} mutants not checked in this run, but the figures carried "
                            f"from {c['from']} are for {c['mutants']} (or name other survivors): re-run it")
            continue
        # the earlier run's counts; its survivors by name (for their diffs and verdicts)
        for n in unchecked:
            del res[n]
        res.update({n: "survived" for n in c["survivors"]})
        extra[f] = [c["mutants"] - len(c["survivors"]), c["killed"], c["timeout"], 0, c.get("no_tests", 0)]
        carried_note[f] = f"{c['mutants']} carried from {c['from']}"
    lines = ["# Mutation testing", "",
             "`make mutate`: mutmut mutates the files of `[tool.mutmut] only_mutate` (pyproject.toml) and runs "
             "the core tests against each mutant; this report is written by `benchmarks/mutation_report.py`. "
             "A mutant is *killed* when a test fails (or times out) with it in place; a *survivor* is a change "
             "the tests do not notice. Survivors a test can tell apart get a test "
             "(tests/core/test_records_and_events.py, tests/core/novelty/test_novelty_rule_edges.py); "
             "each one listed below carries its verdict from `benchmarks/mutation_verdicts.toml`.", "",
             "## Score", "",
             "| file | mutants | killed | timeout | survived | no tests | score |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    totals = [0, 0, 0, 0, 0]
    for f, res in by_file.items():
        n = len(res)
        counts = [n] + [sum(1 for s in res.values() if s == k) for k in ("killed", "timeout", "survived", "no tests")]
        counts = [a + b for a, b in zip(counts, extra.get(f, [0] * 5))]
        totals = [a + b for a, b in zip(totals, counts)]
        mark = f" ({carried_note[f]})" if f in carried_note else ""
        lines.append(f"| `{f}`{mark} | " + " | ".join(map(str, counts)) + f" | {score(counts)} |")
    lines.append("| **all** | " + " | ".join(f"**{c}**" for c in totals) + f" | **{score(totals)}** |")
    lines += ["", "Score: (killed + timeout) / mutants. Other statuses (suspicious, not checked) count as "
              "not killed.", ""]
    notes = verdicts_doc.get("notes", "").strip()
    if notes:
        lines += ["## Notes", "", notes, ""]

    unexplained: list[str] = []
    lines += ["## Survivors", ""]
    any_survivor = False
    for f, res in by_file.items():
        names = [n for n, s in res.items() if s not in ("killed", "timeout")]
        if not names:
            continue
        any_survivor = True
        lines += [f"### `{f}` ({len(names)})", ""]
        for name in sorted(names, key=natural):
            d = diff(root, name, f)
            v = verdicts.get(name)
            if v is None:
                why = "UNEXPLAINED: kill it with a test or explain it in benchmarks/mutation_verdicts.toml"
                unexplained.append(name)
            elif v.get("line", "").strip() not in changed_lines(d):
                why = f"STALE VERDICT (written for `{v.get('line')}`): re-check this mutant"
                unexplained.append(name)
            else:
                why = v["why"]
            lines += [f"- `{name}` ({res[name]}): {why}", "", "  ```diff",
                      *("  " + line for line in body(d)), "  ```", ""]
    if not any_survivor:
        lines += ["None.", ""]
    for p in problems:
        print(f"  carried figures do not fit: {p}", file=sys.stderr)
    unexplained += problems
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines).rstrip() + "\n")
    print(f"{out_path}: {sum(totals[1:3])}/{totals[0]} killed ({score(totals)}), {totals[3] + totals[4]} survivors, "
          f"{len(unexplained)} unexplained")
    for name in unexplained:
        print(f"  unexplained: {name}", file=sys.stderr)
    return 1 if unexplained else 0


def score(counts: list[int]) -> str:
    n, killed, timeout = counts[0], counts[1], counts[2]
    return f"{(killed + timeout) / n:.1%}" if n else "n/a"


def body(d: str) -> list[str]:
    """The diff without its file header: the hunk, trimmed to the changed lines and two around them."""
    rows = [line for line in d.splitlines() if not line.startswith(("+++", "---", "@@"))]
    keep = {j for i, line in enumerate(rows) if line[:1] in "+-" for j in range(i - 2, i + 3)}
    return [rows[i] for i in range(len(rows)) if i in keep]


def natural(name: str) -> tuple[str, int]:
    stem, _, num = name.rpartition("_")
    return (stem, int(num)) if num.isdigit() else (name, 0)


if __name__ == "__main__":
    sys.exit(main())
