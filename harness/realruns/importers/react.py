"""ReAct web-research runs that answered correctly: the successful runs the
Who&When corpus lacks (it holds failed runs only).

Two published shapes of the same ReAct loop (Thought, Action, Observation):

**FireAct** (`anchen1011/FireAct`, `trajs/hotpotqa_dev_*.json`): one JSON
object keyed by HotpotQA dev index; each run has `reward`, `em`, `f1`,
`gt`, `pred` and `traj`, a chat list (`user` question, then `assistant`
"Thought: ...\\nAction: search[...]" and `user` "Observation: ..."). The
search tool is Google through SerpAPI (the answer box or the first organic
snippet, `None` when neither exists).

**Reflexion** (`noahshinn/reflexion`,
`hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt`): a text log
whose `BEGIN CORRECT AGENTS` section holds blocks "Question: ...",
"Thought n:", "Action n: Search[...]|Lookup[...]|Finish[...]",
"Observation n: ..." ending in "Answer is CORRECT" and "Correct answer: ...".
The tools are ReAct's Wikipedia environment: Search opens a page (its first
paragraphs) or lists similar titles, Lookup returns the next sentence with a
keyword in that page.

Mapping (one rule each, here):

- a **round** is one tool action (`search`, `Search`, `Lookup`) and its
  observation, one call per round; `Finish[answer]` is the agent's answer,
  not a tool call: it ends the run and is kept in the header (`pred`);
- every call is a **read** (`kinds.classify_tool`: search and lookup have
  no side effects);
- a **status** is `kinds.text_status` of the observation, except the
  environment's own no-result replies (`EMPTY_OBSERVATIONS`,
  `EMPTY_PREFIXES`: empty) and its refusals (`ERROR_PREFIXES`: error).
  Reflexion's "Could not find [X]. Similar: [...]" is `ok`: it is a list of
  page titles, which the agent reads and picks its next search from, as a
  search engine's result list (with no title listed it is empty).
"""
from __future__ import annotations

import re
from typing import Any

from ..rounds import Round, RoundCall, RoundLog
from .kinds import EMPTY, ERROR, classify_tool, text_status

ACTION = re.compile(r"^Action(?: \d+)?:\s*(\w+)\[(.*)\]\s*$", re.M)
"""An action line: `Action: search[q]` (FireAct) or `Action 3: Lookup[k]`
(Reflexion). The first such line of a reply is the action; anything the
model wrote after it was never executed."""

FINISH = "finish"
"""The action that answers (`finish[...]`, `Finish[...]`): it ends the run, no round."""
ARG_NAMES = {"search": "query", "lookup": "keyword"}
"""Argument names of the tools: a search's query (FireAct's Google query or
Reflexion's Wikipedia entity), a lookup's keyword."""

EMPTY_OBSERVATIONS = frozenset({"None", "No Results", "No more results."})
"""FireAct's search found neither answer box nor snippet (`None`); Reflexion's
Lookup found no sentence with the keyword (`No Results`) or no further one."""
NOT_FOUND_NONE_SIMILAR = re.compile(r"^Could not find \[.*\]\. Similar: \[\]$", re.S)
"""Reflexion's Search found no page and no similar title: empty."""
EMPTY_PREFIXES = ("There were no results matching the query",)
"""Reflexion's environment finding no page at all: empty."""
ERROR_PREFIXES = ("Invalid Action", "Invalid action", "The last page Searched was not found")
"""Reflexion's environment refusing an action: a malformed one, or a Lookup
with no page open: error."""


def observation_status(text: str) -> str:
    """`empty`, `error` or `ok` for an observation (the module's status rule)."""
    t = text.strip()
    if t in EMPTY_OBSERVATIONS or t.startswith(EMPTY_PREFIXES) or NOT_FOUND_NONE_SIMILAR.match(t):
        return EMPTY
    if t.startswith(ERROR_PREFIXES):
        return ERROR
    return text_status(t)


def _call(tool: str, arg: str, observation: str) -> RoundCall:
    args = {ARG_NAMES.get(tool.lower(), "input"): arg}
    return RoundCall(tool, args, classify_tool(tool, args), observation_status(observation), observation)


def _strip_observation(text: str) -> str:
    return re.sub(r"^Observation(?: \d+)?:\s?", "", text.strip(), count=1)


def fireact_rounds(traj: list[dict]) -> tuple[list[Round], str | None]:
    """Rounds of one FireAct chat trajectory and the Finish answer (None: no Finish)."""
    rounds: list[Round] = []
    answer = None
    for i, m in enumerate(traj):
        if m.get("role") != "assistant":
            continue
        act = ACTION.search(m.get("content", ""))
        if not act:
            continue
        tool, arg = act.group(1), act.group(2)
        if tool.lower() == FINISH:
            answer = arg
            break
        nxt = traj[i + 1] if i + 1 < len(traj) else None
        if nxt is None or nxt.get("role") != "user":
            break                                  # the log ends on the action: it never ran
        rounds.append(Round(len(rounds) + 1, [_call(tool, arg, _strip_observation(nxt.get("content", "")))]))
    return rounds, answer


