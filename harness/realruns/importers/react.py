"""ReAct web-research runs: FireAct's and Reflexion's HotpotQA runs (two
registered formats, `fireact` and `reflexion`) and ReAct's WebShop episodes.

Three published shapes of the same ReAct loop (Thought, Action, Observation):

**FireAct** (`anchen1011/FireAct`, `trajs/hotpotqa_dev_*.json`; format
`fireact`): one JSON object keyed by HotpotQA dev index; each run has
`reward`, `em`, `f1`, `gt`, `pred` and `traj`. The fine-tuned GPT file's
`traj` is a chat list (`user` question, then `assistant` "Thought: ...\\nAction:
search[...]" and `user` "Observation: ..."); the Llama files' `traj` is the
Alpaca prompt's text ("### Instruction:" question, "### Response:" then
"Thought: / Action: / Observation:" lines). The search tool is Google through
SerpAPI (the answer box or the first organic snippet, `None` when neither
exists). FireAct records only runs that answered (`finish[...]`).

**Reflexion** (`noahshinn/reflexion`, `hotpotqa_runs/root/ReAct/*/100_questions_*_trials.txt`;
format `reflexion`): a text log of trials; each trial lists every agent in
one of three sections, `BEGIN CORRECT AGENTS`, `BEGIN INCORRECT AGENTS`
(answered wrongly) and `BEGIN HALTED AGENTS` (ran out of steps without an
answer), a block each: "Question: ..." (in later trials of the Reflexion
agent followed by "Reflections:" from the failed attempts), "Thought n:",
"Action n: Search[...]|Lookup[...]|Finish[...]", "Observation n: ...", and
"Correct answer: ...". The tools are ReAct's Wikipedia environment: Search
opens a page (its first paragraphs) or lists similar titles, Lookup returns
the next sentence with a keyword in that page.

**WebShop** (`ysymyth/ReAct`, `WebShop.ipynb`, the printed output of its
episode run): per episode `Action: a` / `Observation: o` steps (search,
click, think), the purchase answered by WebShop's score (`WEBSHOP_*`).

Mapping (one rule each, here):

- a **round** is one tool action (`search`, `Search`, `Lookup`) and its
  observation, one call per round; `finish[answer]` is the agent's answer,
  not a tool call: it ends the run and is kept in the header (`finish`);
- every call is a **read** (`callkinds.classify_tool`: search and lookup have
  no side effects), except WebShop's purchase (`WEBSHOP_BUY`: a write, the
  run's last round);
- a **status** is `resultstatus.text_status` of the observation, except the
  environment's own no-result replies (`EMPTY_OBSERVATIONS`,
  `EMPTY_PREFIXES`: empty) and its refusals and failures (`ERROR_PREFIXES`,
  `FIREACT_TOOL_ERROR`: error).
  Reflexion's "Could not find [X]. Similar: [...]" is `ok`: it is a list of
  page titles, which the agent reads and picks its next search from, as a
  search engine's result list (with no title listed it is empty);
- the **task** (`task_id`) is the HotpotQA question, `hotpotqa:dev-<index>`
  by its index in HotpotQA's dev set (FireAct's keys are those indices; a
  Reflexion log names only the question, so its index is looked up by the
  caller, `question_ids`), else `hotpotqa:<question>`: runs of one question
  share it across both sources;
- the **outcome** (`outcomes.outcome_label`): FireAct's `em` (true: success).
  `em` is the run's own verdict (FireAct's `reward` is `em`, in every run of
  the three files); `f1` is token-overlap partial credit with no threshold
  of its own, and an answer with half the right words is not the answer.
  Reflexion's section: correct is success, incorrect and halted are failures
  (the raw value keeps which).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..outcomes import outcome_label
from ..roundlogs import Round, RoundCall, RoundLog
from .callkinds import WRITE, classify_tool
from .rawfiles import Source, TextLog, output_stem
from .registry import Format
from .resultstatus import EMPTY, ERROR, OK, text_status

ACTION = re.compile(r"^Action(?: \d+)?:\s*(\w+)\[(.*)\]\s*$", re.M)
"""A Reflexion action line (`Action 3: Lookup[k]`); an action that does not
match is the environment's "Invalid Action" and still a round."""

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
ERROR_PREFIXES = ("Invalid Action", "Invalid action", "The last page Searched was not found",
                  "Could not find that page, please try again.")
