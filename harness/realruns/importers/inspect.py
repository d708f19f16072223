"""inspect_ai eval logs (`.eval` archives and `.json` logs), read with
inspect_ai's own reader (`inspect_ai.log.read_eval_log`), never unpacked
by hand: whatever the log's version, inspect_ai knows its layout.

One round log per sample and epoch, named `<sample id>-<epoch>` (characters
other than letters, digits, `.`, `_` and `-` become `_`), under a folder
named after the log, as for tau-bench.

A **round** is one assistant message that made tool calls, with those
calls and their results (`ChatMessageTool`, paired by `tool_call_id`, or
without one the first unanswered call of the latest assistant message), as
in the chat importer. Assistant messages with text only and user turns are
not rounds; the rounds a user message preceded are listed in the label
`user_turn_before_round`.

- Kind: the tool's name and arguments by `callkinds.classify_tool`, or the
  corpus's `tool-kinds.yaml` (`toolkinds`).
- Status: `error` when the tool message carries inspect_ai's `error`
  (`ToolCallError`: a `ToolError` raised, a timeout, a permission denied...),
  or the call had a `parse_error` (the model wrote arguments that do not
  parse), or it has no result and the sample went on; otherwise
  `resultstatus.text_status` of the result text. A call the sample ends on with no
  result never ran and is left out.
- Result: the tool message's text (its text parts joined, content pooled
  as `attachment://` resolved; images carry none), or for a failed call
  without text the error's type and message.

Labels: the task, model, sample id and epoch; each scorer's value under
`scores`; `correct` (true for inspect_ai's `C`, false for `I`, null for
partial or other values) and `reward` (the first scorer's value as a
number where it is one: `C` 1, `I` 0, `P` 0.5, numbers as they are) from
the first scorer; the sample's `error` and `limit` (the token, message or
time limit that ended it) where it has one.

inspect_ai is an optional dependency (the `interop` extra); without it a
log fails with a line saying how to install it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..roundlogs import RoundLog

from .chat import ChatCall, ChatTurn, chat_rounds
from .rawfiles import OTLP_KEY, Archive, Source
from .registry import Format
from .toolkinds import classifier, find_overrides

INSTALL_HINT = "pip install -e '.[interop]' (inspect_ai)"
"""What to run where inspect_ai is missing."""
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
"""Characters of a sample id that cannot stand in a file name."""
CORRECT_VALUES = {"C": True, "I": False}
"""inspect_ai's CORRECT and INCORRECT grades as the label `correct`."""
REWARD_VALUES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect_ai's letter grades (CORRECT, INCORRECT, PARTIAL, NOANSWER) as numbers, as its own `value_to_float` reads them."""


def _read(path: Path, src: Source) -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        src.fail("inspect_ai is not installed", expected=INSTALL_HINT)
    try:
        # messages with their attachments resolved, without the event stream (the bulk of a log, unused here)
        return read_eval_log(str(path), resolve_attachments="core", exclude_fields={"events"})
    except FileNotFoundError:
        src.fail("no such file")
    except KeyError as exc:          # a zip archive without the member inspect_ai opens first
        src.fail("the archive lacks this member: not an inspect_ai .eval log, or cut off", key=str(exc.args[0]),
                 expected="an inspect_ai .eval archive")
    except Exception as exc:        # inspect_ai's reader raises plain ValueErrors, pydantic's and zipfile's errors
        validation = _validation(exc)
        if validation:
            src.fail(*validation[:1], key=validation[1], expected=validation[2])
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "EOCD" in text or "zip" in text.lower():
            src.fail(f"not a readable .eval archive ({text}): is the file cut off?", key="(archive)",
                     expected="a whole inspect_ai .eval archive")
        src.fail(f"inspect_ai cannot read the log: {type(exc).__name__}: {text}", key="(log)")


LOC_NOISE = re.compile(r"^function-(?:wrap|after|before|plain)\[.*\]$|^tagged-union\[.*\]$")
"""Parts of a pydantic error location that name a validator, not a key."""