def import_fireact(data: dict[str, Any], ids: list[str], provenance: dict[str, str]) -> list[RoundLog]:
    """One log per requested run id (`<id>.jsonl`)."""
    logs = []
    for rid in ids:
        run = data[rid]
        traj = run["traj"]
        rounds, answer = fireact_rounds(traj)
        question = next((m["content"] for m in traj if m.get("role") == "user"), "")
        labels = {
            "source_format": "fireact-hotpotqa", **provenance, "run_id": rid,
            "question": question, "ground_truth": run.get("gt"), "pred": run.get("pred"), "finish": answer,
            "reward": run.get("reward"), "em": run.get("em"), "f1": run.get("f1"),
            "correct": bool(run.get("em")), "num_rounds": len(rounds),
        }
        logs.append(RoundLog(f"{rid}.jsonl", f"{provenance.get('path', '')}#{rid}", labels, rounds))
    return logs


STEP = re.compile(r"^(Thought|Action|Observation) (\d+): ?", re.M)
"""A numbered step of a Reflexion block; an observation runs to the next step (pages span lines)."""


def reflexion_correct_blocks(text: str, trial: int = 1) -> list[str]:
    """The question blocks of a trial's `BEGIN CORRECT AGENTS` section."""
    part = text.split("BEGIN TRIAL")[trial]
    correct = part.split("BEGIN CORRECT AGENTS", 1)[1].split("BEGIN INCORRECT AGENTS", 1)[0]
    return ["Question:" + b for b in correct.split("\nQuestion:")[1:]]


def reflexion_rounds(block: str) -> tuple[str, list[Round], str | None, str | None, bool]:
    """(question, rounds, Finish answer, correct answer, marked correct) of one block."""
    parts = STEP.split(block)
    question = parts[0].removeprefix("Question:").strip()
    texts = [(parts[i], int(parts[i + 1]), parts[i + 2].rstrip("\n")) for i in range(1, len(parts) - 2, 3)]
    rounds: list[Round] = []
    answer = truth = None
    marked = False
    for k, (what, n, body) in enumerate(texts):
        if what != "Action":
            continue
        act = ACTION.search(f"Action {n}: {body.splitlines()[0] if body else ''}")
        if not act:
            continue
        tool, arg = act.group(1), act.group(2)
        obs = next((b for w, m, b in texts[k + 1:] if w == "Observation" and m == n), None)
        if tool.lower() == FINISH:
            answer = arg
            if obs is not None:
                marked = obs.startswith("Answer is CORRECT")
                t = re.search(r"^Correct answer: (.*)$", obs, re.M)
                truth = t.group(1).strip() if t else None
            break
        if obs is None:
            break
        rounds.append(Round(len(rounds) + 1, [_call(tool, arg, obs.strip())]))
    return question, rounds, answer, truth, marked


def import_reflexion(text: str, picks: dict[str, int], provenance: dict[str, str], trial: int = 1) -> list[RoundLog]:
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


# ---- the committed corpus (traces/webruns/) ---------------------------------------------------------

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


def write_corpus(fireact_file: str, reflexion_file: str, out_dir: str) -> list[str]:
    """Convert the kept runs of both sources into `out_dir/<source>/*.jsonl`."""
    import json
    from pathlib import Path

    from .convert import render_round_log

    out = Path(out_dir)
    written = []
    data = json.loads(Path(fireact_file).read_text(encoding="utf-8"))
    ids = [rid for rid, run in data.items()
           if run.get("em") and len(fireact_rounds(run["traj"])[0]) >= MIN_ROUNDS]
    text = Path(reflexion_file).read_text(encoding="utf-8")
    blocks = reflexion_correct_blocks(text)
    picks = {f"c{i:02d}": i for i, b in enumerate(blocks, start=1) if len(reflexion_rounds(b)[1]) >= MIN_ROUNDS}
    for name, logs in (("fireact-hotpotqa", import_fireact(data, ids, FIREACT)),
                       ("reflexion-react-hotpotqa", import_reflexion(text, picks, REFLEXION))):
        (out / name).mkdir(parents=True, exist_ok=True)
        for log in logs:
            p = out / name / log.path
            p.write_text(render_round_log(log), encoding="utf-8")
            written.append(str(p))
    return written


if __name__ == "__main__":          # python -m harness.realruns.importers.react FIREACT.json REFLEXION.txt OUT
    import sys
    for w in write_corpus(*sys.argv[1:4]):
        print(w)
