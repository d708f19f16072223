"""InterCode's published runs (`princeton-nlp/intercode`, `data/results/`):
agents that write SQL (Spider dev), bash (NL2Bash file systems), Python
(MBPP) and capture-the-flag shell commands, each answered by the
environment, with InterCode's reward after every turn.

One results file holds many runs: a JSON object keyed by task index, each
run `{environment, dataset, task_id, query, turn_history: {actions,
observations, rewards, valid_action[, thoughts | steps]}, summary:
{max_reward, ...}}`; Plan & Solve files wrap that object as `{"meta": ...,
"logs": {...}}`. How the runs were made (`experiments/eval_n_turn.py`,
`eval_react.py`, `eval_plan_solve.py` at the same commit):

- *Try Again* (`multiturn`): the model writes one command a turn, the
  environment runs it and scores the state; the episode ends at reward 1 or
  the turn limit (1, 7, 10 or 25 turns), or when the policy raises (logged
  as the action `blocked`, with no observation), or at `skip` (CTF);
- *ReAct* (`react`): `Thought`, then `execute[code]` or `submit`; reward
  only at `submit`, which the harness forces after the last turn;
- *Plan & Solve* (`plan_solve[_refine_N_turns]`): one command per step of
  the model's plan, every step run whatever the reward (refine turns follow
  while the reward is below 1).

Mapping (one rule each, here):

- a **round** is one action the environment ran and its observation. Not
  rounds: an action with no observation (`blocked`: the policy failed, the
  log ends), `skip` (the agent gives up, the episode ends) and ReAct's
  `submit` (the answer, not a command: it re-reads the last observation;
  `ended` in the header says which of these ended the run);
- the **tool** is the environment's (`TOOLS`); CTF's `submit FLAG` is a
  call of its own, `submit`, a **write** (it hands in the answer) that is
  an error when the environment says the flag is wrong;
- **kind**: SQL by `callkinds.classify_sql` (SELECT, SHOW, DESCRIBE read;
  INSERT, UPDATE, CREATE... write), bash and CTF commands by
  `callkinds.shell_facts`, Python by `callkinds.python_writes`; a reply in
  which the harness found no code ran nothing: a read;
- **status**: the harness's own refusals (`NO_CODE`, `REACT_NO_CODE`) and
  the environment's failures (`ENV_FAILURES`, SQL's `Error executing
  query`, Python's `Error executing action` or an `error` in its output)
  are errors; SQL's empty result set (`[]`, `None`) is empty; bash and CTF
  commands go through `resultstatus.shell_status` with exit 0 where the
  log's `valid_action` is true (the environment's `exit_code == 0`) and 1
  where it is false, a failed one that printed a usage complaint
  (`resultstatus.USAGE_ERROR_OUTPUT`) an error; Python's test verdicts are
  evidence (ok).

**Outcome**: success when `summary.max_reward == 1` (InterCode's reward is
1 only when the state and the answer both match the gold), failure when it
is a lower number, unknown when it is missing. The reward is the maximum
over turns, as the paper reports it: Try Again and ReAct end at that turn
(or at `submit`); Plan & Solve runs its whole plan, so its reward 1 may
come before its last round (`success_round` in the header is the first
round scoring 1; null when the reward came at `submit` or not at all).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ..outcomes import outcome_label
from ..roundlogs import Round, RoundCall, RoundLog
from .callkinds import READ, WRITE, classify_sql, python_writes, shell_facts
from .rawfiles import Source, output_stem
from .registry import Format
from .resultstatus import EMPTY, ERROR, ERROR_OUTPUT, OK, USAGE_ERROR_OUTPUT, shell_status

SOURCE_FORMAT = "intercode"
"""The format's name (`FORMATS`, the header's `source_format`)."""

TOOLS = {"ic_sql": ("sql", "query"), "ic_bash": ("bash", "command"), "ic_ctf": ("bash", "command"),
         "ic_python": ("python", "code")}
"""Each environment's tool and its argument's name: the `environment` field decides."""

OUTCOME_FIELD = "summary.max_reward"
"""The source's verdict: 1 is success (`outcome`)."""