def _validation(exc: Exception) -> tuple[str, str, str | None] | None:
    """(message, key, expected) of a pydantic validation error: the deepest
    location it names (where a union of message types failed, the member that
    got furthest), with the values each alternative would have taken."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        found = [e for e in errors() if isinstance(e, dict)]
    except Exception:
        return None
    if not found:
        return None

    def loc(e: dict) -> list:
        return [p for p in e.get("loc", ()) if not (isinstance(p, str) and LOC_NOISE.match(p))]

    deepest = max(found, key=lambda e: len(loc(e)))
    at = loc(deepest)
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at).lstrip(".") or "(log)"
    same = [e for e in found if loc(e) == at]
    expected = [str(e.get("ctx", {}).get("expected")) for e in same if e.get("ctx", {}).get("expected")]
    got = deepest.get("input")
    got_text = f" (got {got!r})" if isinstance(got, (str, int, float, bool)) else ""
    return (f"inspect_ai rejects the log: {deepest.get('msg', 'invalid value')}{got_text}", key,
            "one of " + ", ".join(expected) if len(expected) > 1 else None)


def _score_labels(scores: dict[str, Any] | None) -> dict[str, Any]:
    values = {name: s.value for name, s in (scores or {}).items()}
    first = next(iter(values.values()), None)
    correct = CORRECT_VALUES.get(first) if isinstance(first, str) else first if isinstance(first, bool) else None
    if isinstance(first, bool):
        reward: float | None = float(first)
    elif isinstance(first, (int, float)):
        reward = float(first)
    elif isinstance(first, str):
        reward = REWARD_VALUES.get(first)
    else:
        reward = None
    return {"scores": values, "correct": correct, "reward": reward}


def _text(message: Any) -> str:
    text = getattr(message, "text", "")
    return text if isinstance(text, str) else ""


def sample_turns(messages: list[Any], src: Source, where: str) -> list[ChatTurn]:
    """inspect_ai's messages as chat turns, every call paired with its result
    (by `tool_call_id`, or the first unanswered call of the latest assistant
    message); a result for no call, or a second one, fails naming it."""
    turns: list[ChatTurn] = []
    by_id: dict[str, ChatCall] = {}
    user_since = False
    for i, m in enumerate(messages):
        role = getattr(m, "role", None)
        if role == "assistant":
            calls = []
            for j, tc in enumerate(getattr(m, "tool_calls", None) or []):
                args = tc.arguments if isinstance(tc.arguments, dict) else {"arguments": tc.arguments}
                calls.append(ChatCall(tc.id or None, tc.function, args, not tc.parse_error,
                                      f"{where}[{i}].tool_calls[{j}]"))
                if tc.id:
                    by_id[tc.id] = calls[-1]
            if turns:
                turns[-1].later = True
            turns.append(ChatTurn(i, _text(m), calls, user_since))
            user_since = False
        elif role == "tool":
            cid = getattr(m, "tool_call_id", None)
            if cid is not None:
                call = by_id.get(cid)
                if call is None:
                    src.fail(f"a result for call id {cid!r}, which no earlier assistant message made",
                             key=f"{where}[{i}].tool_call_id", expected="the id of an earlier tool call")
            else:
                open_calls = [c for c in (turns[-1].calls if turns else []) if c.result is None]
                if not open_calls:
                    src.fail("a tool result that answers no call", key=f"{where}[{i}]",
                             expected="a tool message after an assistant message with tool calls")
                call = open_calls[0]
            if call.result is not None:
                src.fail(f"a second result for the call at {call.key}", key=f"{where}[{i}]",
                         expected="one result per call")
            error = getattr(m, "error", None)
            call.result = _text(m) or (f"{error.type}: {error.message}" if error is not None else "")
            call.failed = error is not None
        elif role == "user":
            user_since = True
    return turns


def import_inspect(data: Any, path: str | Path) -> list[RoundLog]:
    """One log per sample and epoch (see the module's rules)."""
    src = Source(path, "inspect")
    p = Path(path)
    if not isinstance(data, Archive) and not (isinstance(data, dict) and isinstance(data.get("eval"), dict)):
        src.fail("not an inspect_ai log", key="eval", expected="an inspect_ai .eval archive or .json log")
    log = _read(p, src)
    samples = log.samples or []
    if not samples:
        src.fail("the log holds no samples (was it written with --no-log-samples, or is the run still going?)",
                 key="samples", expected="a log with its samples")
    overrides, kinds_file = find_overrides(p)
    classify = classifier(overrides)
    logs, seen = [], {}
    for k, s in enumerate(samples):
        name = NAME_UNSAFE.sub("_", f"{s.id}-{s.epoch}")
        if name in seen:
            src.fail(f"sample {s.id} epoch {s.epoch} appears twice (first as sample {seen[name]})",
                     key=f"samples[{k}].id", expected="one sample per id and epoch")
        seen[name] = k
        rounds, user_before = chat_rounds(sample_turns(list(s.messages or []), src, f"samples[{k}].messages"),
                                          classify)
        labels = {"source_format": "inspect", "source_file": str(path), "instance_id": str(s.id),
                  "epoch": s.epoch, "task": log.eval.task, "model": log.eval.model,
                  "log_status": log.status, **_score_labels(s.scores),
                  "sample_error": s.error.message if s.error else None,
                  "limit": s.limit.type if s.limit else None,
                  "num_rounds": len(rounds), "user_turn_before_round": user_before}
        if kinds_file:
            labels["tool_kinds_file"] = kinds_file
        logs.append(RoundLog(f"{name}.jsonl", str(path), labels, rounds))
    return logs


def is_inspect(data: Any) -> bool:
    """An inspect_ai log: a zip archive (`Archive`), or an object with an
    `eval` object and `samples`, `status` or `version` (and no OTLP key)."""
    if isinstance(data, Archive):
        return True
    return isinstance(data, dict) and OTLP_KEY not in data and isinstance(data.get("eval"), dict) \
        and any(k in data for k in ("samples", "status", "version"))


FORMATS = (Format("inspect", is_inspect, import_inspect, many_runs=True),)
"""The format this module imports (registry.py): one log per sample."""
