"""ReAct's WebShop notebook (`ysymyth/ReAct`, `WebShop.ipynb`) as an import
format, `react-webshop`: one round log per printed episode, with its outcome.

The notebook is JSON (nbformat 4). One code cell runs `run_episodes`, whose
printed output (stream outputs, `text` a list of lines) holds every episode:
a header (`-----------------`, the index), the steps (`Action: ...`,
`Observation: ...`) and then the running line `n r sr fr` (`react.
WEBSHOP_RUNNING_MEAN`). The steps become rounds as in `react.webshop_rounds`
(search and clicks are reads, an accepted `click[Buy Now]` the last round and
a write; `think[...]` and `reset` are no rounds).

Outcome rule (the notebook's own verdict: `sr` counts episodes whose reward
`== 1`):

- the purchase printed WebShop's score (`Your score (min 0.0, max 1.0): s`):
  success when s == 1.0, else failure (a partial match is a failure); field
  `score`, raw s;
- no score was printed (no purchase in the 15 steps `webshop_run` allows, it
  returns 0; or a purchase page with no text): the reward `webshop_run`
  returned, recovered from two running lines (n * r - (n - 1) * r'), and
  success when the running count of reward-1 episodes rose; field `reward`;
- neither (an excerpt without the previous running line): unknown.

The task is the WebShop instruction `fixed_<index>`: `task_id` is
`webshop:<index>`, one run per task.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..outcomes import outcome_label
from ..roundlogs import RoundLog
from .rawfiles import Source
from .registry import Format
from .react import WEBSHOP_EPISODE, WEBSHOP_RUNNING_MEAN, webshop_episodes, webshop_rounds

FORMAT = "react-webshop"
"""The format's name (`convert.CONVERTERS`, `rawfiles.FORMATS`) and its logs' `source_format`,
the same as the 17 successful episodes under traces/webruns/ carry."""
EPISODE_START = "-----------------\n"
"""The first line of every episode header: detection looks for it followed by an index."""
PRECISION = 9
"""Decimals a reward recovered from two running means keeps: the means are
printed in full, so the difference is exact to about 1e-12."""


def _cell_text(cell: Any) -> str:
    if not isinstance(cell, dict) or not isinstance(cell.get("outputs"), list):
        return ""
    parts = []
    for out in cell["outputs"]:
        text = out.get("text") if isinstance(out, dict) else None
        parts.append("".join(t for t in text if isinstance(t, str)) if isinstance(text, list)
                     else text if isinstance(text, str) else "")
    return "".join(parts)


def episode_cell(data: Any) -> int | None:
    """The index of the first cell whose printed output holds WebShop episodes (None: none)."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None
    for i, cell in enumerate(data["cells"]):
        text = _cell_text(cell)
        if EPISODE_START in text and WEBSHOP_EPISODE.search(text) and "\nAction: " in text:
            return i
    return None


def is_webshop_notebook(data: Any) -> bool:
    """A Jupyter notebook (an object with `cells`) one of whose cells printed WebShop episodes."""
    return episode_cell(data) is not None


def running_lines(text: str) -> dict[int, tuple[float, float]]:
    """Episodes so far -> (mean reward, share with reward 1), from the running lines."""
    return {int(m.group(1)): (float(m.group(2)), float(m.group(3))) for m in WEBSHOP_RUNNING_MEAN.finditer(text)}


def episode_outcome(index: int, score: float | None, lines: dict[int, tuple[float, float]],
                    where: str) -> dict[str, Any]:
    """The outcome label of episode `index` (the module's outcome rule)."""
    if score is not None:
        return outcome_label("success" if score == 1.0 else "failure", "score", score, where)
    n = index + 1
    prev = (0.0, 0.0) if index == 0 else lines.get(index)
    if n not in lines or prev is None:
        return outcome_label("unknown", "reward", None, where)
    (mean, share), (pmean, pshare) = lines[n], prev
    reward = round(mean * n - pmean * index, PRECISION) + 0.0          # + 0.0: no -0.0
    rose = round(share * n) - round(pshare * index)
    return outcome_label("success" if rose == 1 else "failure", "reward", reward,
                         f"{where} (running lines {index} and {n})")


def import_webshop_notebook(data: Any, path: str | Path) -> list[RoundLog]:
    """One log per episode (`<index>.jsonl`), every episode printed, in order."""
    src = Source(path, FORMAT)
    if not isinstance(data, dict):
        src.fail(f"wrong type {type(data).__name__}", key="(top level)", expected="a Jupyter notebook object")
    cells = src.get(data, "cells", list, "", "the notebook's list of cells")
    cell = episode_cell(data)
    if cell is None:
        src.fail("no cell printed WebShop episodes", key=f"cells[0..{len(cells) - 1}].outputs",
                 expected="a cell whose stream output holds '-----------------', an episode index and "
                          "'Action: ...' / 'Observation: ...' steps")
    text = _cell_text(cells[cell])
    lines = running_lines(text)
    where = f"{path} cells[{cell}].outputs"
    logs = []
    for index, steps in webshop_episodes(text).items():
        instruction, rounds, score = webshop_rounds(steps)
        name = str(index)
        labels = {"source_format": FORMAT, "source_file": str(path), "instance_id": name,
                  "task_id": f"webshop:{index}", "episode": index, "instruction": instruction,
                  "score": score, "num_rounds": len(rounds),
                  "outcome": episode_outcome(index, score, lines, where)}
        logs.append(RoundLog(f"{name}.jsonl", f"{path}#episode{index}", labels, rounds))
    if not logs:
        src.fail("the episode cell holds no episode", key=f"cells[{cell}].outputs",
                 expected="'-----------------' and an episode index on lines of their own")
    return logs


FORMATS = (Format(FORMAT, is_webshop_notebook, import_webshop_notebook, many_runs=True),)
"""The format this module imports (registry.py): one log per episode."""
