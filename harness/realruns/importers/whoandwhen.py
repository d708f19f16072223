"""Who&When failure logs: Magentic-One (Hand-Crafted) and AG2 group chats
(Algorithm-Generated). Each file: `history`, `question`, `ground_truth`,
`mistake_agent`, `mistake_step` (an index into `history`),
`mistake_reason`, and `is_correct` (AG2) or `is_corrected` (Magentic-One),
kept as the label `correct`. The step is also given as `mistake_round`:
the round holding that message, or else the first round after it (null
when no round comes after it).

**Magentic-One.** The Orchestrator is the agent whose loop is replayed. A
round is one instruction `Orchestrator (-> X)` and X's reply; the call's
tool is X and its result the reply. The call is the *action X took*, not
the instruction, which the Orchestrator rewords every turn (six identical
clicks on an unchanged page would otherwise be six different calls): a
WebSurfer reply opens with the action it performed ("I clicked 'Email the
Department'.", "I typed 'x' into 'y'.", "I scrolled down one page in the
browser."; `WEB_ACTION`), which becomes its args `{"action": ...}`; a
ComputerTerminal's action is the code it ran, `{"code": ...}`. Where the
reply names no action (a summary, a file page, an unanswered instruction)
the instruction is the action, `{"instruction": ...}`. The instruction is
always kept as the call's `request`. Kinds
(`AGENT_KINDS`): WebSurfer's clicks, typing, scrolling and navigation
only move a browser and read the page it shows: reads; FileSurfer reads
files; the Assistant (the Coder) writes text and code but runs nothing: a
read; ComputerTerminal runs the latest code block shown before its reply:
classified like any code (`callkinds.classify_code`). Other agents: reads.
An instruction that X never answered (the next message is the
Orchestrator's again: X failed, as its next ledger says) is an error with
an empty result; one the log ends on is left out (it never ran).

**AG2.** Experts talk in turns; the `Computer_terminal` runs the code blocks
of the message before its reply. A round is one expert message whose code
the terminal ran, with that execution (args: the speaker and the blocks).
Expert messages whose code nobody ran, and the terminal's "There is no code
from the last 1 message" replies, are no calls.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..roundlogs import Round, RoundCall, RoundLog

from .callkinds import READ, SHELL_LANGUAGES, ShellFacts, classify_code, code_blocks, shell_facts
from .rawfiles import Source, output_stem
from .registry import Format
from .resultstatus import EMPTY, ERROR, shell_status, text_status

INSTRUCTION = re.compile(r"^Orchestrator \(-> (.+)\)$")
WEB_ACTION = re.compile(r"^I (?:clicked|typed|scrolled|input|hovered|selected|pressed|visited|navigated)\b[^\n]*")
"""The first line of a WebSurfer reply that says what it did (MultimodalWebSurfer's action sentences)."""
NEXT_SPEAKER = "Next speaker"
"""`Orchestrator (thought)` messages starting so only name the next speaker; they sit between an
instruction and its reply."""

AGENT_KINDS = {"WebSurfer": READ, "FileSurfer": READ, "Assistant": READ, "Coder": READ}
"""Magentic-One agents whose calls are reads; ComputerTerminal is classified by its code."""
TERMINALS = frozenset({"ComputerTerminal", "Computer_terminal"})

RUNTIME_ERROR_TAIL = "\nError processing publish message\n"
"""autogen_core appends its own traceback to a reply when publishing it failed
after the agent answered: a logging artifact, cut from the result (the reply
before it stands; a reply that is only the artifact is an error)."""

EMPTY_REPLIES = frozenset({"Nothing to summarize."})
"""WebSurfer's reply when the page it was asked to summarise had no text: an empty read."""

FILE_ERROR_PAGE = re.compile(r"^Title: Error \d{3}\b", re.M)
"""FileSurfer shows a missing file as a page titled `Error 404`: an error."""
FILE_SURFER_RULE = "======================="

TERMINAL_RAN = re.compile(r"^The script ran, then exited with Unix exit code: (-?\d+)\nIts output was:\n?(.*)\Z", re.S)
TERMINAL_SILENT = re.compile(r"^The script ran but produced no output to console\. The Unix exit code was: (-?\d+)")
TERMINAL_NO_CODE = "No code block detected"
"""Magentic-One's ComputerTerminal: ran (exit code and output), ran silently
(an empty read), or found no code to run (an error: the call did nothing)."""

AG2_RAN = re.compile(r"^exitcode: (-?\d+) \([^)]*\)\n(?:Code output:)?[ \t]*\n?(.*)\Z", re.S)
AG2_NO_CODE = "There is no code from the last"

def _code_facts(blocks: list[tuple[str, str]]) -> ShellFacts | None:
    """Shell-only code is judged like a shell command (a silent grep found
    nothing); Python that fails silently is an error."""
    if blocks and all(lang in SHELL_LANGUAGES for lang, _ in blocks):
        return shell_facts("\n".join(code for _, code in blocks))
    return None


def terminal_result(kind: str, reply: str, facts: ShellFacts | None = None) -> tuple[str, str]:
    """(status, result) of a code execution. The result is the program's output
    without the terminal's exit-code wrapper (the exit code lives in the status),
    as for mini-swe-agent; a reply in no known shape is judged as text."""
    if reply.startswith(TERMINAL_NO_CODE):
        return ERROR, reply
    silent = TERMINAL_SILENT.match(reply)
    if silent:
        return shell_status(kind, int(silent.group(1)), ""), ""
    ran = TERMINAL_RAN.match(reply) or AG2_RAN.match(reply)
    if ran:
        return shell_status(kind, int(ran.group(1)), ran.group(2), facts), ran.group(2)
    return text_status(reply), reply


def reply_status(agent: str, kind: str, reply: str, facts: ShellFacts | None = None) -> tuple[str, str]:
    """(status, result) of a Magentic-One agent's reply (see the module's rules)."""
    if agent in TERMINALS:
        return terminal_result(kind, reply, facts)
    return _reply_status(agent, reply), reply


def _reply_status(agent: str, reply: str) -> str:
    text = reply.strip()
    if not text or text in EMPTY_REPLIES:
        return EMPTY
    if agent == "FileSurfer":
        if FILE_ERROR_PAGE.search(reply):
            return ERROR
        if FILE_SURFER_RULE in reply and not reply.split(FILE_SURFER_RULE, 1)[1].strip():
            return EMPTY
    return text_status(reply)


def _cut_runtime_error(reply: str) -> tuple[str, bool]:
    k = reply.find(RUNTIME_ERROR_TAIL)
    if k < 0 and reply.startswith(RUNTIME_ERROR_TAIL.lstrip("\n")):
        k = 0
    return (reply, False) if k < 0 else (reply[:k], True)


def _history(data: Any, src: Source) -> list[dict]:
    history = src.get(data, "history", list, "", "the run's messages (a list)")
    for i, m in enumerate(history):
        m = src.obj(m, f"history[{i}]", "a message object with role and content")
        src.get(m, "role", str, f"history[{i}].", "the speaker (text)")
        src.get(m, "content", str, f"history[{i}].", "the message text")
        src.get(m, "name", str, f"history[{i}].", "the speaker's name (text)", default="")
    return history


def magentic_one_rounds(history: list[dict]) -> tuple[list[Round], list[tuple[int, int]]]:
    """Rounds and, per round, the first and last history index it covers."""
    rounds, spans = [], []
    for i, m in enumerate(history):
        target = INSTRUCTION.match(m["role"])
        if not target:
            continue
        agent = target.group(1)
        j = i + 1
        while j < len(history) and history[j]["role"] == "Orchestrator (thought)" \
                and history[j]["content"].startswith(NEXT_SPEAKER):
            j += 1
        replies = []
        while j < len(history) and history[j]["role"] == agent:
            replies.append(history[j]["content"])
            j += 1
        kind, facts, blocks_run = AGENT_KINDS.get(agent, READ), None, None
        if agent in TERMINALS:
            blocks = next((b for h in reversed(history[:i + 1]) if (b := code_blocks(h["content"]))), [])
            kind, facts, blocks_run = classify_code(blocks), _code_facts(blocks), blocks
        if replies:
            reply, cut = _cut_runtime_error("\n".join(replies))
            status, reply = (ERROR, reply) if cut and not reply.strip() else reply_status(agent, kind, reply, facts)
            last = j - 1
        elif j < len(history):
            reply, status, last = "", ERROR, i
        else:
            continue                      # the log ends on the instruction: it never ran
        action = magentic_action(agent, reply, blocks_run) or {"instruction": m["content"]}
        rounds.append(Round(len(rounds) + 1, [RoundCall(agent, action, kind, status, reply, request=m["content"])]))
        spans.append((i, last))
    return rounds, spans


def magentic_action(agent: str, reply: str, blocks: list[tuple[str, str]] | None) -> dict[str, Any]:
    """The args of a Magentic-One call: the action its agent took (see the
    module's rules), or `{"instruction": ...}` where the reply names none
    (the caller passes the instruction back in as `request` either way)."""
    if blocks:
        return {"code": "\n".join(code for _, code in blocks)}
    if agent == "WebSurfer":
        m = WEB_ACTION.match(reply.lstrip())
        if m:
            return {"action": m.group(0).strip()}
    return {}


def ag2_rounds(history: list[dict]) -> tuple[list[Round], list[tuple[int, int]]]:
    """Rounds (an expert's message and the terminal's run of its code) and their history spans."""
    rounds, spans = [], []
    for i, m in enumerate(history):
        if m.get("name") not in TERMINALS or i == 0:
            continue
        reply = m["content"]
        if reply.startswith(AG2_NO_CODE):
            continue
        speaker = history[i - 1]
        blocks = code_blocks(speaker["content"])
        kind = classify_code(blocks)
        status, reply = terminal_result(kind, reply, _code_facts(blocks))
        args = {"speaker": speaker.get("name") or speaker["role"],
                "blocks": [{"language": lang, "code": code} for lang, code in blocks]}
        rounds.append(Round(len(rounds) + 1, [RoundCall(m["name"], args, kind, status, reply)]))
        spans.append((i - 1, i))
    return rounds, spans


def mistake_round(step: Any, spans: list[tuple[int, int]]) -> int | None:
    """The round holding history message `step`, else the first round after it."""
    try:
        s = int(step)
    except (TypeError, ValueError):
        return None
    for n, (first, last) in enumerate(spans, start=1):
        if last >= s:
            return n
    return None


def is_ag2(history: list[dict]) -> bool:
    """AG2 chats name each speaker (`name`); Magentic-One logs put the speaker in `role`."""
    return any("name" in m for m in history)


def import_who_and_when(data: Any, path: str | Path) -> list[RoundLog]:
    """One log per file, Magentic-One or AG2 by the shape of `history` (`is_ag2`)."""
    src = Source(path, "who-and-when")
    if not isinstance(data, dict):
        src.fail(f"wrong type {type(data).__name__}", key="[]", expected="an object with history and question")
    history = _history(data, src)
    ag2 = is_ag2(history)
    rounds, spans = (ag2_rounds if ag2 else magentic_one_rounds)(history)
    correct_key = "is_correct" if "is_correct" in data else "is_corrected" if "is_corrected" in data else None
    correct = data.get(correct_key) if correct_key else None
    if correct is not None and not isinstance(correct, bool):
        src.fail(f"wrong type {type(correct).__name__}", key=correct_key, expected="true or false")
    p = Path(path)
    labels = {
        "source_format": "who-and-when", "source_file": str(path),
        "system": "ag2" if ag2 else "magentic-one",
        "instance_id": str(data.get("question_ID") or output_stem(p.name)),
        "correct": correct, "level": data.get("level"),
        "mistake_agent": data.get("mistake_agent"), "mistake_step": data.get("mistake_step"),
        "mistake_round": mistake_round(data.get("mistake_step"), spans),
        "mistake_reason": data.get("mistake_reason"), "num_rounds": len(rounds), "num_messages": len(history),
    }
    return [RoundLog(f"{output_stem(p.name)}.jsonl", str(path), labels, rounds)]


def is_who_and_when(data: Any) -> bool:
    """A Who&When log: an object with `history` and one of `mistake_agent`,
    `question`, `is_correct`, `is_corrected`."""
    return isinstance(data, dict) and "history" in data \
        and any(k in data for k in ("mistake_agent", "question", "is_correct", "is_corrected"))


FORMATS = (Format("who-and-when", is_who_and_when, import_who_and_when),)
"""The format this module imports (registry.py): one run a file."""