NO_CODE = re.compile(r"^(?:No \w+ code was found in your last response\.|Format your \w+ command as follows:)")
"""The Try Again and Plan & Solve harness's retry messages (the second in
an older template): the reply held no code, nothing ran (an error, a read)."""
REACT_NO_CODE = "Error executing query: Your last `execute` action did not contain"
"""ReAct's harness refusing an action that was not `execute[...]`: nothing ran."""
REACT_EXECUTE = re.compile(r"^execute\[(.*)\]$", re.S)
"""A ReAct action that ran code: the code is the bracket's content."""
REACT_SUBMIT = "submit"
"""ReAct's answer: not a round (its observation repeats the last one)."""
REACT_FORCED = "EXCEEDED MAX TURNS"
"""The thought the ReAct harness logs when it submits for the agent at the turn limit."""
NOT_RUN = ("blocked",)
"""Logged when the policy raised before anything ran (no observation follows)."""
SKIP = "skip"
"""The agent gives up (CTF): the episode ends, no round."""
CTF_SUBMIT = re.compile(r"^submit\s+(.*)$", re.S)
"""CTF's `submit FLAG`: the environment checks the flag."""
CTF_WRONG_FLAG = "Submitted flag is incorrect"
"""The CTF harness's reply to a wrong flag: an error."""
CTF_TOOL_PREFIX = "cmd "
"""The 25-turn CTF file logs commands as `cmd /bin/bash -c "..."`: the prefix is dropped."""
ENV_FAILURES = ("Command timed out", "Malformed command", "OCI runtime exec failed")
"""Bash and CTF commands the environment could not run to an answer: errors."""
SQL_ERROR = "Error executing query"
"""The SQL environment's report of a failed statement (MySQL's message follows)."""
SQL_EMPTY = frozenset({"[]", "()", "None", ""})
"""An empty result set (or none): an empty read."""
PYTHON_ERROR = "Error executing action"
"""The Python environment could not run the code (it did not parse): an error."""


def runs_of(data: Any) -> dict | None:
    """The runs of parsed data: the object itself, or a Plan & Solve file's
    `logs`; None when it is no non-empty object."""
    if isinstance(data, dict) and isinstance(data.get("logs"), dict) and isinstance(data.get("meta"), dict):
        data = data["logs"]
    return data if isinstance(data, dict) and data else None


def is_intercode(data: Any) -> bool:
    """Whether parsed data is an InterCode results file, by shape: its first
    run has `turn_history` and an `ic_*` environment."""
    runs = runs_of(data)
    first = next(iter(runs.values())) if runs else None
    return isinstance(first, dict) and "turn_history" in first and first.get("environment") in TOOLS


def agent_of(path: str | Path) -> dict[str, Any]:
    """What a results file's name says about the agent: `strategy`, `model`,
    `turns_limit`, `handicap` (the SQL schema given up front). File names:
    `ic_<env>_multiturn_<model>_<N>_turns[_handicap][_fs_K].json`,
    `ic_ctf_<model>_<N>_turns.json`, and without the model, which the folder
    names, `ic_<env>_react_<N>_turns[_fs_K].json` and
    `ic_<env>_plan_solve[_refine_<N>_turns][_fs_K].json`."""
    p = PurePosixPath(str(path).replace("\\", "/"))
    stem = output_stem(p.name)
    rest = re.sub(r"^ic_[a-z]+_", "", stem)
    turns = re.search(r"(\d+)_turns", rest)
    if rest.startswith("react"):
        strategy, model = "react", p.parent.name
    elif rest.startswith("plan_solve"):
        strategy, model = ("plan_solve_refine" if "refine" in rest else "plan_solve"), p.parent.name
    else:
        strategy = "multiturn"
        m = re.match(r"^(?:multiturn_)?(.+?)[-_]\d+_turns", rest)
        model = m.group(1) if m else p.parent.name
    names = {"multiturn": "Try Again", "react": "ReAct", "plan_solve": "Plan & Solve",
             "plan_solve_refine": "Plan & Solve with refinement"}
    handicap = "handicap" in rest
    limit = int(turns.group(1)) if turns else None
    text = f"InterCode {names[strategy]}, {model}" + (f", {limit} turns" if limit else "") \
        + (", schema given (handicap)" if handicap else "")
    return {"strategy": strategy, "model": model, "turns_limit": limit, "handicap": handicap, "agent": text}


