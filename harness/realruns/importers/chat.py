"""The OpenAI chat wire format: assistant messages with `tool_calls`, `tool`
messages with the results. `openai-chat` (any agent that logs this format)
and `tau-bench` (whose runs hold such a list) are converted here; the
mini-swe-agent importer reads its messages with `read_chat` too.

A **round** is one assistant message that made tool calls, with those calls
and their results. Assistant messages with text only (answers, questions to
the user in prose) and user turns are not rounds; the rounds that a user
message preceded are listed in the label `user_turn_before_round`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..outcomes import outcome_label
from ..roundlogs import Round, RoundCall, RoundLog

from .callkinds import classify_tool
from .rawfiles import Source, output_stem
from .registry import Format
from .resultstatus import ERROR, text_status, unrecorded

CHAT_ROLES = "system, developer, user, assistant, tool or function"


@dataclass
class ChatCall:
    id: str | None
    name: str
    args: dict[str, Any]
    args_ok: bool              # the arguments were a JSON object (or absent)
    key: str                   # where the call is, for messages
    result: str | None = None  # None: the log holds no result for it
    failed: bool = False       # the log says the call failed (inspect_ai's tool error)


@dataclass
class ChatTurn:
    """One assistant message (with or without calls)."""
    index: int
    text: str
    calls: list[ChatCall]
    user_before: bool                   # a user message came since the previous assistant message
    later: bool = False                 # another assistant message follows: the run went on
    following: tuple[int, dict] | None = None   # the first user/other message after it (not a tool result)


def content_text(value: Any, src: Source, key: str) -> str:
    """A message's content as text: a string, null (''), or a list of parts
    whose `text` is joined (images and other parts carry no text)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
            else:
                src.fail(f"wrong type {type(part).__name__}", key=f"{key}[{i}]", expected="a text part")
        return "\n".join(parts)
    src.fail(f"wrong type {type(value).__name__}", key=key, expected="text, null or a list of parts")


def parse_arguments(value: Any, src: Source, key: str) -> tuple[dict[str, Any], bool]:
    """A call's arguments as an object. Text that is not a JSON object (the
    model wrote broken JSON) is kept as `{"arguments": text}` and flagged:
    such a call failed before it ran, so its status is an error."""
    if value is None or value == "":
        return {}, True
    if isinstance(value, dict):
        return value, True
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return {"arguments": value}, False
        return (parsed, True) if isinstance(parsed, dict) else ({"arguments": parsed}, False)
    src.fail(f"wrong type {type(value).__name__}", key=key, expected="a JSON object or its text")


def _calls(m: dict, src: Source, key: str) -> list[ChatCall]:
    calls = []
    raw = src.get(m, "tool_calls", list, key + ".", "a list of tool calls", default=None, allow_none=True) or []
    for j, tc in enumerate(raw):
        ck = f"{key}.tool_calls[{j}]"
        tc = src.obj(tc, ck, "a tool call object with id and function")
        fn = src.get(tc, "function", dict, ck + ".", "an object with name and arguments")
        name = src.get(fn, "name", str, ck + ".function.", "the tool's name")
        args, ok = parse_arguments(fn.get("arguments"), src, ck + ".function.arguments")
        cid = src.get(tc, "id", str, ck + ".", "the call's id (text)", default=None, allow_none=True)
        calls.append(ChatCall(cid, name, args, ok, ck))
    fc = m.get("function_call")
    if not calls and fc is not None:   # the legacy single `function_call`
        fc = src.obj(fc, key + ".function_call", "an object with name and arguments")
        name = src.get(fc, "name", str, key + ".function_call.", "the function's name")
        args, ok = parse_arguments(fc.get("arguments"), src, key + ".function_call.arguments")
        calls.append(ChatCall(None, name, args, ok, key + ".function_call"))
    return calls


