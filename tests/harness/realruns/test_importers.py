"""Importers of other agents' trajectories (`harness.realruns.importers`):
the mapping's decisions on small synthetic files, malformed input, the
folder layout and CLI, and every raw file of ../shared/data/raw."""
from __future__ import annotations

import ast
import gzip
import inspect
import json
from pathlib import Path

import pytest

from harness.realruns import importers
from harness.cli import build_parser, import_runs, main as imprint
from harness.realruns.importers import FORMATS, detect_format, import_file, import_paths
from harness.realruns.importers import (callkinds, chat, convert, intercode, minisweagent, rawfiles, resultstatus,
                                        shellsyntax, whoandwhen)
from harness.realruns.importers.callkinds import (ASK, READ, WRITE, classify_code, classify_shell, classify_tool,
                                                  code_blocks, python_writes, shell_facts)
from harness.realruns.importers.resultstatus import EMPTY, ERROR, OK, shell_status, text_status
from harness.realruns.roundlogs import read_round_log, replay, round_view
from helpers import chat_assistant as assistant, chat_call as call, chat_tool as tool, mini_swe, shell_obs as obs
from imprint_core.stoprules import build as build_rule
from imprint_core.errors import UserInputError

RAW = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "raw"
ROUNDLOGS = RAW.parent / "roundlogs" / "tau-bench-airline"


# ---- builders of synthetic raw files ---------------------------------------------------------------

def write_json(path: Path, data, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def index_line(file: str, resolved) -> str:
    return json.dumps({"file": file, "run": "run1", "instance_id": "demo__demo-1", "resolved": resolved,
                       "resolved_source": "report.json", "source": "org/repo@abc:output/demo.traj.json"})


MAGENTIC = {
    "question": "Where?", "ground_truth": "There", "is_corrected": False, "question_ID": "q-1",
    "mistake_agent": "WebSurfer", "mistake_step": "5", "mistake_reason": "clicked the wrong link",
    "history": [
        {"role": "human", "content": "Where?"},                                          # 0
        {"role": "Orchestrator (thought)", "content": "Initial plan: ..."},              # 1
        {"role": "Orchestrator (-> WebSurfer)", "content": "Search for it."},            # 2  round 1
        {"role": "Orchestrator (thought)", "content": "Next speaker WebSurfer"},         # 3
        {"role": "WebSurfer", "content": "I typed 'it' into the search box.\nResults: A, B"},  # 4
        {"role": "Orchestrator (-> WebSurfer)", "content": "Open result A."},            # 5  round 2 (no reply)
        {"role": "Orchestrator (thought)", "content": "Updated Ledger: WebSurfer hit an error"},  # 6
        {"role": "Orchestrator (-> FileSurfer)", "content": "Open the PDF."},            # 7  round 3
        {"role": "FileSurfer", "content": "Address: file:///w/x.pdf\nTitle: Error 404\n=======================\n"
                                          "## Error 404\n\nFile not found: /w/x.pdf"},  # 8
        {"role": "Orchestrator (-> Assistant)", "content": "Write code to count."},      # 9  round 4
        {"role": "Assistant", "content": "```python\nprint(6 * 7)\n```"},                # 10
        {"role": "Orchestrator (-> ComputerTerminal)", "content": "Run it."},            # 11 round 5
        {"role": "ComputerTerminal", "content": "The script ran, then exited with Unix exit code: 0\n"
                                                "Its output was:\n42"},                  # 12
        {"role": "Orchestrator (-> WebSurfer)", "content": "Summarize the page."},       # 13 round 6
        {"role": "WebSurfer", "content": "Nothing to summarize.\nError processing publish message\n"
                                         "Traceback (most recent call last):\n  File \"x\""},  # 14
        {"role": "Orchestrator (-> WebSurfer)", "content": "Scroll down."},              # 15 (log ends: left out)
    ],
}

AG2 = {
    "question": "How many?", "ground_truth": "8", "is_correct": False, "question_ID": "ag-1", "level": "2",
    "mistake_agent": "Expert_B", "mistake_step": "3", "mistake_reason": "wrong count", "system_prompt": {},
    "history": [
        {"role": "assistant", "name": "Expert_A", "content": "Plan:\n```python\nprint(len([1, 2]))\n```"},   # 0
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution succeeded)\nCode output: 2\n"},
        {"role": "user", "name": "Expert_B", "content": "Looks right to me."},                                # 2
        {"role": "user", "name": "Computer_terminal",
         "content": "There is no code from the last 1 message for me to execute. Group chat manager should ..."},
        {"role": "user", "name": "Expert_B",
         "content": "```python\nwith open('out.csv', 'w') as f:\n    f.write('x')\n```"},                    # 4
        {"role": "user", "name": "Computer_terminal",
         "content": "exitcode: 1 (execution failed)\nCode output: Traceback (most recent call last):\n"
                    "  File \"\", line 1\nPermissionError: denied\n"},
        {"role": "user", "name": "Expert_A", "content": "```sh\ngrep -c nothing data.txt\n```"},            # 6
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution failed)\nCode output: \n"},
        {"role": "user", "name": "Expert_C", "content": "Unrun code:\n```python\nprint(3)\n```"},            # 8
        {"role": "user", "name": "Expert_C", "content": "TERMINATE"},
    ],
}


def tau_runs() -> list[dict]:
    def run(task, trial, reward, traj):
        return {"task_id": task, "trial": trial, "reward": reward, "info": {}, "traj": traj}
    traj = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Book me a flight."},
        {"role": "assistant", "content": "Your user id?"},
        {"role": "user", "content": "u1"},
        assistant(call("t1", "get_user_details", {"user_id": "u1"})), tool("t1", '{"name": "U"}'),
        assistant(call("t2", "search_direct_flight", {"origin": "A"})), tool("t2", "[]"),
        assistant(call("t3", "think", {"thought": "hmm"})), tool("t3", ""),
        {"role": "user", "content": "yes, book it"},
        assistant(call("t4", "book_reservation", {"user_id": "u1"})), tool("t4", "Error: payment method not found"),
        assistant(call("t5", "transfer_to_human_agents", {"summary": "s"})), tool("t5", "Transfer successful"),
    ]
    return [run(0, 0, 1.0, traj), run(0, 1, 0.0, traj[:4]), run(3, 0, 0.0, traj)]


