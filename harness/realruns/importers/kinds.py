"""What a call is (read, write or ask) and what its result is (ok, empty or
error): every rule the importers apply, one constant or function each.

Words as in the research-loop spec: a **write** has side effects, an **ask**
waits for the user, everything else is a **read**. A result is **evidence**
(`ok`) when a call succeeded and returned text; **empty** when it succeeded
and returned nothing; **error** when the call failed. The stop rule never
counts empty results or errors as progress, so the line between `ok` and
`error` decides what a real run is credited with.

Shell commands are classified by what they could change, not what they
print: a command is a read unless some part of it is known to write.
Running a program (`python script.py`, `pytest`) is a read: its own side
effects are invisible in the command line and its output is what the agent
learns from.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

READ, WRITE, ASK = "read", "write", "ask"
OK, EMPTY, ERROR = "ok", "empty", "error"

# ---- shell commands: read or write ----------------------------------------------------------------

SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
"""mini-swe-agent's submit: a command that echoes one of these hands in the
diff and ends the run. A submit is a write (it delivers the agent's change)."""

WRITE_PROGRAMS = frozenset({
    "rm", "rmdir", "unlink", "mv", "cp", "mkdir", "touch", "chmod", "chown", "ln", "install",
    "patch", "truncate", "dd", "tee", "shred", "ed", "vi", "vim", "nano", "unzip", "gunzip", "gzip",
})
"""Programs that change files whatever their arguments (editors and `tee`
included; `tee /dev/null` is too rare to special-case)."""

GIT_WRITE_SUBCOMMANDS = frozenset({
    "apply", "am", "commit", "checkout", "switch", "restore", "reset", "revert", "merge", "rebase",
    "cherry-pick", "stash", "add", "rm", "mv", "clean", "push", "pull", "init", "clone", "tag",
})
"""`git` subcommands that change the work tree, the index or a repository;
`git stash list|show` is the one read among them. `diff`, `log`, `show`,
`status`, `grep`, `blame`, `ls-files` and the rest are reads."""

PACKAGE_MANAGERS = frozenset({"pip", "pip3", "conda", "mamba", "apt", "apt-get", "npm", "yarn", "pnpm",
                              "poetry", "uv", "gem", "cargo", "go"})
PACKAGE_WRITE_SUBCOMMANDS = frozenset({"install", "uninstall", "remove", "add", "update", "upgrade", "get"})
"""Installing or removing packages changes the environment: a write."""

WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "nice", "timeout", "stdbuf", "command", "exec", "xargs",
                      "then", "do", "else", "if", "while", "until", "!"})
"""Words that run the command after them; the command after them is classified."""

SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
"""`bash -c STRING` and `bash <<EOF` bodies are classified as commands themselves."""

SEARCH_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "locate", "which", "whereis",
                             "diff", "cmp", "test", "[", "[[", "pgrep", "comm", "fd"})
"""Programs whose non-zero exit with no output means "found nothing" (grep:
no match, exit 1; `find | xargs grep`: exit 123): an empty read, not an error."""

HARMLESS_REDIRECT_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
"""Redirection to these is not a write; `> file` and `>> file` otherwise are."""


def _python_opens_for_writing(code: str) -> bool:
    for m in re.finditer(r"\bopen\(", code):
        depth, j, end = 1, m.end(), min(len(code), m.end() + 400)
        while j < end and depth:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        for lit in re.finditer(r"""(['"])([rwaxbt+U]{1,4})\1""", code[m.end():j]):
            if set(lit.group(2)) & set("wax+"):
                return True
    return False


PYTHON_WRITE_CALLS = re.compile(
    r"\.write_(?:text|bytes)\(|\bos\.(?:remove|unlink|rename|replace|makedirs|mkdir|rmdir|removedirs|truncate)\("
    r"|\bshutil\.(?:copy\w*|move|rmtree)\(|\.to_(?:csv|excel|json|parquet|pickle|feather|sql)\("
    r"|\.savefig\(|\.save\(|\.unlink\(|\.mkdir\(|\.rename\(|\.touch\(|\burlretrieve\("
    r"|^\s*[!%]\s*pip\s+install\b", re.M)
