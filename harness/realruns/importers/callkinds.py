"""What a call is: a read, a write or an ask, by the rules every importer
applies, one constant or function each (a result's status is
`resultstatus`; a corpus's overrides of the tool rule `toolkinds`).

Words as in the research-loop spec: a **write** has side effects, an **ask**
waits for the user, everything else is a **read**.

Shell commands are classified by what they could change, not what they
print: a command is a read unless some part of it is known to write.
Running a program (`python script.py`, `pytest`) is a read: its own side
effects are invisible in the command line and its output is what the agent
learns from. `shellsyntax` cuts a command line into the simple commands
judged here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .shellsyntax import shell_words, split_command

READ, WRITE, ASK = "read", "write", "ask"

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
    """What a command line does: whether it writes, whether it is mini-swe-agent's
    submit, and the programs it runs (which `resultstatus` reads an exit code by)."""
    writes: bool
    submits: bool
    programs: tuple[str, ...]

    @property
    def kind(self) -> str:
        return WRITE if self.writes or self.submits else READ


def shell_facts(command: str) -> ShellFacts:
    """What a shell command line does: whether any simple command in it writes
    (a write program, `sed -i`, `git apply`, `> file`, inline Python that
    opens a file for writing...), whether it is mini-swe-agent's submit, and
    the programs it runs."""
    submits = any(m in command for m in SUBMIT_MARKERS)
    writes, programs = False, []
    for seg in split_command(command):
        prog, args = _program(shell_words(seg.text))
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


# ---- SQL statements (InterCode's SQL environment): read or write ----------------------------------

SQL_READ_STATEMENTS = frozenset({"select", "show", "describe", "desc", "explain", "use", "with", "help", "values",
                                 "table"})
"""Statements that only look: queries, the schema, the plan; `use db` picks
the session's database and changes no data. A statement whose first word
is neither these nor `SQL_WRITE_STATEMENTS` (the model's prose sent as a
query) changes nothing either: a read."""

SQL_WRITE_STATEMENTS = frozenset({"insert", "update", "delete", "replace", "merge", "create", "drop", "alter",
                                  "truncate", "rename", "grant", "revoke", "load", "lock", "set", "call", "commit",
                                  "rollback", "vacuum", "optimize", "repair"})
"""Statements that change the database (data, schema, privileges, the
session's variables and locks, a transaction's fate; `call` runs a stored
procedure, which may write): a write."""

SQL_DML_IN_QUERY = re.compile(r"\b(?:insert\s+into|update\s+\w+\s+set|delete\s+from|into\s+(?:outfile|dumpfile))\b",
                              re.I)
"""A `WITH ...` or `SELECT ...` that writes all the same: a common table
expression feeding an INSERT, UPDATE or DELETE, or `SELECT ... INTO OUTFILE`."""

_SQL_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*.*?\*/", re.S)
_SQL_STRINGS = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`", re.S)


def classify_sql(query: str) -> str:
    """`read` or `write` for SQL text: a write when any of its statements
    starts with a word of `SQL_WRITE_STATEMENTS`, or a query holds DML or
    writes a file (`SQL_DML_IN_QUERY`); otherwise a read."""
    text = _SQL_COMMENTS.sub(" ", _SQL_STRINGS.sub("''", query))
    for statement in text.split(";"):
        words = statement.split()
        if not words:
            continue
        first = words[0].lower().strip("(")
        if first in SQL_WRITE_STATEMENTS:
            return WRITE
        if first in SQL_READ_STATEMENTS and SQL_DML_IN_QUERY.search(statement):
            return WRITE
    return READ


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