def chat_messages() -> list[dict]:
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Find x."},
        assistant(call("a", "search", {"q": "x"}), call("b", "ask_user", {"question": "Which x?"})),
        tool("a", [{"type": "text", "text": "result one"}, {"type": "image_url", "image_url": {}}]),
        tool("b", "the blue one"),
        {"role": "assistant", "content": "Thinking aloud, no calls."},
        {"role": "user", "content": "hurry"},
        assistant(call("c", "write_file", {"path": "n.md"})), tool("c", "saved"),
        assistant(call("d", "fetch", '{"url": ')),                  # broken arguments
        tool("d", "Error: bad arguments"),
        assistant(call("e", "search", {"q": "y"})),                 # unanswered, the run goes on
        {"role": "assistant", "content": "", "function_call": {"name": "search", "arguments": "{\"q\": \"z\"}"}},
        {"role": "function", "name": "search", "content": ""},
        assistant(call("f", "search", {"q": "never ran"})),         # the log ends on it
    ]


# ---- what a call is: read, write or ask -------------------------------------------------------------

@pytest.mark.parametrize("command", [
    "cat a.py", "grep -rn foo src | head -20", "find . -name '*.py'", "ls -la", "sed -n '10,20p' a.py",
    "git diff", "git log --oneline -3", "git stash list", "git grep foo", "python -c \"print(1 > 0)\"",
    "cd /testbed && python reproduce.py", "timeout 60 python -m pytest -x tests", "echo 'a > b'", "grep '>' f",
    "awk '$1 > 3' data", "ls 2>&1 | head", "python x.py 2>/dev/null", "cat <<EOF | python\nprint(2)\nEOF",
    "python - <<'EOF'\nif a > b:\n    print(open('f').read())\nEOF", "pip list", "nl -ba a.py | sed -n '1,5p'",
    "curl -s https://example.com", "wget -qO- https://example.com", "tar -tzf x.tgz", "which python",
])
def test_shell_reads(command):
    """A command is a read unless some part of it is known to write."""
    assert classify_shell(command) == READ


@pytest.mark.parametrize("command", [
    "sed -i 's/a/b/' a.py", "sed -i.bak 's/a/b/' a.py", "sed --in-place 's/a/b/' a.py", "echo x > f.txt",
    "echo x >> f.txt", "cat > fix.py << 'EOF'\nprint(1)\nEOF\npython fix.py", "git apply fix.patch",
    "git checkout -- a.py", "git stash", "rm -f a.py", "mv a b", "cp a.py.bak a.py", "touch x", "mkdir -p d",
    "patch -p1 < fix.patch", "pip install -e .", "python -m pip install numpy", "conda install x",
    "python -c \"open('a.py', 'w').write('')\"", "python3 - <<'EOF'\nfrom pathlib import Path\n"
    "Path('a').write_text('x')\nEOF", "find . -name '*.pyc' -delete", "find . -name x -exec rm {} \\;",
    "find . -name '*.py' | xargs sed -i 's/a/b/'", "perl -pi -e 's/a/b/' f", "echo x | tee out.txt",
    "bash -c 'rm -rf build'", "for f in *.py; do sed -i 's/x/y/' $f; done", "python setup.py develop",
    "ls &> listing.txt", "wget https://example.com/x.zip", "curl -o x.zip https://example.com/x.zip",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
])
def test_shell_writes(command):
    """Writes: write programs, `sed -i`, `>`/`>>`, git's changing subcommands,
    installs, inline Python that writes, `find -delete`, and the submit."""
    assert classify_shell(command) == WRITE


def test_submit_is_recognised_apart_from_other_writes():
    assert shell_facts("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt").submits
    assert not shell_facts("sed -i 's/a/b/' f").submits


def test_here_document_bodies_are_not_commands():
    # `rm` and `>` inside the body are text written to the file, not commands of the line
    cmd = "cat <<'EOF' | python\nimport os\n# rm -rf / > x\nprint(1)\nEOF"
    assert classify_shell(cmd) == READ
    seg = shellsyntax.split_command("cat > a.txt <<-END\n\trm x\n\tEND\nls")
    assert [s.text for s in seg] == ["cat", "ls"] and seg[0].heredocs == ["\trm x"] and seg[0].redirects == ["a.txt"]


def test_a_line_continuation_joins_lines_and_is_no_word():
    # bash drops `\<newline>`: the command after it is the program, not a word "\n" before it
    assert shell_facts("cd /t && \\\n  sed -i 's/a/b/' f").kind == WRITE
    assert shell_facts("ls && \\\n# a note\ngrep -n x f").programs == ("ls", "grep")
    assert shell_facts("gr\\\nep -n x f").programs == ("grep",)


@pytest.mark.parametrize("code,writes", [
    ("print(sum(range(3)))", False), ("df = pd.read_csv('x.csv')\nprint(df.head())", False),
    ("open('x.txt').read()", False), ("open('x.txt', 'r', encoding='utf-8')", False),
    ("with open('x.txt', 'w') as f:\n    f.write('1')", True), ("open(p, mode='a')", True),
    ("df.to_csv('out.csv')", True), ("plt.savefig('p.png')", True), ("os.remove('x')", True),
    ("shutil.rmtree('d')", True), ("!pip install requests", True),
])
def test_python_writes(code, writes):
    assert python_writes(code) is writes


def test_code_blocks_and_their_kind():
    """Unlabelled blocks are shell when they start with a shell command, else Python."""
    text = "Run:\n```\npip install x\n```\nthen\n```\nprint(1)\n```\nand\n```sh\nls\n```"
    assert [lang for lang, _ in code_blocks(text)] == ["sh", "python", "sh"]
    assert classify_code(code_blocks(text)) == WRITE
    assert classify_code(code_blocks("```python\nprint(1)\n```")) == READ
    assert classify_code([]) == READ