"""Python calls that write files or the environment; with `open(..., 'w'|'a'|'x'|'+')`."""


def python_writes(code: str) -> bool:
    """Whether inline Python (`python -c`, a here-document, a code block) writes.
    Code that only computes and prints is a read."""
    return bool(PYTHON_WRITE_CALLS.search(code)) or _python_opens_for_writing(code)


@dataclass
class Segment:
    """One simple command of a command line, its redirect targets and the
    here-document bodies it reads."""
    text: str = ""
    redirects: list[str] = field(default_factory=list)
    heredocs: list[str] = field(default_factory=list)


_SPECIAL = re.compile(r"[\"'\\#<>&;|\n()`]")
_DQ_END = re.compile(r'(?:\\.|[^"\\])*"', re.S)
_WORD = re.compile(r"""(?:[^\s'"\\;&|()<>]+|'[^']*'|"(?:\\.|[^"\\])*"|\\.)+""", re.S)
_TOKEN = re.compile(r"""(?:[^\s'"\\]+|'[^']*'?|"(?:\\.|[^"\\])*"?|\\.?)+""", re.S)
_UNQUOTE = re.compile(r"""'([^']*)'?|"((?:\\.|[^"\\])*)"?|\\(.?)""", re.S)


def _unquote(word: str) -> str:
    def one(m: re.Match) -> str:
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return re.sub(r'\\([\\"$`])', r"\1", m.group(2))
        return m.group(3)
    return _UNQUOTE.sub(one, word)


def _read_word(text: str, i: int) -> tuple[str, int]:
    """A shell word starting at `i` (quotes removed), and the index after it."""
    m = _WORD.match(text, i)
    return (_unquote(m.group(0)), m.end()) if m else ("", i)


def split_command(cmd: str) -> list[Segment]:
    """Split a command line into simple commands at `&&`, `||`, `|`, `;`, `&`,
    newlines and parentheses (subshells, `$(...)`), outside quotes; collect
    each one's `>`/`>>` targets and here-document bodies. `2>&1`-style
    duplications have no target."""
    segs, cur = [Segment()], []
    pending: list[tuple[Segment, str, bool]] = []  # here-documents opened on this line
    i, n = 0, len(cmd)

    def flush() -> None:
        segs[-1].text = "".join(cur).strip()
        cur.clear()
        segs.append(Segment())

    while i < n:
        m = _SPECIAL.search(cmd, i)
        if not m:
            cur.append(cmd[i:])
            break
        if m.start() > i:
            cur.append(cmd[i:m.start()])
            i = m.start()
        c = cmd[i]
        if c == "'":
            j = cmd.find("'", i + 1)
            j = n if j < 0 else j + 1
            cur.append(cmd[i:j])
            i = j
            continue
        if c == '"':
            dq = _DQ_END.match(cmd, i + 1)
            j = dq.end() if dq else n
            cur.append(cmd[i:j])
            i = j
            continue
        if c == "\\":
            cur.append(cmd[i:i + 2])
            i += 2
            continue
        if c == "#":
            if i == 0 or cmd[i - 1] in " \t\n;&|(":
                e = cmd.find("\n", i)
                i = n if e < 0 else e
            else:
                cur.append(c)
                i += 1
            continue
        if cmd.startswith("<<", i) and not cmd.startswith("<<<", i):
            j = i + 2
            strip_tabs = j < n and cmd[j] == "-"
            j += strip_tabs
            while j < n and cmd[j] in " \t":
                j += 1
            delim, j = _read_word(cmd, j)
            if delim:
                pending.append((segs[-1], delim, strip_tabs))
                i = j
                continue
            cur.append(cmd[i:i + 2])
            i += 2
            continue
        if c == "<":
            cur.append(c)
            i += 1
            continue
        if c == ">" or (c == "&" and cmd.startswith("&>", i)):
            j = i + (2 if c == "&" else 1)
            if j < n and cmd[j] in ">|":
                j += 1
            while j < n and cmd[j] in " \t":
                j += 1
            if j < n and cmd[j] == "&":          # 2>&1, >&2: a duplication, no file
                j += 1
                while j < n and (cmd[j].isdigit() or cmd[j] == "-"):
                    j += 1
            else:
                target, j = _read_word(cmd, j)
                segs[-1].redirects.append(target)
            if cur and cur[-1][-1:].isdigit():
                cur[-1] = cur[-1][:-1]
            i = j
            continue
        if c == "\n" and pending:
            flush()
            body_start = i + 1
            for seg, delim, strip_tabs in pending:
                lines, k = [], body_start
                while k < n:
                    e = cmd.find("\n", k)
                    e = n if e < 0 else e
                    line = cmd[k:e]
                    k = e + 1
                    if (line.lstrip("\t") if strip_tabs else line).strip() == delim:
                        break
                    lines.append(line)
                seg.heredocs.append("\n".join(lines))
                body_start = k
            pending.clear()
            i = body_start
            continue
        flush()                                   # ; | & newline ( ) `
        i += 2 if cmd.startswith(("&&", "||"), i) else 1
    flush()
    return [s for s in segs if s.text or s.redirects or s.heredocs]


