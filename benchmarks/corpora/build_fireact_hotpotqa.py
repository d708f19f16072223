"""Build traces/outcomes/fireact-hotpotqa/: FireAct's HotpotQA runs, each
with its outcome (`em`), sampled by question over FireAct's three models.

    git -C MIRROR archive 94c6189f04b10fccae6bcd97a4632d6119266899 trajs | tar -x -C RAW
    python benchmarks/corpora/build_fireact_hotpotqa.py RAW/trajs traces/outcomes/fireact-hotpotqa

(MIRROR: a clone of https://github.com/anchen1011/FireAct.) The files are
converted by the `fireact` importer (`harness/realruns/importers/react.py`,
which states the round, status and outcome rules); this script only samples,
adds provenance and writes `<model>-<dev index>.jsonl.gz`. The same inputs
give the same bytes (fixed seed, gzip without a timestamp).

Sampling: every HotpotQA question (dev index, the `task_id`) that has at
least one run with a tool round is a candidate; the questions are shuffled
with `SEED` and each gets ONE run, drawn with the same generator from its
runs in the three files, until `TARGET` runs. Runs already committed under
traces/webruns/fireact-hotpotqa/ (the same file and dev index) are not
candidates, so no run is counted twice.
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
from harness.realruns.importers.react import import_fireact  # noqa: E402

REPO = {"repo": "anchen1011/FireAct", "commit": "94c6189f04b10fccae6bcd97a4632d6119266899", "license": "MIT",
        "tools": "search = Google via SerpAPI (answer box or first organic snippet, None when neither)"}
"""Provenance shared by every run (the repository at the commit fetched)."""
MODELS = {
    "hotpotqa_dev_0_500_ft_gpt-3.5-turbo-0613_princeton-nlp__7woQRsdi_0.0_2023-09-21-16-19-51.json":
        ("gpt35ft", "FireAct: gpt-3.5-turbo-0613 fine-tuned on FireAct's trajectories, ReAct, temperature 0"),
    "hotpotqa_dev_0_500_llama_models_lora_llama-2-13b-d_1000_0.7_2023-09-18-13-40-08.json":
        ("llama13b", "FireAct: Llama-2-13B fine-tuned with LoRA, ReAct, temperature 0.7"),
    "hotpotqa_dev_0_500_llama_models_lora_llama-2-7b-d_1000_0.7_2023-09-19-00-49-36.json":
        ("llama7b", "FireAct: Llama-2-7B fine-tuned with LoRA, ReAct, temperature 0.7"),
}
"""The trajs files taken: file name -> (the name's prefix in the corpus, the agent)."""
SEED = 41
"""The sampling seed (issue 41)."""
TARGET = 500
"""Runs taken, at most one a question."""
WEBRUNS = ROOT / "traces" / "webruns" / "fireact-hotpotqa"
"""Runs already committed (the fine-tuned GPT file's, by dev index): skipped."""
WEBRUNS_FILE = "hotpotqa_dev_0_500_ft_gpt-3.5-turbo-0613_princeton-nlp__7woQRsdi_0.0_2023-09-21-16-19-51.json"
"""The file traces/webruns/fireact-hotpotqa/ was converted from."""


def gz(text: str) -> bytes:
    """The text gzip-compressed with no timestamp and no file name: the same text, the same bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def build(trajs: Path, out: Path) -> dict:
    """Sample, convert and write; returns the figures the licence note reports."""
    committed = {p.name.removesuffix(".jsonl") for p in WEBRUNS.glob("*.jsonl")}
    by_task: dict[str, list] = {}
    skipped = 0
    for name, (prefix, agent) in MODELS.items():
        path = trajs / name
        for log in import_fireact(json.loads(path.read_text(encoding="utf-8")), path):
            if name == WEBRUNS_FILE and log.labels["run_id"] in committed:
                skipped += 1
                continue
            if not log.rounds:
                continue
            log.labels.update({**REPO, "path": f"trajs/{name}", "agent": agent, "source_file": f"trajs/{name}"})
            log.labels["outcome"]["from"] = f"trajs/{name}#{log.labels['run_id']}"
            log.path = f"{prefix}-{log.labels['run_id']}.jsonl"
            log.source = f"{REPO['repo']}@{REPO['commit'][:12]}:trajs/{name}#{log.labels['run_id']}"
            by_task.setdefault(log.labels["task_id"], []).append(log)
    rng = random.Random(SEED)
    tasks = sorted(by_task)
    rng.shuffle(tasks)
    picked = [rng.choice(by_task[t]) for t in tasks[:TARGET]]
    out.mkdir(parents=True, exist_ok=True)
    for log in picked:
        (out / f"{log.path}.gz").write_bytes(gz(render_round_log(log)))
    return {"runs": len(picked), "tasks": len({log.labels["task_id"] for log in picked}),
            "candidates": sum(map(len, by_task.values())), "skipped_webruns": skipped}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]))))