@pytest.mark.parametrize("name,args,kind", [
    ("get_user_details", {}, READ), ("search_direct_flight", {}, READ), ("think", {}, READ),
    ("calculate", {}, READ), ("transfer_to_human_agents", {}, READ), ("list_all_airports", {}, READ),
    ("book_reservation", {}, WRITE), ("cancel_reservation", {}, WRITE), ("update_reservation_flights", {}, WRITE),
    ("send_certificate", {}, WRITE), ("writeFile", {}, WRITE), ("tools.save_note", {}, WRITE),
    ("submit", {}, WRITE), ("ask_user", {}, ASK), ("AskUserQuestion", {}, ASK), ("ask_followup_question", {}, ASK),
    ("human", {}, ASK), ("bash", {"command": "cat x"}, READ), ("bash", {"command": "rm x"}, WRITE),
    ("run_shell_command", {"command": ["ls", "-la"]}, READ), ("python", {"code": "print(1)"}, READ),
    ("execute_python", {"code": "open('a','w')"}, WRITE), ("str_replace_editor", {"command": "view"}, READ),
    ("str_replace_editor", {"command": "str_replace"}, WRITE), ("str_replace_editor", {"command": "create"}, WRITE),
])
def test_tool_kinds_by_name(name, args, kind):
    """Function tools: ask names, shell/Python/editor tools by their arguments, else the name's first verb."""
    assert classify_tool(name, args) == kind


# ---- what a result is: ok, empty or error -----------------------------------------------------------

GREP = shell_facts("grep -n foo a.py")
FIND_GREP = shell_facts("find . -name '*.py' | xargs grep -l foo")
PYTHON = shell_facts("python x.py")


@pytest.mark.parametrize("kind,rc,output,facts,status", [
    (READ, 0, "a.py\n", None, OK),
    (READ, 0, "  \n", None, EMPTY),                         # succeeded, printed nothing
    (WRITE, 0, "", None, OK),                               # a write needs no output
    (READ, 1, "", GREP, EMPTY),                             # grep: no match
    (READ, 123, "", FIND_GREP, EMPTY),                      # xargs grep: no match
    (READ, 1, "", PYTHON, ERROR),                           # a silent failure that searched nothing
    (READ, 127, "bash: tree: command not found\n", None, ERROR),
    # code that ran and failed: the traceback is evidence about the code (CODE_RUNNERS)
    (READ, 1, "Traceback (most recent call last):\n  File \"x.py\"\nValueError\n", PYTHON, OK),
    (READ, 1, "FAILED tests/test_x.py::t - AssertionError\n1 failed\n", shell_facts("cd /r && pytest -x"), OK),
    (READ, 1, "Traceback (most recent call last):\n  File \"x.py\"\nValueError\n", shell_facts("python3.11 x.py"), OK),
    # ... unless the runner never ran it
    (READ, 2, "python: can't open file '/r/x.py': [Errno 2] No such file or directory\n", PYTHON, ERROR),
    (READ, 2, "usage: pytest [options]\npytest: error: unrecognized arguments: --bad\n", shell_facts("pytest --bad"),
     ERROR),
    # not a code runner: a traceback printed by a tool is a failure of the tool
    (READ, 1, "Traceback (most recent call last):\n  File \"/usr/bin/tool\"\nValueError\n", shell_facts("tool x"),
     ERROR),
    (READ, 2, "grep: a.cfg: No such file or directory\n", GREP, ERROR),
    (READ, 128, "error: corrupt patch at line 14\n", None, ERROR),
    (READ, 4, "ERROR: not found: tests/x.py::t\n", PYTHON, ERROR),
    (READ, 1, "FAILED tests/test_x.py::test_a - assert 1 == 2\n1 failed in 0.1s\n", PYTHON, OK),  # test evidence
    (READ, 1, "3c3\n< a\n---\n> b\n", shell_facts("diff a b"), OK),                                  # differences
    (READ, 65, "L:   3 | P:  10 | L003 | Indentation\n", None, OK),                                  # lint findings
    (WRITE, 1, "sed: -e expression #1: unterminated s command\n", None, ERROR),
    (WRITE, 1, "", None, ERROR),
    (READ, -1, "", None, ERROR),                            # mini-swe-agent's timeout
    (READ, 124, "partial output", None, ERROR),             # `timeout` killed it
    (READ, None, "output", None, ERROR),                    # no exit code at all
])
def test_shell_status(kind, rc, output, facts, status):
    """Non-zero exits: errors when the output says so, empty reads when a
    search found nothing, evidence otherwise."""
    assert shell_status(kind, rc, output, facts) == status


def test_shell_status_exception_is_an_error():
    assert shell_status(READ, 0, "out", exception="timed out after 60 seconds") == ERROR


@pytest.mark.parametrize("result,status", [
    ("", EMPTY), ("   \n", EMPTY), ("[]", EMPTY), ("{}", EMPTY), ("null", EMPTY),
    ("Error: payment method not found", ERROR), ("error: bad", ERROR), ("Exception: boom", ERROR),
    ("Traceback (most recent call last):\n ...", ERROR), ('{"error": "not found"}', ERROR),
    ('{"error": null, "data": 1}', OK), ('{"name": "U"}', OK), ("Errors found: 0", OK), ("42", OK),
    # issue 45: an envelope of nothing is empty whatever sits beside its lists (novelty's evidence_free decides)
    ('{"query": "flights to nyc", "results": [], "took_ms": 31}', EMPTY),
    ('{"status": "ok", "count": 0, "items": []}', EMPTY), ('{"results": [], "request_id": "a1b2-c3"}', EMPTY),
    ('{"results": [], "error": "quota exceeded"}', ERROR), ('{"results": ["LAX-JFK 09:10"], "took": 3}', OK),
])
def test_text_status(result, status):
    assert text_status(result) == status


# ---- mini-swe-agent ----------------------------------------------------------------------------

