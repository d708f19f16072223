"""Build traces/outcomes/intercode-{sql,bash,ctf,python}/ from InterCode's published runs.

    fetch github:princeton-nlp/intercode          # a git mirror, no work tree
    /work/main/.venv/bin/python benchmarks/corpora/build_intercode.py \\
        /work/.mirror/princeton-nlp+intercode/repo traces/outcomes

reads every `data/results/**.json` at `COMMIT` with `git show` (a file the
mirror lacks is listed and skipped), converts the runs with
`harness/realruns/importers/intercode.py` and writes a sample of them as
gzip-compressed round logs, `<folder>/<file stem less ic_<env>_>__<task>.jsonl.gz`
(the stale `.jsonl.gz` files of each folder are removed first). Outcome:
success when `summary.max_reward == 1`.

Sampling, per environment, with `random.Random(f"{SEED}:{env}")`: every run
with at least one round of every multi-turn configuration (the 1-turn SQL
files and the human SQL file are left out: a 1-round run cannot be stopped
early, and a person is no agent), shuffled; a run is taken while its
configuration (strategy, model, turn limit, handicap) holds fewer than
`ceil(target / configurations)` and its task fewer than `PER_TASK`; a
second pass without the configuration quota fills what small
configurations left. Same input, same output: the run order is the file
order before the shuffle, and gzip's header carries no time.
"""
from __future__ import annotations

import gzip
import json
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.realruns.importers.convert import render_round_log  # noqa: E402
from harness.realruns.importers.intercode import import_intercode, is_intercode  # noqa: E402

REPO = "princeton-nlp/intercode"
COMMIT = "c3e46d827cfc9d4c704ec078f7abf9f41e3191d8"
LICENSE = "MIT"
SEED = "imprint-intercode-2026-12-06"
TARGETS = {"sql": 240, "bash": 200, "ctf": 60, "python": 50}
"""Runs per environment (550 in all): SQL has 13 multi-turn configurations
and 1,034 tasks, bash 10 and about 200; CTF and Python have GPT runs only."""
PER_TASK = 2
"""At most this many runs of one task (across models and strategies)."""
LEFT_OUT = ("sql/human/",)
"""Files not taken: human SQL sessions (another format, no agent)."""


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def result_files(repo: Path) -> list[str]:
    names = git(repo, "ls-tree", "-r", "--name-only", COMMIT, "data/results").decode().split("\n")
    return sorted(n for n in names if n.endswith(".json") and not any(x in n for x in LEFT_OUT))


def candidates(repo: Path) -> dict[str, list[tuple[tuple, str, object]]]:
    """Per environment: (configuration, run name, round log) of every run that can be sampled."""
    out: dict[str, list] = {}
    for path in result_files(repo):
        try:
            data = json.loads(git(repo, "show", f"{COMMIT}:{path}"))
        except subprocess.CalledProcessError:
            print(f"absent from the mirror, skipped: {path}", file=sys.stderr)
            continue
        if not is_intercode(data):
            continue
        env = path.split("/")[2]
        prov = {"repo": REPO, "commit": COMMIT, "path": path, "license": LICENSE}
        stem = Path(path).stem.removeprefix(f"ic_{env}_")
        for log in import_intercode(data, path, prov):
            lab = log.labels
            if lab["turns_limit"] == 1 or not log.rounds:
                continue
            config = (lab["strategy"], lab["model"], lab["turns_limit"], lab["handicap"])
            out.setdefault(env, []).append((config, f"{stem}__{lab['run_id']}", log))
    return out


def sample(env: str, runs: list) -> list:
    rng = random.Random(f"{SEED}:{env}")
    runs = list(runs)
    rng.shuffle(runs)
    configs = {c for c, _, _ in runs}
    quota = math.ceil(TARGETS[env] / len(configs))
    taken, per_config, per_task, chosen = [], Counter(), Counter(), set()
    for use_quota in (True, False):
        for config, name, log in runs:
            task = log.labels["task_id"]
            if len(taken) >= TARGETS[env] or name in chosen or per_task[task] >= PER_TASK:
                continue
            if use_quota and per_config[config] >= quota:
                continue
            taken.append((config, name, log))
            chosen.add(name)
            per_config[config] += 1
            per_task[task] += 1
    return taken


def write(out_root: Path, env: str, taken: list) -> Path:
    folder = out_root / f"intercode-{env}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsonl.gz"):
        old.unlink()
    for _, name, log in taken:
        text = render_round_log(log).encode("utf-8")
        (folder / f"{name}.jsonl.gz").write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    return folder


def main(repo: str, out_root: str) -> None:
    pools = candidates(Path(repo))
    for env in TARGETS:
        taken = sample(env, pools[env])
        folder = write(Path(out_root), env, taken)
        outcomes = Counter(log.labels["outcome"]["value"] for _, _, log in taken)
        rounds = sorted(len(log.rounds) for _, _, log in taken)
        size = sum(p.stat().st_size for p in folder.glob("*.jsonl.gz"))
        print(f"{folder}: {len(taken)} runs of {len({log.labels['task_id'] for _, _, log in taken})} tasks "
              f"(pool {len(pools[env])}), {dict(outcomes)}, rounds median {rounds[len(rounds) // 2]} "
              f"max {rounds[-1]}, {size / 1e6:.2f} MB")
        for config, n in sorted(Counter(c for c, _, _ in taken).items(), key=str):
            ok = sum(1 for c, _, log in taken if c == config and log.labels["outcome"]["value"] == "success")
            print(f"  {config}: {n} runs, {ok} successes")


if __name__ == "__main__":
    main(*sys.argv[1:3])