def _tokens(text: str) -> list[str]:
    """Shell words with quotes removed (a fast approximation of shlex)."""
    return [_unquote(w) for w in _TOKEN.findall(text)]


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _program(tokens: list[str]) -> tuple[str, list[str]]:
    """The program a simple command runs (wrappers and `VAR=value` skipped) and its arguments."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if _ASSIGNMENT.match(tok):
            i += 1
            continue
        name = tok.rstrip("/").rsplit("/", 1)[-1]
        if name in WRAPPERS:
            i += 1
            while i < len(tokens) and tokens[i].startswith("-"):   # the wrapper's own options
                i += 2 if tokens[i] in ("-I", "-n", "-P", "-L", "-d", "-E", "-s", "-k", "-u") else 1
            if name == "timeout" and i < len(tokens) and re.match(r"^[\d.]+[smhd]?$", tokens[i]):
                i += 1
            continue
        return name, tokens[i + 1:]
    return "", []


def _is_python(prog: str) -> bool:
    return bool(re.match(r"^(python[\d.]*|ipython3?|pypy3?)$", prog))


def _segment_writes(prog: str, args: list[str], heredocs: list[str]) -> bool:
    if prog in WRITE_PROGRAMS:
        return True
    if prog == "sed":
        return any(a == "--in-place" or a.startswith("--in-place=")
                   or (a.startswith("-") and not a.startswith("--") and "i" in a[1:]) for a in args)
    if prog == "perl":
        return any(a.startswith("-") and not a.startswith("--") and "i" in a[1:] for a in args)
    if prog == "git":
        rest = list(args)
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-C", "-c") else rest[1:]
        if not rest:
            return False
        if rest[0] == "stash":
            return not (len(rest) > 1 and rest[1] in ("list", "show"))
        return rest[0] in GIT_WRITE_SUBCOMMANDS
    if prog in PACKAGE_MANAGERS:
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in PACKAGE_WRITE_SUBCOMMANDS
    if prog == "tar":
        flags = args[0] if args else ""
        return bool(re.search(r"[xcru]", flags.lstrip("-"))) or any(a in ("--extract", "--create") for a in args)
    if prog in ("wget", "curl"):
        if prog == "wget":
            return not any(a in ("-O-", "-qO-", "--output-document=-") for a in args) and \
                not any(a == "-O" and i + 1 < len(args) and args[i + 1] == "-" for i, a in enumerate(args))
        return any(a in ("-o", "-O", "--output", "--remote-name") or a.startswith("--output=") for a in args)
    if prog == "find":
        if "-delete" in args:
            return True
        for i, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                sub = [t for t in args[i + 1:] if t not in (";", "\\;", "+", "{}")]
                p, rest = _program(sub)
                if _segment_writes(p, rest, []):
                    return True
        return False
    if _is_python(prog):
        if "-c" in args:
            k = args.index("-c")
            return k + 1 < len(args) and python_writes(args[k + 1])
        if len(args) >= 2 and args[0] == "-m" and args[1] in PACKAGE_MANAGERS:
            return _segment_writes(args[1], args[2:], [])
        if args and args[0].endswith("setup.py"):
            return any(a in ("install", "develop", "build", "build_ext", "bdist_wheel", "sdist") for a in args[1:])
        if not args or args[0] == "-":
            return any(python_writes(h) for h in heredocs)
        return False
    if prog in SHELLS:
        if "-c" in args:
            k = args.index("-c")
            return k + 1 < len(args) and shell_facts(args[k + 1]).writes
        return any(shell_facts(h).writes for h in heredocs)
    return False


@dataclass(frozen=True)
class ShellFacts:
    writes: bool
    submits: bool
    programs: tuple[str, ...]

    @property
    def kind(self) -> str:
        return WRITE if self.writes or self.submits else READ

    @property
    def searches(self) -> bool:
        return any(p in SEARCH_PROGRAMS for p in self.programs)

    @property
    def runs_code(self) -> bool:
        return any(p in CODE_RUNNERS or re.fullmatch(r"python\d+(?:\.\d+)?", p) for p in self.programs)


def shell_facts(command: str) -> ShellFacts:
    """What a shell command line does: whether any simple command in it writes
    (a write program, `sed -i`, `git apply`, `> file`, inline Python that
    opens a file for writing...), whether it is mini-swe-agent's submit, and
    the programs it runs."""
    submits = any(m in command for m in SUBMIT_MARKERS)
    writes, programs = False, []
    for seg in split_command(command):
        prog, args = _program(_tokens(seg.text))
        if prog == "git" and args[:1] == ["grep"]:
            prog = "grep"
        programs.append(prog)
        if any(t and t not in HARMLESS_REDIRECT_TARGETS for t in seg.redirects):
            writes = True
        if prog and _segment_writes(prog, args, seg.heredocs):
            writes = True
    return ShellFacts(writes, submits, tuple(p for p in programs if p))


def classify_shell(command: str) -> str:
    """`read` or `write` for a shell command line (see `shell_facts`)."""
    return shell_facts(command).kind


# ---- code blocks (AG2's Computer_terminal, Magentic-One's ComputerTerminal) --------------------------

CODE_BLOCK = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)```", re.S)
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console", "zsh"})
SHELL_FIRST_WORDS = frozenset({"pip", "pip3", "apt", "apt-get", "ls", "cd", "echo", "curl", "wget", "cat", "git",
                               "mkdir", "rm", "mv", "cp", "export", "conda", "python", "python3", "sudo", "grep"})


def code_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a message as (language, code); an unlabelled
    block is shell when its first word is a shell command, else Python (the
    guess AutoGen's executors make)."""
    out = []
    for lang, code in CODE_BLOCK.findall(text):
        lang = lang.lower()
        if not lang:
            first = (code.strip().split() or [""])[0]
            lang = "sh" if first in SHELL_FIRST_WORDS else "python"
        out.append((lang, code))
    return out