def test_mini_swe_agent_rounds(tmp_path):
    path = write_json(tmp_path / "run1" / "demo__demo-1.traj.json.gz", mini_swe(), gz=True)
    (tmp_path / "index.jsonl").write_text(index_line("run1/demo__demo-1.traj.json.gz", True) + "\n")
    [log] = import_file(path)
    got = [(r.number, c.tool, c.kind, c.status) for r in log.rounds for c in r.calls]
    assert got == [(1, "bash", READ, OK), (2, "bash", READ, EMPTY), (3, "bash", WRITE, OK),
                   (4, "bash", READ, ERROR), (5, "bash", READ, OK), (6, "bash", WRITE, OK)]
    calls = [r.calls[0] for r in log.rounds]
    assert calls[0].result == "a.py\nb.py" and calls[0].args == {"command": "cd /testbed && ls"}
    assert calls[3].result.startswith("Tool call error") and calls[3].args == {"arguments": '{"command": "ls'}
    assert calls[5].result == "diff --git a/x b/x\n"                        # the submission
    assert log.source == "org/repo@abc:output/demo.traj.json"
    lab = log.labels
    assert lab["resolved"] is True and lab["run"] == "run1" and lab["instance_id"] == "demo__demo-1"
    assert lab["source_format"] == "mini-swe-agent" and lab["exit_status"] == "Submitted"
    assert lab["submitted"] is True and lab["model"] == "test/model" and lab["num_rounds"] == 6


def test_mini_swe_agent_without_index_and_plain_json(tmp_path):
    path = write_json(tmp_path / "x.traj.json", mini_swe())
    [log] = import_file(path)
    assert log.labels["resolved"] is None and log.source == str(path) and len(log.rounds) == 6


def test_mini_swe_agent_index_matches_gz_or_plain_name(tmp_path):
    path = write_json(tmp_path / "r" / "demo__demo-1.traj.json", mini_swe())
    (tmp_path / "index.jsonl").write_text(index_line("r/demo__demo-1.traj.json.gz", False) + "\n")
    assert import_file(path)[0].labels["resolved"] is False


def test_mini_swe_agent_timeout_exit_and_wrapper(tmp_path):
    data = mini_swe()
    data["messages"][3] = tool("c1", "<exception>timed out after 60 seconds</exception>\n" + obs(-1, ""))
    data["messages"] = data["messages"][:12] + [assistant(call("c9", "bash", {"command": "ls"})),
                                                {"role": "exit", "content": "Timeout", "extra": {}}]
    data["info"]["exit_status"] = "Timeout"
    [log] = import_file(write_json(tmp_path / "t.traj.json", data))
    assert log.rounds[0].calls[0].status == ERROR
    assert log.rounds[0].calls[0].result.startswith("<exception>timed out")
    assert len(log.rounds) == 5                             # the last call never ran: left out


def test_mini_swe_agent_text_based_actions(tmp_path):
    """The format before tool calls: one ```bash block per assistant message, the observation in a user message."""
    data = {"info": {"exit_status": "Submitted", "submission": "d"}, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "THOUGHT\n```bash\ncat a.py\n```"},
        {"role": "user", "content": obs(0, "x = 1\n")},
        {"role": "assistant", "content": "two actions\n```bash\nls\n```\n```bash\nrm x\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
        {"role": "assistant", "content": "no action at all"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action."},
        {"role": "assistant", "content": "```bash\necho MINI_SWE_AGENT_FINAL_OUTPUT && git diff\n```"},
    ]}
    [log] = import_file(write_json(tmp_path / "old.traj.json", data))
    got = [[(c.args["command"], c.kind, c.status) for c in r.calls] for r in log.rounds]
    assert got == [[("cat a.py", READ, OK)], [("ls", READ, ERROR), ("rm x", WRITE, ERROR)],
                   [("echo MINI_SWE_AGENT_FINAL_OUTPUT && git diff", WRITE, OK)]]
    assert log.rounds[0].calls[0].result == "x = 1"


def test_observation_keeps_what_the_agent_saw():
    assert minisweagent.observation(obs(0, "hi\n")) == (0, "hi", "", "hi")
    long = "<returncode>0</returncode>\n<warning>long</warning><output_head>a</output_head>" \
           "<elided_chars>9</elided_chars><output_tail>z</output_tail>"
    rc, out, exc, kept = minisweagent.observation(long)
    assert rc == 0 and kept.startswith("<warning>long") and kept.endswith("</output_tail>")


# ---- who-and-when -------------------------------------------------------------------------------

def test_magentic_one_rounds(tmp_path):
    [log] = import_file(write_json(tmp_path / "Hand-Crafted" / "7.json", MAGENTIC))
    got = [(c.tool, c.kind, c.status) for r in log.rounds for c in r.calls]
    assert got == [("WebSurfer", READ, OK), ("WebSurfer", READ, ERROR), ("FileSurfer", READ, ERROR),
                   ("Assistant", READ, OK), ("ComputerTerminal", READ, OK), ("WebSurfer", READ, EMPTY)]
    calls = [r.calls[0] for r in log.rounds]
    # the call is the action WebSurfer took; the Orchestrator's instruction is kept as the request
    assert calls[0].args == {"action": "I typed 'it' into the search box."} and calls[0].result.startswith("I typed")
    assert calls[0].request == "Search for it."
    assert calls[1].args == {"instruction": calls[1].request}         # never answered: no action to name
    assert set(calls[4].args) == {"code"} and calls[4].request      # a terminal's action: the code it ran
    assert calls[1].result == ""                                     # never answered, the run went on
    assert calls[4].result == "42"                                   # the program's output, no wrapper
    assert calls[5].result == "Nothing to summarize."                # the runtime's traceback is cut
    lab = log.labels
    assert lab["system"] == "magentic-one" and lab["correct"] is False and lab["instance_id"] == "q-1"
    assert lab["mistake_step"] == "5" and lab["mistake_round"] == 2 and lab["num_rounds"] == 6