def read_chat(messages: Any, src: Source, where: str = "messages") -> list[ChatTurn]:
    """Validate a message list and pair every call with its result: by
    `tool_call_id`, or (without one) the first unanswered call of the latest
    assistant message. A result for no call, or a second result, is an error
    in the file."""
    if not isinstance(messages, list):
        src.fail(f"wrong type {type(messages).__name__}", key=where, expected="a list of messages")
    turns: list[ChatTurn] = []
    by_id: dict[str, ChatCall] = {}
    user_since = False
    for i, m in enumerate(messages):
        key = f"{where}[{i}]"
        m = src.obj(m, key, "a message object with a role")
        role = src.get(m, "role", str, key + ".", CHAT_ROLES)
        if role == "assistant":
            calls = _calls(m, src, key)
            text = content_text(m.get("content"), src, key + ".content")
            if turns:
                turns[-1].later = True
            turns.append(ChatTurn(i, text, calls, user_since))
            user_since = False
            for c in calls:
                if c.id is not None:
                    by_id[c.id] = c
        elif role in ("tool", "function"):
            text = content_text(m.get("content"), src, key + ".content")
            cid = src.get(m, "tool_call_id", str, key + ".", "the id of the call it answers", default=None,
                          allow_none=True)
            if cid is not None:
                call = by_id.get(cid)
                if call is None:
                    src.fail(f"a result for call id {cid!r}, which no earlier assistant message made",
                             key=key + ".tool_call_id", expected="the id of an earlier tool call")
            else:
                open_calls = [c for c in (turns[-1].calls if turns else []) if c.result is None]
                call = open_calls[0] if open_calls else None
                if call is None:
                    src.fail("a tool result that answers no call", key=key,
                             expected="a tool message after an assistant message with tool_calls")
            if call.result is not None:
                src.fail(f"a second result for the call at {call.key}", key=key,
                         expected="one result per call")
            call.result = text
        else:
            content_text(m.get("content"), src, key + ".content")
            if role in ("user", "human"):
                user_since = True
            if role not in ("system", "developer") and turns and turns[-1].following is None:
                turns[-1].following = (i, m)
    return turns


def chat_rounds(turns: list[ChatTurn],
                classify: Callable[[str, dict], str] = classify_tool,
                status_of: Callable[[str], str] = text_status, *,
                unanswered: Callable[[str], str] | None = None) -> tuple[list[Round], list[int]]:
    """Rounds from assistant turns, and the rounds a user message preceded.

    A call without a result is an error when the run went on after it (the
    agent saw it fail), or `unanswered(kind)` where given, and is left out
    when the log ends on it (it never ran, like a call not executed at a
    deadline); a call whose arguments were not a JSON object, or that the
    log marks as failed, is an error."""
    rounds: list[Round] = []
    user_before: list[int] = []
    user = False
    for t in turns:
        user = user or t.user_before
        calls = []
        for c in t.calls:
            if c.result is None and not t.later:
                continue
            result, kind = c.result or "", classify(c.name, c.args)
            if not c.args_ok or c.failed:
                status = ERROR
            elif c.result is None:
                status = unanswered(kind) if unanswered is not None else ERROR
            else:
                status = status_of(result)
            calls.append(RoundCall(c.name, c.args, kind, status, result))
        if calls:
            rounds.append(Round(len(rounds) + 1, calls))
            if user:
                user_before.append(len(rounds))
            user = False
    return rounds, user_before


# ---- openai-chat ------------------------------------------------------------------------------
UNANSWERED_NOTE = ("{n} call(s) have no tool message with their result, though the run went on after them: each is "
                   "an empty read (a write: ok), as the OTel importer takes a tool span without its result; the "
                   "replay credits them no new evidence")
"""What an openai-chat run's header says when calls the run went on after have no result (`results_note`)."""


