"""A user's stop rule that raises (or calls sys.exit) is the user's mistake:
every command that runs it exits 2 naming the rule (file:factory), the run,
the round and the line of the rule's own file; and a run refused before its
first scenario leaves no staging folder behind."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.cli import main

from reportdata import fact, gate_toml, round_log

# `fail` chooses what breaks and how: observe at round 3, reset, or the factory.
RULE = textwrap.dedent('''\
    import sys

    class Fragile:
        def __init__(self, fail, threshold):
            self.fail, self.threshold = fail, threshold
        def observe(self, round):
            if self.fail.startswith("observe") and round.index == 3:
                if self.fail == "observe-exit":
                    sys.exit(0)
                return {}["no such key"]
            return None
        def reset(self):
            if self.fail == "reset":
                raise RuntimeError("reset broke")

    def make(fail="observe", threshold=3):
        if fail == "factory":
            raise RuntimeError("factory broke")
        return Fragile(fail, threshold)
''')


@pytest.fixture()
def setup(tmp_path: Path) -> dict:
    logs = tmp_path / "logs"
    round_log(logs / "long.jsonl", [[{"result": fact(n), "args": {"q": str(n)}}] for n in range(1, 7)])
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  long: {should_not_stop_before: 6}\n")
    rule = tmp_path / "rules" / "fragile.py"
    rule.parent.mkdir()
    rule.write_text(RULE)
    (tmp_path / "gate.toml").write_text(gate_toml(3))
    return {"tmp": tmp_path, "logs": logs, "labels": labels, "rule": rule}


def _argv(command: str, s: dict, fail: str) -> list[str]:
    rule, logs, labels, tmp = f"{s['rule']}:make", str(s["logs"]), str(s["labels"]), s["tmp"]
    return {
        "replay": ["replay", logs, "--rule", rule, "--param", f"fail={fail}"],
        "check": ["check", logs, "--config", str(tmp / "gate.toml"), "--labels", labels, "--rule", rule,
                  "--param", f"fail={fail}"],
        "compare": ["compare", "--corpus", logs, "--labels", labels, "--rule", f"{rule}[fail={fail}]", "--holdout", "0",
                    "--no-disk-cache", "--out", str(tmp / "out")],
        "tune": ["tune", "--corpus", logs, "--labels", labels, "--rule", rule, "--grid", f"fail={fail}",
                 "--grid", "threshold=2,3", "--jobs", "1", "--no-disk-cache", "--out", str(tmp / "tune")],
    }[command]


@pytest.mark.parametrize("command", ["replay", "check", "compare", "tune"])
@pytest.mark.parametrize("fail", ["observe", "observe-exit"])
def test_a_rule_that_raises_in_observe_is_named_with_its_run_round_and_line(setup, capsys, command, fail) -> None:
    code = main(_argv(command, setup, fail))
    err = capsys.readouterr().err
    assert code == 2, err
    line = 10 if fail == "observe" else 9    # the rule file's own line, not ours
    assert f"{setup['rule']}:{line}:" in err, err
    assert f"stop rule {setup['rule']}:make raised" in err
    assert "in observe" in err and "round 3" in err and "long.jsonl" in err
    assert ("KeyError: 'no such key'" if fail == "observe" else "SystemExit(0)") in err
    assert "internal error" not in err and "Traceback" not in err


def test_reset_and_factory_failures_are_named_too(setup, tmp_path: Path, capsys) -> None:
    # a user turn before round 3: the rule is reset there
    log = round_log(tmp_path / "turns" / "turns.jsonl", [[{"result": fact(n)}] for n in range(1, 5)],
                    labels={"user_turn_before_round": [3]})
    assert main(["replay", str(log), "--rule", f"{setup['rule']}:make", "--param", "fail=reset"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: reset broke in reset" in err and "turns.jsonl" in err and f"{setup['rule']}:14:" in err
    assert main(["replay", str(setup["logs"]), "--rule", f"{setup['rule']}:make", "--param", "fail=factory"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: factory broke in its factory" in err and f"{setup['rule']}:18:" in err


SCENARIO = textwrap.dedent("""\
    name: fragile
    question: What is known?
    settings:
      chat.research_stop_rule: "{rule}:make"
    loop:
      stop_rule_params: {{fail: {fail}}}
    provider:
      kind: stub
      script:
        - calls: [{{tool: search, args: {{query: a}}}}]
          repeat: 5
        - answer: done
    tools:
      - name: search
        default: {{text: "some evidence about ${{query}}"}}
""")


@pytest.mark.parametrize("fail", ["observe", "observe-exit", "factory"])
def test_imprint_run_names_the_scenario_and_leaves_no_staging_folder(setup, tmp_path: Path, capsys, fail) -> None:
    scn = tmp_path / "fragile.yaml"
    scn.write_text(SCENARIO.format(rule=setup["rule"], fail=fail))
    runs = tmp_path / "runs"
    assert main(["run", str(scn), "--traces", str(runs)]) == 2
    err = capsys.readouterr().err
    assert f"stop rule {setup['rule']}:make raised" in err and "Traceback" not in err
    if fail != "factory":
        assert f"run fragile ({scn})" in err and "round 3" in err
    assert not runs.exists() or list(runs.iterdir()) == []   # no staging folder, no run folder


def test_a_run_refused_at_rule_resolution_leaves_nothing(tmp_path: Path, capsys) -> None:
    scn = tmp_path / "missing-rule.yaml"
    scn.write_text(SCENARIO.format(rule=tmp_path / "no-such-rule.py", fail="observe"))
    runs = tmp_path / "runs"
    assert main(["run", str(scn), "--traces", str(runs)]) == 2
    assert "no such rule file" in capsys.readouterr().err
    assert not runs.exists() or list(runs.iterdir()) == []
    # and the next run has no stale folder to warn about
    assert main(["run", str(scn), "--traces", str(runs)]) == 2
    assert "staging" not in capsys.readouterr().err and (not runs.exists() or list(runs.iterdir()) == [])


def test_a_rule_file_that_exits_while_loading_is_named(setup, tmp_path: Path, capsys) -> None:
    rule = tmp_path / "exits.py"
    rule.write_text("import sys\nsys.exit(0)\n")
    assert main(["replay", str(setup["logs"]), "--rule", f"{rule}:make"]) == 2
    err = capsys.readouterr().err
    assert f"{rule}: --rule: the rule file failed while loading: SystemExit" in err