def test_six_identical_clicks_under_reworded_instructions_are_six_identical_calls():
    history = [{"role": "human", "content": "Find the email."}]
    for n in range(6):
        history += [{"role": "Orchestrator (-> WebSurfer)", "content": f"Try clicking the link again, attempt {n}."},
                    {"role": "WebSurfer", "content": "I clicked 'Email the Department'.\n\nHere is a screenshot of "
                                                     "[Contact us](https://x.example/contact). The page is unchanged."}]
    rounds, _ = whoandwhen.magentic_one_rounds(history)
    views = [round_view(r) for r in rounds]
    assert len({v.calls[0].action for v in views}) == 1
    assert len({r.calls[0].request for r in rounds}) == 6
    rule = build_rule("gemini-cli", {"threshold": 3})
    assert [bool(rule.observe(v)) for v in views][:3] == [False, False, True]


def test_magentic_one_terminal_kinds_and_statuses():
    assert whoandwhen.terminal_result(READ, "No code block detected in the messages.") == \
        (ERROR, "No code block detected in the messages.")
    assert whoandwhen.terminal_result(READ, "The script ran but produced no output to console. "
                                            "The Unix exit code was: 0. If you...") == (EMPTY, "")
    assert whoandwhen.reply_status("FileSurfer", READ, "Address: about:blank\nViewport: 1\n=======================")[0] \
        == EMPTY
    history = [dict(m) for m in MAGENTIC["history"][:12]]
    history[10] = {"role": "Assistant", "content": "```python\nopen('o.txt', 'w').write('1')\n```"}
    history.append({"role": "ComputerTerminal", "content": "The script ran, then exited with Unix exit code: 1\n"
                                                           "Its output was:\nTraceback (most recent call last):\n"})
    rounds, _ = whoandwhen.magentic_one_rounds(history)
    assert (rounds[-1].calls[0].kind, rounds[-1].calls[0].status) == (WRITE, ERROR)


def test_ag2_rounds(tmp_path):
    [log] = import_file(write_json(tmp_path / "Algorithm-Generated" / "3.json", AG2))
    got = [(c.tool, c.args["speaker"], c.kind, c.status, c.result) for r in log.rounds for c in r.calls]
    assert got == [("Computer_terminal", "Expert_A", READ, OK, "2\n"),
                   ("Computer_terminal", "Expert_B", WRITE, ERROR,
                    "Traceback (most recent call last):\n  File \"\", line 1\nPermissionError: denied\n"),
                   ("Computer_terminal", "Expert_A", READ, EMPTY, "")]        # a shell grep that found nothing
    assert log.rounds[0].calls[0].args["blocks"] == [{"language": "python", "code": "print(len([1, 2]))\n"}]
    lab = log.labels
    assert lab["system"] == "ag2" and lab["correct"] is False and lab["level"] == "2"
    assert lab["mistake_round"] == 2 and lab["num_messages"] == 10       # step 3 (no code) -> the next round


@pytest.mark.parametrize("step,spans,expected", [
    ("0", [(2, 4), (5, 8)], 1), ("4", [(2, 4), (5, 8)], 1), ("6", [(2, 4), (5, 8)], 2), ("9", [(2, 4)], None),
    (None, [(2, 4)], None), ("n/a", [(2, 4)], None), (3, [(2, 4)], 1),
])
def test_mistake_round(step, spans, expected):
    """The round holding the mistake's message, or the first round after it."""
    assert whoandwhen.mistake_round(step, spans) == expected


# ---- tau-bench and openai-chat ---------------------------------------------------------------------

def test_tau_bench_runs(tmp_path):
    logs = import_file(write_json(tmp_path / "gpt-4o-airline.json.gz", tau_runs(), gz=True))
    assert [log.name for log in logs] == ["0-0.jsonl", "0-1.jsonl", "3-0.jsonl"]
    first = logs[0]
    got = [(c.tool, c.kind, c.status) for r in first.rounds for c in r.calls]
    assert got == [("get_user_details", READ, OK), ("search_direct_flight", READ, EMPTY), ("think", READ, EMPTY),
                   ("book_reservation", WRITE, ERROR), ("transfer_to_human_agents", READ, OK)]
    assert first.labels == {"reward": 1.0, "task_id": 0, "num_rounds": 5, "trial": 0,
                            "user_turn_before_round": [1, 4], "source_format": "tau-bench",
                            "source_file": str(tmp_path / "gpt-4o-airline.json.gz"), "instance_id": "0-0",
                            "outcome": {"value": "success", "field": "reward", "raw": 1.0,
                                        "from": f"{tmp_path / 'gpt-4o-airline.json.gz'} [0].reward"}}
    assert logs[1].rounds == [] and logs[1].labels["reward"] == 0.0
    assert logs[1].labels["outcome"]["value"] == "failure"


def test_openai_chat_rounds(tmp_path):
    """One round per assistant message with calls; text-only turns are no rounds."""
    [log] = import_file(write_json(tmp_path / "agent.json", chat_messages()))
    got = [[(c.tool, c.kind, c.status, c.result) for c in r.calls] for r in log.rounds]
    assert got == [[("search", READ, OK, "result one"), ("ask_user", ASK, OK, "the blue one")],
                   [("write_file", WRITE, OK, "saved")],
                   [("fetch", READ, ERROR, "Error: bad arguments")],
                   [("search", READ, EMPTY, "")],                 # unanswered while the run went on: as OTel
                                                                  # takes it (issue 44 item 11)
                   [("search", READ, EMPTY, "")]]                 # the legacy function_call
    assert log.rounds[2].calls[0].args == {"arguments": '{"url": '}
    assert log.labels["user_turn_before_round"] == [1, 2] and log.labels["instance_id"] == "agent"


def test_openai_chat_object_and_json_lines(tmp_path):
    obj = {"id": "run-9", "labels": {"correct": True}, "messages": chat_messages()[:5]}
    [log] = import_file(write_json(tmp_path / "a.json", obj))
    assert log.labels["correct"] is True and log.labels["instance_id"] == "run-9" and len(log.rounds) == 1
    lines = tmp_path / "b.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in chat_messages()[:5]) + "\n")
    assert detect_format(lines) == "openai-chat"
    assert len(import_file(lines)[0].rounds) == 1