def import_openai_chat(data: Any, path: str | Path) -> list[RoundLog]:
    """A message list (JSON, or JSON lines of messages), or an object with
    `messages` and optional `labels` (copied into the header) and `id`."""
    src = Source(path, "openai-chat")
    labels: dict[str, Any] = {}
    instance = output_stem(Path(path).name)
    where = ""
    if isinstance(data, dict):
        if "messages" not in data:
            src.fail("required key is missing", key="messages", expected="a list of chat messages")
        extra = src.get(data, "labels", dict, "", "an object of outcome labels", default={})
        labels.update(extra)
        instance = src.get(data, "id", (str, int), "", "the run's id", default=instance)
        data, where = data["messages"], "messages"
    if isinstance(data, list) and not data:
        src.fail("no messages", key=where or "[]", expected="a list of chat messages")
    turns = read_chat(data, src, where)
    # A call the run went on after without its result: what the OTel importer makes of a tool span without
    # one (`unrecorded`: an empty read, a write ok), counted and said in the header as it says it.
    rounds, user_before = chat_rounds(turns, unanswered=unrecorded)
    missing = sum(c.result is None and c.args_ok and not c.failed for t in turns if t.later for c in t.calls)
    labels = {"source_format": "openai-chat", "source_file": str(path), "instance_id": str(instance),
              "num_rounds": len(rounds), "user_turn_before_round": user_before, "results_missing": missing,
              **({"results_note": UNANSWERED_NOTE.format(n=missing)} if missing else {}), **labels}
    return [RoundLog(f"{output_stem(Path(path).name)}.jsonl", str(path), labels, rounds)]


# ---- tau-bench --------------------------------------------------------------------------------

def import_tau_bench(data: Any, path: str | Path) -> list[RoundLog]:
    """tau-bench's results file: a list of runs, each with `task_id`, `trial`,
    `reward` and `traj` (the chat). One log per run, named `<task_id>-<trial>`;
    tool kinds and statuses follow the generic chat rules (`book_*`,
    `cancel_*`, `update_*`, `send_*` are writes; `Error: ...` results are
    errors; blank or empty-JSON results are empty). The outcome is tau-bench's
    own verdict: success when `reward` == 1 (every database write and output
    as the task expects), else failure."""
    src = Source(path, "tau-bench")
    if not isinstance(data, list) or not data:
        src.fail("expected a non-empty list of runs", key="[]",
                 expected="a list of objects with task_id, trial, reward and traj")
    logs, seen = [], {}
    for i, run in enumerate(data):
        key = f"[{i}]"
        run = src.obj(run, key, "an object with task_id, trial, reward and traj")
        task = src.get(run, "task_id", (int, str), key + ".", "the task's id")
        trial = src.get(run, "trial", (int, str), key + ".", "the trial number")
        reward = src.get(run, "reward", (int, float), key + ".", "the run's reward (a number)")
        name = f"{task}-{trial}"
        if name in seen:
            src.fail(f"run {name} appears twice (first at [{seen[name]}])", key=key + ".trial",
                     expected="one run per task and trial")
        seen[name] = i
        traj = src.get(run, "traj", list, key + ".", "the run's chat messages (a list)")
        rounds, user_before = chat_rounds(read_chat(traj, src, key + ".traj"))
        labels = {"reward": reward, "task_id": task, "num_rounds": len(rounds), "trial": trial,
                  "user_turn_before_round": user_before, "source_format": "tau-bench",
                  "source_file": str(path), "instance_id": name,
                  "outcome": outcome_label("success" if reward == 1 else "failure", "reward", reward,
                                           f"{path} {key}.reward")}
        logs.append(RoundLog(f"{name}.jsonl", str(path), labels, rounds))
    return logs


def is_tau_bench(data: Any) -> bool:
    """A tau-bench results file: a list of objects with `task_id` and `traj`."""
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) \
        and "task_id" in data[0] and "traj" in data[0]


def is_openai_chat(data: Any) -> bool:
    """An OpenAI chat message list: a list of objects with `role`, or an object with `messages`."""
    if isinstance(data, dict):
        return "messages" in data
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "role" in data[0]


FORMATS = (Format("tau-bench", is_tau_bench, import_tau_bench, many_runs=True),
           Format("openai-chat", is_openai_chat, import_openai_chat))
"""The formats this module imports (registry.py): tau-bench's results
files (one log per task run) and a plain message list (one run)."""
