"""ReAct web-research runs that answered correctly: the successful runs the
Who&When corpus lacks (it holds failed runs only).

Three published shapes of the same ReAct loop (Thought, Action, Observation):

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

**WebShop** (`ysymyth/ReAct`, `WebShop.ipynb`, the printed output of its
episode run): per episode `Action: a` / `Observation: o` steps (search,
click, think), the purchase answered by WebShop's score (`WEBSHOP_*`).

Mapping (one rule each, here):

- a **round** is one tool action (`search`, `Search`, `Lookup`) and its
  observation, one call per round; `Finish[answer]` is the agent's answer,
  not a tool call: it ends the run and is kept in the header (`pred`);
- every call is a **read** (`callkinds.classify_tool`: search and lookup have
  no side effects), except WebShop's purchase (`WEBSHOP_BUY`: a write, the
  run's last round);
- a **status** is `resultstatus.text_status` of the observation, except the
  environment's own no-result replies (`EMPTY_OBSERVATIONS`,
  `EMPTY_PREFIXES`: empty) and its refusals (`ERROR_PREFIXES`: error).
  Reflexion's "Could not find [X]. Similar: [...]" is `ok`: it is a list of
  page titles, which the agent reads and picks its next search from, as a
  search engine's result list (with no title listed it is empty).
"""
from __future__ import annotations

import re
from typing import Any

from ..roundlogs import Round, RoundCall, RoundLog
from .callkinds import WRITE, classify_tool
from .resultstatus import EMPTY, ERROR, OK, text_status

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



# ---- WebShop (ReAct's WebShop notebook) ----------------------------------------------------------

WEBSHOP_EPISODE = re.compile(r"^-----------------\n(\d+)\n", re.M)
"""The header `run_episodes` prints before each episode (its index) in
ReAct's `WebShop.ipynb` output; each step is printed as `Action: a` and
`Observation: o` (a page, several lines)."""
WEBSHOP_SCORE = re.compile(r"Your score \(min 0\.0, max 1\.0\): ([0-9.]+)")
"""WebShop's reward, shown as the observation of the purchase: 1.0 = every
attribute, option and the price limit met (the success mark)."""
WEBSHOP_NO_CALL = ("reset", "think[")
"""Steps that are no tool call: `reset` shows the instruction; `think[...]`
is the model's reasoning, answered by the harness's own `OK.`"""
WEBSHOP_BUY = "click[Buy Now]"
"""The purchase: a **write** (it commits the order and ends the episode);
it is the run's last round, as mini-swe-agent's submit is. Every other click
(a product, an option, Next, Back) only moves the session's page: a read."""
WEBSHOP_CELL = 7
"""The cell of `WebShop.ipynb` whose output holds the 500 episodes (`run_episodes(prompt1, 500)`)."""
WEBSHOP_INVALID = "Invalid action!"
"""WebShop rejected the click (no such element on the page): error."""
WEBSHOP_RUNNING_MEAN = re.compile(r"^(\d+) (\S+) (\S+) (\S+)\n-------------$", re.M)
"""The line `run_episodes` prints after each episode: episodes so far, their
mean reward, the share with reward 1 and the share that raised (`n r sr fr`),
under a rule of 13 dashes. It is no part of the episode's last observation."""


def webshop_episodes(text: str) -> dict[int, list[tuple[str, str]]]:
    """Episode index -> its (action, observation) steps, from the notebook's printed output."""
    parts = WEBSHOP_EPISODE.split(text)
    out = {}
    for i in range(1, len(parts) - 1, 2):
        steps = []
        body = parts[i + 1]
        mean = WEBSHOP_RUNNING_MEAN.search(body)
        for chunk in re.split(r"^Action: ", body[:mean.start()] if mean else body, flags=re.M)[1:]:
            action, _, obs = chunk.partition("\nObservation: ")
            steps.append((action.strip(), obs.strip()))
        out[int(parts[i])] = steps
    return out


