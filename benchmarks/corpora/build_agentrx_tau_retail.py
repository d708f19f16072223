"""Build traces/outcomes/agentrx-tau-retail/ from AgentRx's tau-bench retail runs.

    C=f228165bfec60a801fd5fedd9d8ffe0f9de0c69d   # see COMMIT below
    git -C MIRROR show $C:data/tau_retail/tau_dataset_full.json > /tmp/tau_dataset_full.json
    git -C MIRROR show $C:data/tau_retail/tau_dataset_failed.json > /tmp/tau_dataset_failed.json
    python benchmarks/corpora/build_agentrx_tau_retail.py /tmp/tau_dataset_full.json /tmp/tau_dataset_failed.json

(MIRROR: a clone of https://github.com/microsoft/AgentRx.) Only
`data/tau_retail/` is read: the repository's Magentic-One runs are
Who&When's and are never taken. `tau_dataset_full.json` holds one run of
each of tasks 0-99; `tau_dataset_failed.json` holds 29 failed runs, 27 of
them the same runs verbatim (checked here) and two more (tasks 104, 105):
102 runs, one per task, all taken (no sampling, so no seed). Conversion is
the `tau-bench` import format (`harness/realruns/importers/chat.py`: rounds,
user turns, outcome reward == 1); this script sets `task_id` to
`tau-retail:<task>`, adds the provenance and writes `<task>-<trial>.jsonl.gz`.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.corpora.gzlogs import write_gz_logs  # noqa: E402
from harness.realruns.importers.chat import import_tau_bench  # noqa: E402

COMMIT = "f228165bfec60a801fd5fedd9d8ffe0f9de0c69d"
FILES = {"data/tau_retail/tau_dataset_full.json": "cbc4f9cec3de97e4ecf3908005ad62d4e309c767e0afc23a898425f5d56e6a33",
         "data/tau_retail/tau_dataset_failed.json": "17f8b3356d1124274cc7ed0215b5ff696970073dbed57394c60e775d5f85d717"}
"""Repository path -> sha256 of the file at COMMIT."""
PROVENANCE = {"repo": "microsoft/AgentRx", "commit": COMMIT, "license": "MIT",
              "agent": "tau-bench retail tool-calling agent (function calls; the model is not named in the "
                       "repository), user simulated by an LLM",
              "tools": "tau-bench retail API: find_user_id_*, get_*_details, list_all_product_types, "
                       "cancel/modify/return/exchange_*, transfer_to_human_agents, think, calculate"}
OUT = ROOT / "traces" / "outcomes" / "agentrx-tau-retail"


def build(full: Path, failed: Path, out: Path = OUT) -> dict[str, int]:
    logs = []
    trajs: dict[object, str] = {}     # task -> its run's chat, as text: a repeated run must be the same run
    for path, repo_path in ((full, "data/tau_retail/tau_dataset_full.json"),
                            (failed, "data/tau_retail/tau_dataset_failed.json")):
        raw = path.read_bytes()
        if hashlib.sha256(raw).hexdigest() != FILES[repo_path]:
            raise SystemExit(f"{path}: not {repo_path} of {PROVENANCE['repo']}@{COMMIT}")
        runs = json.loads(raw)
        chats = {run["task_id"]: json.dumps(run["traj"]) for run in runs}
        for log in import_tau_bench(runs, repo_path):
            task = log.labels["task_id"]
            if task in trajs:       # the failed file repeats the full file's runs: check, keep the first
                if trajs[task] != chats[task]:
                    raise SystemExit(f"task {task}: two different runs in {full} and {failed}")
                continue
            trajs[task] = chats[task]
            log.labels.update(PROVENANCE, path=repo_path, task_id=f"tau-retail:{task}")
            logs.append(log)
    kept = [log for log in logs if log.rounds]
    write_gz_logs(kept, out)
    return {"runs": len(logs), "written": len(kept)}


if __name__ == "__main__":
    print(build(Path(sys.argv[1]), Path(sys.argv[2])))