def task_key(run: dict) -> str:
    """The task across models and strategies: `intercode-<env>:<dataset file stem>:<task index>`."""
    env = str(run.get("environment", "")).removeprefix("ic_")
    dataset = PurePosixPath(str(run.get("dataset", ""))).name
    return f"intercode-{env}:{output_stem(dataset)}:{run.get('task_id')}"


def _python_status(obs: str) -> str:
    text = obs.strip()
    if text.startswith(PYTHON_ERROR):
        return ERROR
    if text.startswith("{"):
        try:
            out = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return OK
        if isinstance(out, dict):
            if str(out.get("error") or "").strip():
                return ERROR
            return OK if str(out.get("output") or "").strip() else EMPTY
    return OK if text else EMPTY


def _shell_status(command: str, obs: str, valid: bool | None) -> tuple[str, str]:
    facts = shell_facts(command)
    if obs.startswith(ENV_FAILURES):
        return facts.kind, ERROR
    if valid is None:       # no exit code logged: what the output says
        valid = not (ERROR_OUTPUT.search(obs) or USAGE_ERROR_OUTPUT.search(obs))
    if not valid and USAGE_ERROR_OUTPUT.search(obs):
        return facts.kind, ERROR
    return facts.kind, shell_status(facts.kind, 0 if valid else 1, obs, facts)


def round_call(environment: str, action: str, observation: str, valid: bool | None, react: bool) -> RoundCall:
    """One action the environment ran, as a call with its kind and status (the module's rules)."""
    tool, arg = TOOLS[environment]
    code = action
    if react:
        m = REACT_EXECUTE.match(action.strip())
        code = m.group(1) if m else action
    if environment == "ic_ctf":
        code = code.removeprefix(CTF_TOOL_PREFIX)
    if NO_CODE.match(observation) or observation.startswith(REACT_NO_CODE):
        return RoundCall(tool, {arg: code}, READ, ERROR, observation)
    if environment == "ic_sql":
        kind = classify_sql(code)
        status = ERROR if observation.startswith(SQL_ERROR) else OK if kind == WRITE \
            else EMPTY if observation.strip() in SQL_EMPTY else OK
    elif environment == "ic_python":
        kind, status = (WRITE if python_writes(code) else READ), _python_status(observation)
    elif environment == "ic_ctf" and (flag := CTF_SUBMIT.match(code.strip())):
        return RoundCall("submit", {"flag": flag.group(1).strip()}, WRITE,
                         ERROR if observation.startswith(CTF_WRONG_FLAG) else OK, observation)
    else:
        kind, status = _shell_status(code, observation, valid)
    return RoundCall(tool, {arg: code}, kind, status, observation)


def episode_rounds(run: dict, src: Source, key: str) -> tuple[list[Round], str]:
    """The rounds of one run and what ended it (`ended`: `reward` (1 reached
    at the last turn), `submit`, `forced submit` (ReAct at the turn limit),
    `skip`, `blocked` (the policy failed), `plan` (Plan & Solve's last step),
    `turns` (the limit))."""
    env = run["environment"]
    th = src.get(run, "turn_history", dict, key + ".", "an object with actions and observations")
    actions = src.get(th, "actions", list, key + ".turn_history.", "the agent's actions (a list)")
    observations = src.get(th, "observations", list, key + ".turn_history.", "the observations (a list)")
    valid = th.get("valid_action") if isinstance(th.get("valid_action"), list) else []
    thoughts = th.get("thoughts") if isinstance(th.get("thoughts"), list) else None
    rewards = th.get("rewards") if isinstance(th.get("rewards"), list) else []
    if len(observations) > len(actions):
        src.fail(f"{len(observations)} observations for {len(actions)} actions", key=key + ".turn_history.observations",
                 expected="one observation per action that ran")
    rounds: list[Round] = []
    ones = [i for i, r in enumerate(rewards) if r == 1]
    ended = "reward" if ones and ones[0] == len(rewards) - 1 else "plan" if "steps" in th else "turns"
    for i, action in enumerate(actions):
        where = f"{key}.turn_history.actions[{i}]"
        if not isinstance(action, str):
            src.fail(f"wrong type {type(action).__name__}", key=where, expected="an action (text)")
        if i >= len(observations):   # it never ran: the log ends on it
            ended = "blocked" if action.strip() in NOT_RUN else "turns"
            break
        obs = observations[i]
        if not isinstance(obs, str):
            src.fail(f"wrong type {type(obs).__name__}", key=f"{key}.turn_history.observations[{i}]",
                     expected="an observation (text)")
        if action.strip().lower() == SKIP:
            ended = "skip"
            break
        if thoughts is not None and action.strip() == REACT_SUBMIT:
            forced = i < len(thoughts) and str(thoughts[i]).startswith(REACT_FORCED)
            ended = "forced submit" if forced else "submit"
            break
        v = valid[i] if i < len(valid) and isinstance(valid[i], bool) else None
        rounds.append(Round(len(rounds) + 1, [round_call(env, action, obs, v, thoughts is not None)]))
    return rounds, ended


