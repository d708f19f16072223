"""mini-swe-agent trajectories (`<instance>.traj.json`, gzipped or not).

The agent has one tool, `bash`. A **round** is one assistant message and the
command(s) it issued (`tool_calls` in trajectory format 1.1; a fenced
```` ```bash ```` block in the text-based format before it). Kind: the shell
rule of `callkinds.shell_facts`; the submit command (`echo
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT ...`) is a write whose result is the
submission. Status: `resultstatus.shell_status` on the exit code and output.

A call the agent wrote as broken JSON is answered by a `user` message
("Tool call error ... FormatError"): that call is an error with that text.

Outcome labels come from `index.jsonl` in the trajectory's folder or one of
the two above it (its `file` is the trajectory's path relative to the
index): `resolved` (true/false/null), `resolved_source` and `source`.
Without an index `resolved` is null.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from imprint_core.files import UnreadableJSON, loads_json

from ..roundlogs import Round, RoundCall, RoundLog

from .callkinds import SHELL_TOOLS, WRITE, classify_tool, shell_facts, tool_words
from .chat import ChatTurn, content_text, read_chat
from .rawfiles import Source, output_stem
from .registry import Format
from .resultstatus import ERROR, OK, shell_status, text_status

INDEX_NAME = "index.jsonl"
INDEX_LEVELS = 3
"""How many folders up (the trajectory's own included) the index is looked for."""

RETURNCODE = re.compile(r"^\s*<returncode>(-?\d+)</returncode>\n?")
EXCEPTION = re.compile(r"<exception>(.*?)</exception>\n?", re.S)
OUTPUT = re.compile(r"^\s*<output>\n?(.*?)\n?</output>\s*$", re.S)
TEXT_ACTION = re.compile(r"```(?:bash|sh)[ \t]*\n(.*?)\n?```", re.S)
"""The text-based action format: one fenced bash block per assistant message."""

_index_cache: dict[tuple[str, int, int], dict[str, dict]] = {}


def observation(text: str) -> tuple[int | None, str, str, str]:
    """Parse mini-swe-agent's observation template: (exit code, the command's
    output, the harness's exception text, the result to keep). The result
    is what the agent saw without the `<returncode>` tag and the `<output>`
    wrapper (the exit code lives in the status); truncated outputs keep the
    template's head, elision note and tail as the agent saw them."""
    rc_match = RETURNCODE.search(text)
    exc_match = EXCEPTION.search(text)
    rest = text
    if exc_match:
        rest = rest.replace(exc_match.group(0), "", 1)
    rc = None
    if rc_match:
        rc = int(rc_match.group(1))
        rest = RETURNCODE.sub("", rest, count=1)
    inner = OUTPUT.match(rest)
    output = inner.group(1) if inner else rest
    result = (exc_match.group(0) if exc_match else "") + output
    return rc, output, exc_match.group(1) if exc_match else "", result


def _load_index(idx: Path) -> dict[str, dict]:
    stat = idx.stat()
    cache_key = (str(idx.resolve()), stat.st_mtime_ns, stat.st_size)
    if cache_key in _index_cache:
        return _index_cache[cache_key]
    src = Source(idx, "mini-swe-agent index")
    entries: dict[str, dict] = {}
    try:
        text = idx.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        src.fail(f"cannot read the outcome index: {exc}")
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = loads_json(line)
        except UnreadableJSON as exc:
            src.fail(f"not readable JSON: {exc}", line=no)
        except ValueError as exc:
            src.fail(f"not valid JSON: {exc}", line=no)
        if not isinstance(entry, dict):
            src.fail("each line must be a JSON object", line=no, expected="an object with file and resolved")
        file = entry.get("file")
        if not isinstance(file, str):
            src.fail("required key is missing or not text", line=no, key="file",
                     expected="the trajectory's path relative to the index")
        resolved = entry.get("resolved")
        if resolved is not None and not isinstance(resolved, bool):
            src.fail(f"wrong type {type(resolved).__name__}", line=no, key="resolved", expected="true, false or null")
        entries[file] = entry
    _index_cache[cache_key] = entries
    return entries


def index_entry(path: Path) -> dict | None:
    """The trajectory's line in the nearest `index.jsonl` (None: no index, or not listed)."""
    folder = path.parent
    for _ in range(INDEX_LEVELS):
        idx = folder / INDEX_NAME
        if idx.is_file():
            entries = _load_index(idx)
            try:
                rel = path.resolve().relative_to(idx.parent.resolve()).as_posix()
            except ValueError:
                return None
            alt = rel[:-3] if rel.endswith(".gz") else rel + ".gz"
            return entries.get(rel) or entries.get(alt)
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def _call(name: str, args: dict, result: str | None, turn: ChatTurn, info: dict, src: Source, args_ok: bool = True,
          exit_text: str | None = None) -> RoundCall | None:
    """One call as a RoundCall (None: the log ends on it, it never ran)."""
    shell = "_".join(tool_words(name)) in SHELL_TOOLS
    command = args.get("command") if isinstance(args.get("command"), str) else ""
    facts = shell_facts(command) if shell else None
    kind = facts.kind if facts else classify_tool(name, args)
    follow = turn.following[1] if turn.following else None
    if facts and facts.submits and args_ok and result is None and not turn.later:
        submission = exit_text if exit_text is not None else info.get("submission")
        return RoundCall(name, args, WRITE, OK, submission if isinstance(submission, str) else "")
    if result is None or not args_ok:
        if follow is not None and follow.get("role") == "user":      # the format-error reply
            key = f"messages[{turn.following[0]}].content"
            return RoundCall(name, args, kind, ERROR, content_text(follow.get("content"), src, key))
        if not turn.later:
            return None                                              # the log ends on it: never ran
        return RoundCall(name, args, kind, ERROR, result or "")
    if not shell:
        return RoundCall(name, args, kind, text_status(result), result)
    rc, output, exception, kept = observation(result)
    return RoundCall(name, args, kind, shell_status(kind, rc, output, facts, exception), kept)


def import_mini_swe_agent(data: Any, path: str | Path) -> list[RoundLog]:
    """One log: the rounds (see the module's rules) and the outcome labels of
    the trajectory's `info` and its line in `index.jsonl`."""
    src = Source(path, "mini-swe-agent")
    p = Path(path)
    if not isinstance(data, dict):
        src.fail(f"wrong type {type(data).__name__}", key="[]", expected="an object with messages and info")
    messages = src.get(data, "messages", list, "", "the run's messages (a list)")
    info = src.get(data, "info", dict, "", "the run's info object", default={})
    exit_status = src.get(info, "exit_status", str, "info.", "the exit status (text)", default=None, allow_none=True)
    turns = read_chat(messages, src, "messages")
    exit_text = None
    for i, m in enumerate(messages):
        if m.get("role") == "exit":
            exit_text = content_text(m.get("content"), src, f"messages[{i}].content")
    rounds: list[Round] = []
    for t in turns:
        calls = []
        if t.calls:
            for c in t.calls:
                call = _call(c.name, c.args, c.result, t, info, src, c.args_ok, exit_text)
                if call:
                    calls.append(call)
        else:
            actions = TEXT_ACTION.findall(t.text)
            follow = t.following[1] if t.following else None
            result = content_text(follow.get("content"), src, f"messages[{t.following[0]}].content") \
                if follow is not None and follow.get("role") == "user" else None
            for cmd in actions:
                call = _call("bash", {"command": cmd}, result, t, info, src, len(actions) == 1, exit_text)
                if call:
                    calls.append(call)
        if calls:
            rounds.append(Round(len(rounds) + 1, calls))
    entry = index_entry(p) or {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model = config.get("model", {}).get("model_name") if isinstance(config.get("model"), dict) else None
    instance = data.get("instance_id") or entry.get("instance_id") or output_stem(p.name)
    labels = {
        "source_format": "mini-swe-agent", "source_file": str(path), "instance_id": str(instance),
        "run": entry.get("run") or p.parent.name, "resolved": entry.get("resolved"),
        "resolved_source": entry.get("resolved_source"), "exit_status": exit_status,
        "submitted": bool(info.get("submission")), "trajectory_format": data.get("trajectory_format"),
        "model": model, "num_rounds": len(rounds),
    }
    source = entry.get("source") if isinstance(entry.get("source"), str) else str(path)
    return [RoundLog(f"{output_stem(p.name)}.jsonl", source, labels, rounds)]


def is_mini_swe_agent(data: Any) -> bool:
    """A mini-swe-agent trajectory: an object with `trajectory_format:
    mini-swe-agent-*`, or with `messages` and `info`."""
    if not isinstance(data, dict):
        return False
    tf = data.get("trajectory_format")
    return (isinstance(tf, str) and tf.startswith("mini-swe-agent")) or ("messages" in data and "info" in data)


FORMATS = (Format("mini-swe-agent", is_mini_swe_agent, import_mini_swe_agent),)
"""The format this module imports (registry.py): one run a file."""