def webshop_notebook_output(notebook: dict) -> str:
    """The printed output of the notebook's episode run (`WEBSHOP_CELL`)."""
    return "".join("".join(o.get("text", [])) for o in notebook["cells"][WEBSHOP_CELL]["outputs"])


def webshop_rounds(steps: list[tuple[str, str]]) -> tuple[str, list[Round], float | None]:
    """(instruction, rounds, score) of one episode; the purchase is the last round."""
    instruction = ""
    if steps and steps[0][0] == "reset":
        m = re.search(r"Instruction:\s*(.*?)\s*\[Search\]", steps[0][1], re.S)
        instruction = m.group(1).strip() if m else ""
    rounds: list[Round] = []
    score = None
    for action, obs in steps:
        if action.startswith(WEBSHOP_NO_CALL):
            continue
        act = re.match(r"^(\w+)\[(.*)\]$", action, re.S)
        if not act:
            continue
        tool, arg = act.group(1), act.group(2)
        if action == WEBSHOP_BUY and obs != WEBSHOP_INVALID:   # refused (not on a product page): the run goes on
            sc = WEBSHOP_SCORE.search(obs)
            score = float(sc.group(1)) if sc else None
            result = sc.group(0) if sc else obs
            call = RoundCall(tool, {"element": arg}, WRITE, OK if sc else ERROR, result)
            rounds.append(Round(len(rounds) + 1, [call]))
            break
        args = {"query": arg} if tool == "search" else {"element": arg}
        status = ERROR if obs == WEBSHOP_INVALID else observation_status(obs)
        kind = WRITE if action == WEBSHOP_BUY else classify_tool(tool, args)
        rounds.append(Round(len(rounds) + 1, [RoundCall(tool, args, kind, status, obs)]))
    return instruction, rounds, score


def import_webshop(text: str, ids: list[int], provenance: dict[str, str]) -> list[RoundLog]:
    """One log per episode index (`<index>.jsonl`)."""
    episodes = webshop_episodes(text)
    logs = []
    for idx in ids:
        instruction, rounds, score = webshop_rounds(episodes[idx])
        labels = {"source_format": "react-webshop", **provenance, "episode": idx, "instruction": instruction,
                  "score": score, "correct": score == 1.0, "num_rounds": len(rounds)}
        logs.append(RoundLog(f"{idx}.jsonl", f"{provenance.get('path', '')}#episode{idx}", labels, rounds))
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

WEBSHOP = {"repo": "ysymyth/ReAct", "commit": "6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9",
           "path": "WebShop.ipynb (output of cell 7, `res1 = run_episodes(prompt1, 500)`)",
           "license": "MIT", "agent": "ReAct (text-davinci-002, temperature 0) on WebShop, episodes fixed_0..499",
           "tools": "search[query], click[element] on the WebShop site (page text as observation)"}
"""The ReAct WebShop notebook converted (provenance kept in every log's header)."""
WEBSHOP_MIN_ROUNDS = 6
"""WebShop episodes kept: score 1.0 and at least six rounds, the purchase
included. Most successful episodes take three to five (search, product, an
option or two, buy), too few for a no-progress stop before the purchase."""


def write_corpus(fireact_file: str, reflexion_file: str, out_dir: str, webshop_file: str | None = None) -> list[str]:
    """Convert the kept runs of each source into `out_dir/<source>/*.jsonl`.
    `webshop_file` is the printed output of ReAct's WebShop notebook (cell 7)."""
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
    sources = [("fireact-hotpotqa", import_fireact(data, ids, FIREACT)),
               ("reflexion-react-hotpotqa", import_reflexion(text, picks, REFLEXION))]
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


if __name__ == "__main__":   # python -m harness.realruns.importers.react FIREACT.json REFLEXION.txt OUT [WEBSHOP.txt]
    import sys
    for w in write_corpus(*sys.argv[1:5]):
        print(w)