def classify_code(blocks: list[tuple[str, str]]) -> str:
    """A code execution is a write when any block writes (shell blocks by the
    shell rule, Python by `python_writes`); code that computes, fetches and
    prints is a read."""
    for lang, code in blocks:
        if lang in SHELL_LANGUAGES and shell_facts(code).writes:
            return WRITE
        if lang not in SHELL_LANGUAGES and python_writes(code):
            return WRITE
    return READ


# ---- function tools (openai-chat, tau-bench): by name ------------------------------------------------

ASK_TOOLS = frozenset({"ask", "ask_user", "ask_human", "ask_question", "ask_followup_question", "askuserquestion",
                       "human", "human_input", "get_human_input", "request_user_input", "clarify", "ask_the_user"})
"""Tools that put a question to the user and wait: an ask."""

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "run_command", "execute_command", "run_shell_command",
                         "execute_bash", "run_terminal_cmd", "cmd", "exec", "local_shell", "computer_terminal"})
"""Tools that run a shell command (from the `command`, `cmd` or `script` argument): the shell rule decides."""

PYTHON_TOOLS = frozenset({"python", "run_python", "execute_python", "ipython", "code_interpreter", "run_code",
                          "execute_code", "python_interpreter"})
"""Tools that run Python (from `code`, `source` or `script`): `python_writes` decides."""

EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor", "edit_file", "editor"})
EDITOR_READ_COMMANDS = frozenset({"view", "read", "show", "cat"})
"""File-editor tools: a write unless their `command` argument only views a file."""

WRITE_VERBS = frozenset({
    "write", "edit", "create", "delete", "remove", "update", "modify", "send", "post", "put", "patch", "book",
    "cancel", "submit", "save", "apply", "insert", "append", "move", "rename", "upload", "commit", "push",
    "deploy", "install", "set", "add", "replace", "exchange", "return", "reset", "publish", "email", "pay",
    "purchase", "order", "reserve", "schedule", "approve", "merge", "refund", "register", "assign", "store",
})
"""A tool whose name starts with one of these verbs is a write (`book_reservation`,
`cancel_reservation`, `update_reservation_flights`, `send_certificate`);
any other tool is a read (`get_*`, `search_*`, `list_*`, `think`,
`calculate`, and `transfer_to_human_agents`, which hands the conversation
over without changing data)."""


def tool_words(name: str) -> list[str]:
    """`bookReservation`, `book-reservation`, `tools.book_reservation` -> ['book', 'reservation']."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.rsplit(".", 1)[-1])
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _arg_text(args: dict, *keys: str) -> str:
    for k in keys:
        v = args.get(k)
        if isinstance(v, list):
            v = " ".join(map(str, v))
        if isinstance(v, str):
            return v
    return ""


def classify_tool(name: str, args: dict) -> str:
    """`read`, `write` or `ask` for a named tool call: ask tools, then shell,
    Python and editor tools by their arguments, then the name's first verb."""
    key = "_".join(tool_words(name))
    if key in ASK_TOOLS or name.lower() in ASK_TOOLS:
        return ASK
    if key in SHELL_TOOLS:
        return classify_shell(_arg_text(args, "command", "cmd", "script", "commands"))
    if key in PYTHON_TOOLS:
        return WRITE if python_writes(_arg_text(args, "code", "source", "script", "input")) else READ
    if key in EDITOR_TOOLS:
        return READ if _arg_text(args, "command", "action").lower() in EDITOR_READ_COMMANDS else WRITE
    words = tool_words(name)
    return WRITE if words and words[0] in WRITE_VERBS else READ


# ---- results: ok, empty or error -----------------------------------------------------------------

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

EMPTY_JSON_RESULTS = frozenset({"[]", "{}", "null", '""'})
"""A tool that returned an empty JSON value found nothing: an empty read (a
search with no flights is not evidence)."""


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
        return EMPTY if facts is not None and facts.searches else ERROR
    if facts is not None and facts.runs_code:
        return ERROR if RUNNER_FAILED.search(output) else OK
    return ERROR if ERROR_OUTPUT.search(output) else OK


TEXT_ERROR = re.compile(r"^\s*(?:error\b|exception\b|traceback \(most recent call last\))", re.I)
"""A function tool's result that starts like this reports a failure (tau-bench's `Error: ...`)."""


def text_status(result: str) -> str:
    """The status of a function tool's result text: `empty` when blank or an
    empty JSON value (`EMPTY_JSON_RESULTS`); `error` when it starts with
    `Error`, `Exception` or a traceback, or is a JSON object with a non-empty
    `error` key; otherwise `ok`."""
    text = result.strip()
    if not text or text in EMPTY_JSON_RESULTS:
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
    return OK