"""Reflexion's environment refusing an action (a malformed one, or a Lookup
with no page open) or failing it (the Wikipedia fetch raised): error."""
FIREACT_TOOL_ERROR = re.compile(r"^\(.*\) generated an exception: ", re.S)
"""FireAct's harness reporting a tool that raised (`('click', 'x') generated
an exception: Unknown tool name: click`): error."""


def observation_status(text: str) -> str:
    """`empty`, `error` or `ok` for an observation (the module's status rule)."""
    t = text.strip()
    if t in EMPTY_OBSERVATIONS or t.startswith(EMPTY_PREFIXES) or NOT_FOUND_NONE_SIMILAR.match(t):
        return EMPTY
    if t.startswith(ERROR_PREFIXES) or FIREACT_TOOL_ERROR.match(t):
        return ERROR
    return text_status(t)


def _call(tool: str, arg: str, observation: str) -> RoundCall:
    args = {ARG_NAMES.get(tool.lower(), "input"): arg}
    return RoundCall(tool, args, classify_tool(tool, args), observation_status(observation), observation)


def _strip_observation(text: str) -> str:
    return re.sub(r"^Observation(?: \d+)?:\s?", "", text.strip(), count=1)


def hotpotqa_task(index: int | str | None, question: str) -> str:
    """A run's `task_id`: `hotpotqa:dev-<index>` when the dev index is known, else `hotpotqa:<question>`."""
    return f"hotpotqa:dev-{index}" if index is not None else "hotpotqa:" + " ".join(question.split())


# ---- FireAct -----------------------------------------------------------------------------------------

FIREACT_ACTION = "\nAction: "
"""FireAct's own action parse (`generation.py`), repeated here so a round
holds the call that ran: the action is the text after the reply's first
"\\nAction: " (or after a leading "Action: ") up to the next one; its tool is
what precedes the first `[`, its argument what follows it up to the next `[`,
less its last character (the `]`). A reply with two actions ran the first;
an unclosed `search[q` sent `q` less its last letter, and that is the query
kept. An action with no `[` never ran (FireAct skipped it): no round."""
FIREACT_PROMPT = re.compile(r"### Instruction:\n(.*?)\n\n### Response:\n", re.S)
"""The Llama files' Alpaca prompt: the question, then the run's text."""
FIREACT_STEP = re.compile(r"^Action: (.*?)\nObservation: (.*?)(?=\nThought: |\nAction: |\Z)", re.S | re.M)
"""A step of a Llama file's text: the action as FireAct wrote it into the
prompt, and the observation up to the next thought."""
FIREACT_FILE = re.compile(r"^(?P<task>[a-z]+)_(?P<split>dev|test|train)_")
"""A trajs file's name: `<task>_<split>_<start>_<end>_<model>...`; HotpotQA's
dev runs are keyed by their dev index (the task's id)."""


def fireact_action(reply: str) -> str | None:
    """The action of a FireAct reply as FireAct parsed it (`FIREACT_ACTION`); None: none."""
    text = reply.strip()
    if FIREACT_ACTION in text:
        return text.split(FIREACT_ACTION)[1]
    if text.startswith(FIREACT_ACTION.lstrip()):
        return reply[len(FIREACT_ACTION.lstrip()):]
    return None


def fireact_call(action: str) -> tuple[str, str] | None:
    """(tool, argument) of an action as FireAct ran it (`FIREACT_ACTION`); None: it never ran."""
    parts = action.split("[")
    if len(parts) < 2:
        return None
    return parts[0].strip(), parts[1][:-1]