# ---- detection, folders, writing ----------------------------------------------------------------

@pytest.fixture
def tree(tmp_path) -> Path:
    """A folder of every format, as in ../shared/data/raw."""
    raw = tmp_path / "raw"
    write_json(raw / "mini-swe-agent" / "run1" / "demo__demo-1.traj.json.gz", mini_swe(), gz=True)
    (raw / "mini-swe-agent" / "index.jsonl").write_text(index_line("run1/demo__demo-1.traj.json.gz", True) + "\n")
    write_json(raw / "who-and-when" / "Hand-Crafted" / "7.json", MAGENTIC)
    write_json(raw / "who-and-when" / "Algorithm-Generated" / "3.json", AG2)
    write_json(raw / "tau-bench" / "gpt-4o-airline.json.gz", tau_runs(), gz=True)
    write_json(raw / "chat" / "agent.json", chat_messages())
    (raw / "LICENSE-NOTE.md").write_text("not a trajectory")
    write_json(raw / ".hidden" / "x.json", {"nothing": 1})
    return raw


@pytest.mark.parametrize("rel,fmt", [
    ("mini-swe-agent/run1/demo__demo-1.traj.json.gz", "mini-swe-agent"),
    ("who-and-when/Hand-Crafted/7.json", "who-and-when"), ("who-and-when/Algorithm-Generated/3.json", "who-and-when"),
    ("tau-bench/gpt-4o-airline.json.gz", "tau-bench"), ("chat/agent.json", "openai-chat"),
])
def test_detect_format(tree, rel, fmt):
    assert detect_format(tree / rel) == fmt


def test_import_paths_layout(tree, tmp_path):
    out = tmp_path / "out"
    seen = []
    written = import_paths([tree], out, progress=lambda done, total, path: seen.append((done, total)))
    rel = sorted(p.relative_to(out).as_posix() for p in written)
    assert rel == ["chat/agent.jsonl", "mini-swe-agent/run1/demo__demo-1.jsonl",
                   "tau-bench/gpt-4o-airline/0-0.jsonl", "tau-bench/gpt-4o-airline/0-1.jsonl",
                   "tau-bench/gpt-4o-airline/3-0.jsonl",
                   "who-and-when/Algorithm-Generated/3.jsonl", "who-and-when/Hand-Crafted/7.jsonl"]
    assert seen == [(i, 5) for i in range(1, 6)]                    # index.jsonl, notes, hidden files skipped
    for p in written:                                              # the round-log reader takes every file
        log = read_round_log(p)
        assert replay(log, patience=2).rounds == len(log.rounds)
    assert not list(out.rglob(".*.tmp"))
    log = read_round_log(out / "mini-swe-agent/run1/demo__demo-1.jsonl")
    assert log.labels["resolved"] is True and len(log.rounds) == 6


def test_import_paths_single_files_and_format_override(tree, tmp_path):
    out = tmp_path / "out"
    written = import_paths([tree / "tau-bench" / "gpt-4o-airline.json.gz", tree / "chat" / "agent.json"], out,
                           fmt=None)
    assert sorted(p.relative_to(out).as_posix() for p in written) == [
        "agent.jsonl", "gpt-4o-airline/0-0.jsonl", "gpt-4o-airline/0-1.jsonl", "gpt-4o-airline/3-0.jsonl"]
    written = import_paths([tree / "chat" / "agent.json"], tmp_path / "o2", fmt="openai-chat")
    assert [p.name for p in written] == ["agent.jsonl"]


def test_import_paths_rewrites_in_place(tree, tmp_path):
    out = tmp_path / "out"
    first = import_paths([tree / "chat"], out)
    before = first[0].read_text()
    assert import_paths([tree / "chat"], out) == first and first[0].read_text() == before


def test_output_name_keeps_dots_of_instance_ids():
    assert rawfiles.output_stem("astropy__astropy-1.2.traj.json.gz") == "astropy__astropy-1.2"
    assert rawfiles.output_stem("x.json") == "x" and rawfiles.output_stem("x.jsonl.gz") == "x"
    assert rawfiles.output_stem("README") == "README"


@pytest.mark.parametrize("call_args,needle", [
    (lambda t, o: import_paths([t / "nope"], o), "no such file or directory"),
    (lambda t, o: import_paths([t / "chat"], o, fmt="langchain"), "unknown format 'langchain'"),
    (lambda t, o: import_file(t / "chat" / "agent.json", fmt="nope"), "--format"),
    (lambda t, o: import_paths([t / "empty"], o), "no trajectory files found"),
])
def test_unusable_requests(tree, tmp_path, call_args, needle):
    (tree / "empty").mkdir()
    out = tmp_path / "out"
    with pytest.raises(UserInputError) as err:
        call_args(tree, out)
    assert needle in str(err.value)
    assert not out.exists()


def test_two_inputs_for_one_output_write_nothing(tree, tmp_path):
    write_json(tree / "chat" / "agent.json.gz", chat_messages(), gz=True)
    out = tmp_path / "out"
    with pytest.raises(UserInputError, match="both be written to"):
        import_paths([tree], out)
    assert not out.exists()


# ---- malformed input ---------------------------------------------------------------------------

def _bytes(data) -> bytes:
    return json.dumps(data, indent=1).encode()


