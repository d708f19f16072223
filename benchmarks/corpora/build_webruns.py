"""Build traces/webruns/: the successful ReAct web runs (FireAct, Reflexion,
ReAct's WebShop notebook) that fill the gap Who&When leaves (failed runs
only). The committed files are reproduced byte for byte by

    python benchmarks/corpora/build_webruns.py FIREACT.json REFLEXION.txt traces/webruns WebShop.ipynb

with the three raw files of `traces/webruns/LICENSE-NOTE.md` (FireAct's
`trajs/hotpotqa_dev_0_500_ft_gpt-3.5-turbo-0613_*.json`, Reflexion's
`hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt`, ReAct's
`WebShop.ipynb`). The rounds are the importers' (`harness/realruns/importers/react.py`);
the headers keep the labels this corpus was built with (no `task_id` and no
`outcome` entry: `correct`, `reward` and `score` carry the outcome), so that
its labels and its split stay as they were.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository, put first on the path so its harness is the one imported."""
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.realruns.importers.convert import render_round_log  # noqa: E402
from harness.realruns.importers.react import (fireact_rounds, fireact_steps, import_webshop,  # noqa: E402
                                              reflexion_correct_blocks, reflexion_rounds, webshop_episodes,
                                              webshop_notebook_output, webshop_rounds)
from harness.realruns.roundlogs import RoundLog  # noqa: E402

MIN_ROUNDS = 3
"""Runs kept: marked correct and at least this many tool rounds. Shorter runs
(most of them: compare two birth dates, two searches) cannot be stopped
early by a no-progress rule of patience 2 or more, so they test nothing."""

FIREACT = {"repo": "anchen1011/FireAct", "commit": "94c6189f04b10fccae6bcd97a4632d6119266899",
           "path": "trajs/hotpotqa_dev_0_500_ft_gpt-3.5-turbo-0613_princeton-nlp__7woQRsdi_0.0_2023-09-21-16-19-51.json",
           "license": "MIT", "agent": "FireAct: gpt-3.5-turbo-0613 fine-tuned, ReAct, temperature 0",
           "tools": "search = Google via SerpAPI (answer box or first organic snippet)"}
"""The FireAct file converted (provenance kept in every log's header)."""
REFLEXION = {"repo": "noahshinn/reflexion", "commit": "218cf0ef1df84b05ce379dd4a8e47f17766733a0",
             "path": "hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt",
             "license": "MIT", "agent": "Reflexion's base ReAct agent (no reflection), HotpotQA",
             "tools": "Search/Lookup = ReAct's Wikipedia environment"}
"""The Reflexion file converted (provenance kept in every log's header)."""

WEBSHOP = {"repo": "ysymyth/ReAct", "commit": "6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9",
           "path": "WebShop.ipynb (output of cell 7, `res1 = run_episodes(prompt1, 500)`)",
           "license": "MIT", "agent": "ReAct (text-davinci-002, temperature 0) on WebShop, episodes fixed_0..499",
           "tools": "search[query], click[element] on the WebShop site (page text as observation)"}
"""The ReAct WebShop notebook converted (provenance kept in every log's header)."""
WEBSHOP_MIN_ROUNDS = 6
"""WebShop episodes kept: score 1.0 and at least six rounds, the purchase
included. Most successful episodes take three to five (search, product, an
option or two, buy), too few for a no-progress stop before the purchase."""


def fireact_logs(data: dict, ids: list[str], provenance: dict[str, str]) -> list[RoundLog]:
    """One log per run id (`<id>.jsonl`), with this corpus's header."""
    logs = []
    for rid in ids:
        run = data[rid]
        rounds, answer = fireact_rounds(run["traj"])
        labels = {
            "source_format": "fireact-hotpotqa", **provenance, "run_id": rid,
            "question": fireact_steps(run["traj"])[0], "ground_truth": run.get("gt"), "pred": run.get("pred"),
            "finish": answer, "reward": run.get("reward"), "em": run.get("em"), "f1": run.get("f1"),
            "correct": bool(run.get("em")), "num_rounds": len(rounds),
        }
        logs.append(RoundLog(f"{rid}.jsonl", f"{provenance.get('path', '')}#{rid}", labels, rounds))
    return logs


def reflexion_logs(text: str, picks: dict[str, int], provenance: dict[str, str], trial: int = 1) -> list[RoundLog]:
    """One log per pick (`<name>.jsonl` for the pick's 1-based block index in the trial's correct agents)."""
    blocks = reflexion_correct_blocks(text, trial)
    logs = []
    for name, idx in picks.items():
        question, rounds, answer, truth, marked = reflexion_rounds(blocks[idx - 1])
        labels = {
            "source_format": "reflexion-react-hotpotqa", **provenance, "trial": trial, "correct_block": idx,
            "question": question, "ground_truth": truth, "pred": answer, "correct": marked,
            "num_rounds": len(rounds),
        }
        logs.append(RoundLog(f"{name}.jsonl", f"{provenance.get('path', '')}#trial{trial}-correct{idx}", labels,
                             rounds))
    return logs


def write_corpus(fireact_file: str, reflexion_file: str, out_dir: str, webshop_file: str | None = None) -> list[str]:
    """Convert the kept runs of each source into `out_dir/<source>/*.jsonl`.
    `webshop_file` is ReAct's `WebShop.ipynb` (or the printed output of its cell 7)."""
    out = Path(out_dir)
    written = []
    data = json.loads(Path(fireact_file).read_text(encoding="utf-8"))
    ids = [rid for rid, run in data.items()
           if run.get("em") and len(fireact_rounds(run["traj"])[0]) >= MIN_ROUNDS]
    text = Path(reflexion_file).read_text(encoding="utf-8")
    blocks = reflexion_correct_blocks(text)
    picks = {f"c{i:02d}": i for i, b in enumerate(blocks, start=1) if len(reflexion_rounds(b)[1]) >= MIN_ROUNDS}
    sources = [("fireact-hotpotqa", fireact_logs(data, ids, FIREACT)),
               ("reflexion-react-hotpotqa", reflexion_logs(text, picks, REFLEXION))]
    if webshop_file:
        shop = Path(webshop_file).read_text(encoding="utf-8")
        if webshop_file.endswith(".ipynb"):
            shop = webshop_notebook_output(json.loads(shop))
        episodes = webshop_episodes(shop)
        keep = [i for i, steps in sorted(episodes.items())
                if (r := webshop_rounds(steps))[2] == 1.0 and len(r[1]) >= WEBSHOP_MIN_ROUNDS]
        sources.append(("react-webshop", import_webshop(shop, keep, WEBSHOP)))
    for name, logs in sources:
        (out / name).mkdir(parents=True, exist_ok=True)
        for log in logs:
            p = out / name / log.path
            p.write_text(render_round_log(log), encoding="utf-8")
            written.append(str(p))
    return written


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    for w in write_corpus(*sys.argv[1:5]):
        print(w)