def fireact_steps(traj: list | str) -> tuple[str, list[tuple[str, str | None]]]:
    """(question, [(action, observation)]) of a trajectory, a chat list or a
    Llama file's text; the observation is None where the log ends on the action."""
    if isinstance(traj, str):
        m = FIREACT_PROMPT.search(traj)
        question = m.group(1).strip() if m else ""
        body = traj[m.end():] if m else traj
        return question, [(a, o.strip()) for a, o in FIREACT_STEP.findall(body)]
    question = next((m.get("content", "") for m in traj if m.get("role") == "user"), "")
    steps = []
    for i, m in enumerate(traj):
        if m.get("role") != "assistant":
            continue
        action = fireact_action(m.get("content", ""))
        if action is None:
            continue
        nxt = traj[i + 1] if i + 1 < len(traj) else None
        ran = nxt is not None and nxt.get("role") == "user"
        steps.append((action, _strip_observation(nxt.get("content", "")) if ran else None))
    return question, steps


def fireact_rounds(traj: list | str) -> tuple[list[Round], str | None]:
    """Rounds of one FireAct trajectory and the finish answer (None: no finish)."""
    rounds: list[Round] = []
    for action, observation in fireact_steps(traj)[1]:
        call = fireact_call(action)
        if call is None:
            continue
        tool, arg = call
        if FINISH in tool.lower():                 # FireAct's own test: "finish" in the action type
            return rounds, arg
        if observation is None:
            break                                  # the log ends on the action: it never ran
        rounds.append(Round(len(rounds) + 1, [_call(tool, arg, observation)]))
    return rounds, None


