"""What a call's result is: `ok` (evidence), `empty` or `error`, by the
rules every importer applies, one constant or function each.

A result is **evidence** (`ok`) when a call succeeded and returned text;
**empty** when it succeeded and returned nothing; **error** when the call
failed. The stop rule never counts empty results or errors as progress, so
the line between `ok` and `error` decides what a real run is credited with.
"""
from __future__ import annotations

import json
import re

from imprint_core.novelty.echo import evidence_free

from .callkinds import WRITE, ShellFacts

OK, EMPTY, ERROR = "ok", "empty", "error"


def unrecorded(kind: str) -> str:
    """The status of a call that ran but whose log holds no result: a read
    that returned nothing, as the record calls it (`empty`), a write `ok`.
    The OTel and openai-chat importers agree on it, and count such calls."""
    return OK if kind == WRITE else EMPTY

SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "locate", "which", "whereis",
                             "diff", "cmp", "test", "[", "[[", "pgrep", "comm", "fd"})
"""Programs whose non-zero exit with no output means "found nothing" (grep:
no match, exit 1; `find | xargs grep`: exit 123): an empty read, not an error."""

FAILED_EXIT_CODES = {124: "timed out", 126: "not executable", 127: "command not found", 137: "killed",
                     139: "crashed (segmentation fault)"}
"""Exit codes that mean the command did not run to an answer: always an error."""

ERROR_OUTPUT = re.compile(
    r"^(?:Traceback \(most recent call last\)"
    r"|.*\bcommand not found\b|.*: No such file or directory|.*: Permission denied|.*\bsyntax error\b"
    r"|(?:\S+: )?(?:error|fatal|usage): |ERROR: |\w*(?:Error|Exception): )", re.M | re.I)
"""Output lines that say a non-zero exit was a failure, not an answer:
tracebacks, `command not found`, missing files, `error:`/`fatal:`/`usage:`
(git, patch, argparse), pytest's `ERROR: not found`, `SomethingError: ...`."""

USAGE_ERROR_OUTPUT = re.compile(
    r"^(?:.*Try '[^'\n]*--help'"
    r"|\S+: (?:.*: )?(?:missing|invalid|unrecognized) (?:argument|operand|option)"
    r"|\S+: (?:.*: )?option requires an argument|\S+: (?:.*: )?too many arguments"
    r"|\S+: (?:.*: )?cannot (?:open|access|execute|stat|create)\b|\S+: paths must precede expression)", re.M)
"""A program refusing its command line or its input (GNU's `Try 'cut --help'`,
`find: missing argument to -exec`, `tr: missing operand`, `awk: cannot
open`): with a non-zero exit, an error. Not yet part of `shell_status`'s
rule, which the raw corpora are converted by when loaded (adding it there
would move their statuses); the InterCode importer, whose bash runs are
full of such refusals, applies it to the commands its log marks as failed."""

CODE_RUNNERS = frozenset({"python", "python2", "python3", "pytest", "py.test", "tox", "nox", "coverage", "node",
                          "ruby", "rspec", "go", "cargo", "java", "mvn", "gradle", "make", "ctest", "php", "perl"})
"""Programs that run the code under work (an interpreter, a test runner, a
build). Their non-zero exit is the answer to what the agent asked (does it
run, do the tests pass?): the traceback or the failing tests are evidence
about the code, judged for novelty like any output, not a tool failure. A
coding agent that fixes one import error after another gets a new
traceback each time; one that reruns an unchanged failure gets the same
one, which is no progress. Unless the runner itself could not start
(`RUNNER_FAILED`)."""

RUNNER_FAILED = re.compile(
    r"^(?:.*can't open file|.*: No such file or directory|.*\bcommand not found\b|ERROR: (?:file or directory )?not found"
    r"|(?:\S+: )?usage: |.*: error: unrecognized arguments)", re.M | re.I)
"""Output lines that say a code runner never ran the code: a missing script
or test id, a bad command line."""



def _searches(facts: ShellFacts) -> bool:
    return any(p in SEARCH_PROGRAMS for p in facts.programs)


def _runs_code(facts: ShellFacts) -> bool:
    return any(p in CODE_RUNNERS or re.fullmatch(r"python\d+(?:\.\d+)?", p) for p in facts.programs)


def shell_status(kind: str, returncode: int | None, output: str, facts: ShellFacts | None = None,
                 exception: str = "") -> str:
    """The status of a command that ran with `returncode` and printed `output`.

    - no exit code, a negative one, an exception (the harness's timeout) or
      one of `FAILED_EXIT_CODES`: error;
    - exit 0: a write is `ok` whatever it printed; a read is `ok` with output
      and `empty` without;
    - non-zero exit of a write: error (the change failed or half-happened);
    - non-zero exit of a read with no output: `empty` when it searched
      (`SEARCH_PROGRAMS`: grep found nothing), else error;
    - non-zero exit of a read that runs code (`CODE_RUNNERS`) with output:
      `ok`, its traceback or failing tests are evidence about the code,
      unless the runner never ran it (`RUNNER_FAILED`): error;
    - non-zero exit of another read whose output matches `ERROR_OUTPUT`: error;
    - any other non-zero read: `ok`. Its output is evidence: failing tests,
      lint findings, `diff` differences, `grep -c` printing 0.
    """
    if exception or returncode is None or returncode < 0 or returncode in FAILED_EXIT_CODES:
        return ERROR
    blank = not output.strip()
    if returncode == 0:
        return OK if kind == WRITE or not blank else EMPTY
    if kind == WRITE:
        return ERROR
    if blank:
        return EMPTY if facts is not None and _searches(facts) else ERROR
    if facts is not None and _runs_code(facts):
        return ERROR if RUNNER_FAILED.search(output) else OK
    return ERROR if ERROR_OUTPUT.search(output) else OK


TEXT_ERROR = re.compile(r"^\s*(?:error\b|exception\b|traceback \(most recent call last\))", re.I)
"""A function tool's result that starts like this reports a failure (tau-bench's `Error: ...`)."""


def text_status(result: str) -> str:
    """The status of a function tool's result text: `error` when it starts
    with `Error`, `Exception` or a traceback, or is a JSON object with a
    non-empty `error` key; `empty` when the novelty rule calls it an empty
    read (`evidence_free`, the one definition: blank, an empty JSON value,
    a JSON envelope whose lists are all empty, "no results"); otherwise `ok`."""
    text = result.strip()
    if not text:
        return EMPTY
    if TEXT_ERROR.match(text):
        return ERROR
    if text.startswith("{") and '"error"' in text:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return OK
        if isinstance(obj, dict) and obj.get("error"):
            return ERROR
    return EMPTY if evidence_free(text, None) else OK
