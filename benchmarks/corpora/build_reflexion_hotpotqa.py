"""Build traces/outcomes/reflexion-hotpotqa/: Reflexion's ReAct runs on 100
HotpotQA questions, correct, incorrect and halted, each with its outcome.

    git -C MIRROR show 218cf0ef1df84b05ce379dd4a8e47f17766733a0:hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt > base.txt
    git -C MIRROR show 218cf0ef1df84b05ce379dd4a8e47f17766733a0:hotpotqa_runs/root/ReAct/reflexion/100_questions_7_trials.txt > reflexion.txt
    git -C FIREACT show 94c6189f04b10fccae6bcd97a4632d6119266899:data/hotpotqa/dev.json > dev.json
    python benchmarks/corpora/build_reflexion_hotpotqa.py base.txt reflexion.txt dev.json traces/outcomes/reflexion-hotpotqa

(MIRROR: a clone of https://github.com/noahshinn/reflexion; FIREACT: of
https://github.com/anchen1011/FireAct, whose `data/hotpotqa/dev.json` is
HotpotQA's dev set in the order FireAct's keys index, so that a question's
runs in both corpora share `hotpotqa:dev-<index>`.) The logs are converted
by the `reflexion` importer (`harness/realruns/importers/react.py`, which
states the round, status and outcome rules and which blocks are runs); this
script drops repeats across the two logs and the runs already committed,
samples, adds provenance and writes `<log>-t<trial>-<c|i|h><n>.jsonl.gz`.
The same inputs give the same bytes (fixed seed, gzip without a timestamp).

Which runs: the base agent's log (5 trials, no reflection) and the
Reflexion agent's (7 trials; `100_questions_5_trials.txt` is its first five
and `100_questions_trials_6_to_7.txt` its last two, so neither is read). A
block of the Reflexion log identical to one of the base log (trial 1, before
any reflection) is the same run and counted once, as the base log's. The
base log's trial 1 correct blocks committed under
traces/webruns/reflexion-react-hotpotqa/ (`cNN`) are skipped.

Sampling: by question (`task_id`): each question keeps at most
`PER_TASK` of its runs, drawn with `SEED`; a question with more runs than
that (the ones Reflexion retried most) loses the rest.
"""
from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository, put first on the path so its harness is the one imported."""
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.realruns.importers.convert import render_round_log  # noqa: E402
from harness.realruns.importers.rawfiles import TextLog  # noqa: E402
from harness.realruns.importers.react import (reflexion_blocks, reflexion_log,  # noqa: E402
                                              reflexion_runs)

REPO = {"repo": "noahshinn/reflexion", "commit": "218cf0ef1df84b05ce379dd4a8e47f17766733a0", "license": "MIT",
        "tools": "Search[entity] / Lookup[keyword] in ReAct's Wikipedia environment; at most 6 steps"}
"""Provenance shared by every run (the repository at the commit fetched)."""
LOGS = {
    "base": ("hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt",
             "Reflexion's ReAct agent without reflection (text-davinci-003, temperature 0), 5 trials"),
    "reflexion": ("hotpotqa_runs/root/ReAct/reflexion/100_questions_7_trials.txt",
                  "Reflexion: ReAct agent with self-reflection after each failed trial "
                  "(text-davinci-003, temperature 0), 7 trials"),
}
"""The two logs, in the order read: name prefix -> (path in the repository, agent)."""
SEED = 41
"""The sampling seed (issue 41)."""
PER_TASK = 7
"""Runs kept per question at most (a question has 1 to 11 runs)."""
WEBRUNS = ROOT / "traces" / "webruns" / "reflexion-react-hotpotqa"
"""Runs already committed: the base log's trial 1 correct blocks `cNN`, skipped."""


def gz(text: str) -> bytes:
    """The text gzip-compressed with no timestamp and no file name: the same text, the same bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def dev_index(dev_json: Path) -> dict[str, int]:
    """HotpotQA dev question (whitespace collapsed) -> its index."""
    rows = json.loads(dev_json.read_text(encoding="utf-8"))
    return {" ".join(r["question"].split()): i for i, r in enumerate(rows)}


def build(base: Path, reflexion: Path, dev_json: Path, out: Path) -> dict:
    """Convert, drop repeats and committed runs, sample, write; returns the figures the licence note reports."""
    ids = dev_index(dev_json)
    committed = {int(p.name[1:3]) for p in WEBRUNS.glob("c*.jsonl")}
    seen: set[str] = set()
    by_task: dict[str, list] = {}
    counts = {"runs_in_logs": 0, "same_as_base": 0, "skipped_webruns": 0, "no_round": 0}
    for (prefix, (repo_path, agent)), path in zip(LOGS.items(), (base, reflexion)):
        log_text = TextLog(path, path.read_text(encoding="utf-8"))
        for block in reflexion_runs(reflexion_blocks(log_text.text)):
            counts["runs_in_logs"] += 1
            if block.text in seen:
                counts["same_as_base"] += 1
                continue
            seen.add(block.text)
            if prefix == "base" and block.trial == 1 and block.section == "CORRECT" and block.index in committed:
                counts["skipped_webruns"] += 1
                continue
            log = reflexion_log(block, repo_path, ids)
            if not log.rounds:
                counts["no_round"] += 1
                continue
            if not log.labels["task_id"].startswith("hotpotqa:dev-"):
                raise SystemExit(f"{path}: {block.name}: question not in HotpotQA dev: {log.labels['question']!r}")
            log.labels.update({**REPO, "path": repo_path, "agent": agent})
            log.path = f"{prefix}-{log.path}"
            log.source = f"{REPO['repo']}@{REPO['commit'][:12]}:{log.source}"
            by_task.setdefault(log.labels["task_id"], []).append(log)
    rng = random.Random(SEED)
    picked = []
    for task in sorted(by_task):
        runs = by_task[task]
        picked += runs if len(runs) <= PER_TASK else rng.sample(runs, PER_TASK)
    out.mkdir(parents=True, exist_ok=True)
    for log in picked:
        (out / f"{log.path}.gz").write_bytes(gz(render_round_log(log)))
    return {**counts, "candidates": sum(map(len, by_task.values())), "runs": len(picked),
            "tasks": len({log.labels["task_id"] for log in picked})}


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    print(json.dumps(build(*map(Path, sys.argv[1:5]))))