def fireact_outcome(run: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The outcome label of a run: `em` true is success, false failure, absent unknown."""
    em = run.get("em")
    value = ("success" if em else "failure") if isinstance(em, bool) else "unknown"
    return outcome_label(value, "em", em, where)


def fireact_task(path: str | Path, key: str) -> str:
    """A run's `task_id`: `<task>:<split>-<key>` by the trajs file's name
    (`FIREACT_FILE`; `hotpotqa:dev-<index>`, as `hotpotqa_task`), else `<file stem>:<key>`."""
    m = FIREACT_FILE.match(Path(path).name)
    return f"{m.group('task')}:{m.group('split')}-{key}" if m else f"{output_stem(Path(path).name)}:{key}"


FIREACT_KEYS = ("traj", "em", "reward")
"""A run of a FireAct trajs file has these (a run missing one is a malformed run, not another format)."""


def is_fireact(data: Any) -> bool:
    """A FireAct trajs file: an object whose first value is a run (any of `FIREACT_KEYS`)."""
    if not isinstance(data, dict) or not data:
        return False
    first = next(iter(data.values()))
    return isinstance(first, dict) and any(k in first for k in FIREACT_KEYS)


def fireact_log(key: str, run: Any, path: str | Path, src: Source | None = None) -> RoundLog:
    """The round log of one run (`<key>.jsonl`)."""
    src = src or Source(path, "fireact")
    src.obj(run, key, "a run object with traj, em, f1, reward")
    traj = src.get(run, "traj", (list, str), f"{key}.", "a chat list or the run's text")
    if isinstance(traj, list):
        for i, m in enumerate(traj):
            src.obj(m, f"{key}.traj[{i}]", "a chat message with role and content")
            src.get(m, "content", str, f"{key}.traj[{i}].", "the message's text", default="")
    question, _ = fireact_steps(traj)
    rounds, answer = fireact_rounds(traj)
    labels = {
        "source_format": "fireact", "source_file": str(path), "run_id": key,
        "task_id": fireact_task(path, key), "question": question,
        "ground_truth": run.get("gt"), "pred": run.get("pred"), "finish": answer,
        "reward": run.get("reward"), "em": run.get("em"), "f1": run.get("f1"),
        "outcome": fireact_outcome(run, f"{path}#{key}"), "num_rounds": len(rounds),
    }
    return RoundLog(f"{key}.jsonl", f"{path}#{key}", labels, rounds)


def import_fireact(data: Any, path: str | Path) -> list[RoundLog]:
    """One log per run of a FireAct trajs file (`<dev index>.jsonl`), in index order."""
    src = Source(path, "fireact")
    if not is_fireact(data):
        src.fail("not a FireAct trajs file", key="(top level)",
                 expected="an object of runs keyed by question index, each with traj and em")
    keys = sorted(data, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k)))
    return [fireact_log(str(k), data[k], path, src) for k in keys]


# ---- Reflexion -------------------------------------------------------------------------------------------

TRIAL = re.compile(r"^BEGIN TRIAL (\d+)[ \t]*$", re.M)
"""A trial's header: every agent is listed again after each trial."""
SECTION = re.compile(r"^-+ BEGIN (CORRECT|INCORRECT|HALTED) AGENTS -+[ \t]*$", re.M)
"""A section of a trial: the agents judged correct, incorrect (a wrong
answer) or halted (out of steps, no answer); an agent that answered wrongly
at its last step is listed under both incorrect and halted, the same block."""
STEP = re.compile(r"^(Thought|Action|Observation) (\d+): ?", re.M)
"""A numbered step of a Reflexion block; an observation runs to the next step (pages span lines)."""
TRIAL_RULE = re.compile(r"(?:\s*^#+[ \t]*$)+\s*\Z", re.M)
"""The `#####` rule that opens the next trial's header: not part of the block before it."""
TRUTH = re.compile(r"\nCorrect answer: (.*)\s*$")
"""The block's last line: the question's answer (not part of the last observation)."""
REFLECTION_PROMPT = "You have attempted to answer following question before"
"""Where a Reflexion agent's question ends and its reflections' preamble begins."""
VERDICTS = {"CORRECT": "success", "INCORRECT": "failure", "HALTED": "failure"}
"""The outcome of each section (`outcomes.outcome_label`, field `section`)."""


@dataclass(frozen=True)
class ReflexionBlock:
    """One agent's block in one section of one trial (`index`: 1-based in the section)."""
    trial: int
    section: str
    index: int
    text: str

    @property
    def name(self) -> str:
        """`t<trial>-<c|i|h><index>`: `t2-i07` is trial 2's seventh incorrect agent."""
        return f"t{self.trial}-{self.section[0].lower()}{self.index:02d}"


def reflexion_blocks(text: str, src: Source | None = None) -> list[ReflexionBlock]:
    """Every block of every trial, in the log's order; a trial without sections fails naming its line."""
    src = src or Source("<text>", "reflexion")
    trials = list(TRIAL.finditer(text))
    if not trials:
        src.fail("no trial in the log", line=1, key="BEGIN TRIAL", expected="Reflexion's trial log")
    blocks = []
    for t, m in enumerate(trials):
        body = text[m.end():trials[t + 1].start() if t + 1 < len(trials) else len(text)]
        sections = list(SECTION.finditer(body))
        if not sections:
            src.fail("trial without agents", line=text.count("\n", 0, m.start()) + 1, key=f"BEGIN TRIAL {m.group(1)}",
                     expected="BEGIN CORRECT AGENTS, BEGIN INCORRECT AGENTS and BEGIN HALTED AGENTS sections")
        for s, sec in enumerate(sections):
            part = body[sec.end():sections[s + 1].start() if s + 1 < len(sections) else len(body)]
            chunks = ("\n" + part).split("\nQuestion:")[1:]
            blocks += [ReflexionBlock(int(m.group(1)), sec.group(1), i, "Question:" + TRIAL_RULE.sub("", c).rstrip("\n"))
                       for i, c in enumerate(chunks, start=1)]
    return blocks


def reflexion_correct_blocks(text: str, trial: int = 1) -> list[str]:
    """The question blocks of a trial's `BEGIN CORRECT AGENTS` section."""
    return [b.text for b in reflexion_blocks(text) if b.trial == trial and b.section == "CORRECT"]


def reflexion_runs(blocks: list[ReflexionBlock]) -> list[ReflexionBlock]:
    """The blocks that are runs: with at least one step, and not the same text
    as an earlier block. An agent that was correct is listed again, verbatim,
    in every later trial (and with no steps in a log restarted from saved
    agents); the base agent re-run at temperature 0 mostly repeats its run
    word for word; a wrong last answer is listed as incorrect and halted.
    Each of those is one run, kept where it first appears."""
    seen: set[str] = set()
    runs = []
    for b in blocks:
        if not STEP.search(b.text) or b.text in seen:
            continue
        seen.add(b.text)
        runs.append(b)
    return runs


def reflexion_question(head: str) -> tuple[str, int]:
    """(question, reflections shown) of a block's text before its first step."""
    head = head.removeprefix("Question:")
    question = head.split(REFLECTION_PROMPT, 1)[0].strip()
    _, _, notes = head.partition("\nReflections:")
    return question, len(re.findall(r"^- ", notes, re.M))


def reflexion_rounds(block: str) -> tuple[str, list[Round], str | None, str | None, bool]:
    """(question, rounds, Finish answer, correct answer, marked correct) of one block."""
    truth_m = TRUTH.search(block)
    truth = truth_m.group(1).strip() if truth_m else None
    body = block[:truth_m.start()] if truth_m else block
    parts = STEP.split(body)
    question, _ = reflexion_question(parts[0])
    texts = [(parts[i], int(parts[i + 1]), parts[i + 2].rstrip("\n")) for i in range(1, len(parts) - 2, 3)]
    rounds: list[Round] = []
    answer = None
    marked = False
    for k, (what, n, body) in enumerate(texts):
        if what != "Action":
            continue
        line = body.splitlines()[0] if body else ""
        obs = next((b for w, m, b in texts[k + 1:] if w == "Observation" and m == n), None)
        act = ACTION.search(f"Action {n}: {line}")
        if act and act.group(1).lower() == FINISH:
            answer = act.group(2)
            marked = obs is not None and obs.startswith("Answer is CORRECT")
            break
        if obs is None:
            break                                   # the log ends on the action: it never ran
        tool, arg = (act.group(1), act.group(2)) if act else ("action", line)   # the environment's Invalid Action
        rounds.append(Round(len(rounds) + 1, [_call(tool, arg, obs.strip())]))
    return question, rounds, answer, truth, marked


def is_reflexion(data: Any) -> bool:
    """A Reflexion trial log: text with a trial header and an agents section."""
    return isinstance(data, TextLog) and bool(TRIAL.search(data.text)) and bool(SECTION.search(data.text))


def reflexion_log(block: ReflexionBlock, path: str | Path, question_ids: Mapping[str, Any] | None = None) -> RoundLog:
    """The round log of one block (`<block name>.jsonl`); `question_ids` maps a
    question (whitespace collapsed) to its HotpotQA dev index."""
    question, rounds, answer, truth, _ = reflexion_rounds(block.text)
    _, reflections = reflexion_question(STEP.split(block.text, 1)[0])
    index = (question_ids or {}).get(" ".join(question.split()))
    where = f"{path}#trial{block.trial}-{block.section.lower()}{block.index}"
    labels = {
        "source_format": "reflexion", "source_file": str(path), "run_id": block.name,
        "task_id": hotpotqa_task(index, question), "question": question, "trial": block.trial,
        "section": block.section.lower(), "block": block.index, "reflections": reflections,
        "ground_truth": truth, "finish": answer,
        "outcome": outcome_label(VERDICTS[block.section], "section", block.section.lower(), where),
        "num_rounds": len(rounds),
    }
    return RoundLog(f"{block.name}.jsonl", where, labels, rounds)


def import_reflexion(data: Any, path: str | Path, question_ids: Mapping[str, Any] | None = None) -> list[RoundLog]:
    """One log per run of a Reflexion trial log (`reflexion_runs`), named `t<trial>-<section><n>.jsonl`."""
    src = Source(path, "reflexion")
    if not is_reflexion(data):
        src.fail("not a Reflexion trial log", line=1, key="BEGIN TRIAL",
                 expected="a text log of trials with BEGIN ... AGENTS sections")
    return [reflexion_log(b, path, question_ids) for b in reflexion_runs(reflexion_blocks(data.text, src))]


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


FORMATS = (Format("fireact", is_fireact, import_fireact, many_runs=True),
           Format("reflexion", is_reflexion, import_reflexion, many_runs=True))
"""The formats this module imports (registry.py): FireAct's trajs files
(one log per run) and Reflexion's trial logs (one per run)."""