def outcome_of_run(run: dict, where: str) -> dict[str, Any]:
    """The header's outcome: success when `summary.max_reward == 1`."""
    raw = (run.get("summary") or {}).get("max_reward") if isinstance(run.get("summary"), dict) else None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return outcome_label("unknown", OUTCOME_FIELD, raw, where)
    return outcome_label("success" if raw == 1 else "failure", OUTCOME_FIELD, raw, where)


def convert_run(name: str, run: Any, src: Source, provenance: dict[str, Any], agent: dict[str, Any]) -> RoundLog:
    """One run (`name`: its key in the file) as a round log."""
    key = name
    run = src.obj(run, key, "a run object with environment, task_id, turn_history and summary")
    env = src.get(run, "environment", str, key + ".", "the environment (" + ", ".join(TOOLS) + ")")
    if env not in TOOLS:
        src.fail(f"unknown environment {env!r}", key=key + ".environment", expected="one of " + ", ".join(TOOLS))
    src.get(run, "task_id", (int, str), key + ".", "the task's index")
    summary = src.get(run, "summary", dict, key + ".", "an object with max_reward")
    rounds, ended = episode_rounds(run, src, key)
    th = run["turn_history"]
    rewards = th.get("rewards") if isinstance(th.get("rewards"), list) else []
    first_one = next((i for i, r in enumerate(rewards) if r == 1), None)
    where = f"{provenance.get('path') or src.file}#{name}"
    labels = {
        "source_format": SOURCE_FORMAT, **provenance, "agent": agent["agent"],
        "task_id": task_key(run), "run_id": name, "environment": env, "dataset": run.get("dataset"),
        "query": run.get("query"), "hardness": run.get("hardness"),
        "strategy": agent["strategy"], "model": agent["model"], "turns_limit": agent["turns_limit"],
        "handicap": agent["handicap"], "turns_max": summary.get("turns_max"), "outcome": outcome_of_run(run, where),
        "max_reward": summary.get("max_reward"), "max_reward_idx": summary.get("max_reward_idx"),
        "rewards": rewards, "success_round": first_one + 1 if first_one is not None and first_one < len(rounds)
        else None, "ended": ended, "num_rounds": len(rounds),
    }
    if "steps" in th:
        labels["plan"] = th["steps"]
    return RoundLog(f"{name}.jsonl", where, labels, rounds)


def import_intercode(data: Any, path: str | Path, provenance: dict[str, Any] | None = None,
                     names: list[str] | None = None) -> list[RoundLog]:
    """One round log per run of a results file (`<task index>.jsonl`), or of
    the runs `names` only. `provenance` (repo, commit, path, licence) goes
    into every header; without it the header names the file read."""
    src = Source(path, SOURCE_FORMAT)
    runs = runs_of(data)
    if runs is None:
        src.fail("not an InterCode results file", key="(top level)",
                 expected="an object of runs keyed by task index, each with environment (ic_*) and turn_history")
    provenance = provenance or {"source_file": str(path)}
    agent = agent_of(provenance.get("path") or path)
    logs = []
    for name in names if names is not None else list(runs):
        if name not in runs:
            src.fail("no such run", key=name, expected="a run key of the file")
        logs.append(convert_run(str(name), runs[name], src, provenance, agent))
    return logs


FORMATS = (Format(SOURCE_FORMAT, is_intercode, import_intercode, many_runs=True),)
"""The format this module imports (registry.py): one log per run of a results file."""