def _cut_gzip(data) -> bytes:
    blob = gzip.compress(_bytes(data))
    return blob[: len(blob) // 2]


def _corrupt_gzip(data) -> bytes:
    blob = bytearray(gzip.compress(_bytes(data)))
    for k in range(len(blob) // 2, len(blob) // 2 + 40):
        blob[k] ^= 0xFF
    return bytes(blob)


def _with(base, change):
    data = json.loads(json.dumps(base))
    change(data)
    return _bytes(data)


def _set(path, value):
    def change(data):
        obj = data
        for k in path[:-1]:
            obj = obj[k]
        if value is KeyError:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
    return change


BIG_TAU = tau_runs() * 1  # enough text that half a gzip stream ends mid-file

MALFORMED = [
    # (id, file name, bytes, fmt, what the message must name: a key, or `line N`)
    ("truncated gzip", "t.json.gz", _cut_gzip(BIG_TAU), None, "line "),
    ("corrupt gzip", "c.traj.json.gz", _corrupt_gzip(mini_swe()), None, "line "),
    ("cut JSON", "cut.json", _bytes(MAGENTIC)[:700], None, "line "),
    ("trailing comma", "comma.json", b'{"history": [1, 2,]}', None, "line 1"),
    ("two documents", "extra.json", b'{"history": []}\n{"a": 1}\n', None, "line 2"),
    ("empty file", "empty.json", b"", None, "line 1"),
    ("blank file", "blank.json.gz", gzip.compress(b"  \n\n"), None, "line 1"),
    ("not UTF-8", "latin.json", b'{"history": [\n"caf\xe9"]}', None, "line 2"),
    ("unknown object", "what.json", b'{"steps": [], "score": 1}', None, "(top level)"),
    ("a number", "num.json", b"42", None, "(top level)"),
    ("an empty list", "list.json", b"[]", None, "(top level)"),
    ("mini-swe messages not a list", "m.traj.json", _with(mini_swe(), _set(["messages"], {})), None, "messages"),
    ("mini-swe role missing", "m.traj.json", _with(mini_swe(), _set(["messages", 1, "role"], KeyError)), None,
     "messages[1].role"),
    ("mini-swe call without function", "m.traj.json",
     _with(mini_swe(), _set(["messages", 2, "tool_calls", 0, "function"], KeyError)), None,
     "messages[2].tool_calls[0].function"),
    ("mini-swe arguments a number", "m.traj.json",
     _with(mini_swe(), _set(["messages", 2, "tool_calls", 0, "function", "arguments"], 7)), None,
     "messages[2].tool_calls[0].function.arguments"),
    ("mini-swe result for unknown id", "m.traj.json",
     _with(mini_swe(), _set(["messages", 3, "tool_call_id"], "zzz")), None, "messages[3].tool_call_id"),
    ("mini-swe exit status a number", "m.traj.json", _with(mini_swe(), _set(["info", "exit_status"], 3)), None,
     "info.exit_status"),
    ("who-and-when history not a list", "w.json", _with(MAGENTIC, _set(["history"], "text")), None, "history"),
    ("who-and-when content not text", "w.json", _with(MAGENTIC, _set(["history", 2, "content"], ["x"])), None,
     "history[2].content"),
    ("who-and-when message not an object", "w.json", _with(AG2, _set(["history", 1], "x")), None, "history[1]"),
    ("who-and-when is_correct not a bool", "w.json", _with(AG2, _set(["is_correct"], "no")), None, "is_correct"),
    ("tau-bench reward missing", "tau.json", _with(tau_runs(), _set([1, "reward"], KeyError)), None, "[1].reward"),
    ("tau-bench role not text", "tau.json", _with(tau_runs(), _set([0, "traj", 2, "role"], 5)), None,
     "[0].traj[2].role"),
    ("tau-bench run twice", "tau.json", _bytes([tau_runs()[0], tau_runs()[0]]), None, "[1].trial"),
    ("tau-bench traj missing", "tau.json", _with(tau_runs(), _set([2, "traj"], KeyError)), None, "[2].traj"),
    ("chat second result", "chat.json", _bytes(chat_messages()[:5] + [tool("b", "again")]), None, "[5]"),
    ("chat result answering nothing", "chat.json", _bytes([{"role": "user", "content": "hi"},
                                                          {"role": "tool", "content": "x"}]), None, "[1]"),
    ("chat content a number", "chat.json", _bytes([{"role": "user", "content": 5}]), None, "[0].content"),
    ("chat JSON lines bad line", "chat.jsonl", b'{"role": "user", "content": "a"}\n\n{"role": oops}\n', None,
     "line 3"),
    ("wrong --format", "tau.json", _bytes(tau_runs()), "who-and-when", "[]"),
    ("mini-swe read as tau-bench", "m.traj.json", _bytes(mini_swe()), "tau-bench", "[]"),
]


@pytest.mark.parametrize("name,data,fmt,marker", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_input_names_file_and_place(tmp_path, name, data, fmt, marker):
    """Every malformed file fails with one message naming the file, the key
    or line, and the importable formats; nothing is written, not even the
    files that converted."""
    raw = tmp_path / "raw"
    bad = raw / name
    write_json(bad, {})
    bad.write_bytes(data)
    good = [] if fmt else [write_json(raw / "good" / "agent.json", chat_messages()).parent]
    out = tmp_path / "out"
    with pytest.raises(UserInputError) as err:
        import_paths(good + [bad], out, fmt=fmt)
    message = str(err.value)
    assert message.startswith(str(bad) + (":" if marker.startswith("line") else ""))
    assert (f":{err.value.line}:" in message and marker == f"line {err.value.line}"[:len(marker)]) \
        if marker.startswith("line ") else f"{marker}: " in message
    assert "importable formats: " + ", ".join(FORMATS) in message
    assert "\n" not in message
    assert not out.exists()


def test_malformed_cases_are_many():
    assert len(MALFORMED) >= 20


def test_bad_index_names_the_index_and_line(tmp_path):
    path = write_json(tmp_path / "run1" / "demo__demo-1.traj.json", mini_swe())
    (tmp_path / "index.jsonl").write_text(index_line("run1/demo__demo-1.traj.json", True) + "\n{oops\n")
    with pytest.raises(UserInputError) as err:
        import_file(path)
    assert str(err.value).startswith(f"{tmp_path / 'index.jsonl'}:2: ")
    (tmp_path / "index.jsonl").write_text(json.dumps({"file": "x", "resolved": "yes"}) + "\n")
    with pytest.raises(UserInputError, match=r"index\.jsonl:1: resolved: "):
        import_file(path)


def test_unknown_file_lists_the_formats(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"steps": []}')
    with pytest.raises(UserInputError) as err:
        detect_format(p)
    assert err.value.file == str(p) and "a JSON object with keys steps" in str(err.value)
    assert all(f in str(err.value) for f in FORMATS)


# ---- CLI ----------------------------------------------------------------------------------------

def main_import(argv):
    return imprint(["import", *argv])


def test_main_import(tree, tmp_path, capsys):
    out = tmp_path / "out"
    assert main_import([str(tree / "chat"), str(tree / "tau-bench"), "--out", str(out)]) == 0
    assert "wrote 4 round logs" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main_import([str(bad), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}:1: ") and err.count("\n") == 1
    assert main_import([str(tree / "chat"), "--out", str(out), "--format", "nope"]) == 2
    assert "--format: unknown format 'nope'" in capsys.readouterr().err


def test_add_import_command(tree, tmp_path):
    parser = build_parser()
    args = parser.parse_args(["import", str(tree / "who-and-when"), "--out", str(tmp_path / "o")])
    assert args.fn(args) == 0
    assert sorted(p.name for p in (tmp_path / "o").rglob("*.jsonl")) == ["3.jsonl", "7.jsonl"]


# ---- every decision is a documented constant or function ------------------------------------------

VOCABULARY = {"READ", "WRITE", "ASK", "OK", "EMPTY", "ERROR", "CHAT_ROLES", "GZIP_MAGIC", "CHUNK", "EXIT_OK",
              "EXIT_INPUT", "HELP", "DESCRIPTION", "CONVERTERS", "FILE_SURFER_RULE", "AG2_RAN", "AG2_NO_CODE",
              "TERMINAL_RAN", "TERMINAL_SILENT", "RETURNCODE", "EXCEPTION", "OUTPUT", "INSTRUCTION", "TERMINALS",
              "INDEX_NAME", "EDITOR_TOOLS", "SHELL_LANGUAGES", "SHELL_FIRST_WORDS", "CODE_BLOCK", "PACKAGE_MANAGERS",
              "GREP", "FIND_GREP", "PYTHON"}


@pytest.mark.parametrize("module", [callkinds, resultstatus, shellsyntax, chat, minisweagent, whoandwhen, intercode,
                                    rawfiles, convert, import_runs])
def test_decisions_are_documented(module):
    """Public constants carry a docstring (or are plain vocabulary named in
    a documented neighbour); public functions have docstrings."""
    tree = ast.parse(inspect.getsource(module))
    body = tree.body
    undocumented = []
    for i, node in enumerate(body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.isupper() and not name.startswith("_") and name not in VOCABULARY:
                nxt = body[i + 1] if i + 1 < len(body) else None
                if not (isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)
                        and isinstance(nxt.value.value, str)):
                    undocumented.append(name)
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            if not ast.get_docstring(node):
                undocumented.append(node.name + "()")
    assert not undocumented
    assert module.__doc__


# ---- the real runs ------------------------------------------------------------------------------

needs_raw = pytest.mark.skipif(not RAW.is_dir(), reason="../shared/data/raw is absent")


@pytest.fixture(scope="module")
def raw_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("raw-out")
    return out, import_paths([RAW], out)


@needs_raw
def test_every_raw_file_converts(raw_out):
    out, written = raw_out
    files = [f for f in RAW.rglob("*") if rawfiles.raw_suffix(f.name, rawfiles.FOLDER_SUFFIXES)]
    per_source = {}
    for p in written:
        log = read_round_log(p)
        top = p.relative_to(out).parts[0]
        per_source.setdefault(top, []).append(log)
        assert log.labels["source_format"] in FORMATS and log.labels["num_rounds"] == len(log.rounds)
    runs = {k: len(v) for k, v in per_source.items()}
    assert runs["mini-swe-agent"] == len([f for f in files if f.name.endswith(".traj.json.gz")])
    assert runs["who-and-when"] == len(list((RAW / "who-and-when").rglob("*.json")))
    assert runs["tau-bench"] == 200
    resolved = [log.labels["resolved"] for log in per_source["mini-swe-agent"]]
    index = [json.loads(line) for line in (RAW / "mini-swe-agent" / "index.jsonl").read_text().splitlines()]
    assert sorted(map(str, resolved)) == sorted(str(e["resolved"]) for e in index)
    assert all(isinstance(log.labels["correct"], bool) for log in per_source["who-and-when"])


@needs_raw
@pytest.mark.skipif(not ROUNDLOGS.is_dir(), reason="../shared/data/roundlogs is absent")
def test_tau_bench_matches_the_earlier_conversion(raw_out):
    """The earlier conversion of the same file agrees call for call, but for
    empty JSON results (`[]`), which this importer counts as empty reads."""
    out, _ = raw_out
    changed = 0
    for old_path in sorted(ROUNDLOGS.glob("*.jsonl")):
        old = read_round_log(old_path)
        new = read_round_log(out / "tau-bench" / "gpt-4o-airline" / old_path.name)
        assert {k: new.labels[k] for k in old.labels} == old.labels
        assert len(new.rounds) == len(old.rounds)
        for a, b in zip(old.rounds, new.rounds):
            for ca, cb in zip(a.calls, b.calls, strict=True):
                assert (ca.tool, ca.args, ca.kind, ca.result) == (cb.tool, cb.args, cb.kind, cb.result)
                if ca.status != cb.status:
                    assert (ca.status, cb.status, cb.result) == (OK, EMPTY, "[]")
                    changed += 1
    assert changed > 0


def test_a_call_s_request_survives_the_round_log_and_a_bad_one_is_named(tmp_path):
    [log] = import_file(write_json(tmp_path / "Hand-Crafted" / "7.json", MAGENTIC))
    out = tmp_path / "7.jsonl"
    out.write_text(convert.render_round_log(log), encoding="utf-8")
    back = read_round_log(out)
    assert [c.request for r in back.rounds for c in r.calls] == [c.request for r in log.rounds for c in r.calls]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "imprint-rounds/1"}\n{"round": 1, "calls": [{"tool": "t", "kind": "read", '
                   '"status": "ok", "request": 3}]}\n')
    with pytest.raises(UserInputError) as e:
        read_round_log(bad)
    assert e.value.line == 2 and e.value.key == "calls[0].request"
