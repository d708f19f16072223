"""The `fireact` and `reflexion` formats (harness/realruns/importers/react.py)
on excerpts cut from their sources (tests/fixtures/outcomes/fireact/: FireAct's
Llama-2-7B trajs file, dev runs 797, 1557 and 2864; tests/fixtures/outcomes/reflexion/:
Reflexion's `ReAct/reflexion/100_questions_7_trials.txt`, trial 1's correct
block 17, incorrect 25 and halted 6, trial 2's correct 18 and incorrect 22;
both MIT, see traces/outcomes/*/LICENSE-NOTE.md), and the committed corpora
traces/outcomes/fireact-hotpotqa/ and reflexion-hotpotqa/."""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from harness.cli import main as imprint
from harness.realruns.importers import detect_format, import_file, import_paths, react
from harness.realruns.importers.callkinds import READ
from harness.realruns.importers.rawfiles import TextLog
from harness.realruns.importers.resultstatus import EMPTY, ERROR, OK
from harness.realruns.outcomes import outcome_of
from harness.realruns.roundlogs import read_round_log
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
FIREACT = ROOT / "tests" / "fixtures" / "outcomes" / "fireact" / "hotpotqa_dev_0_500_llama-2-7b-mini.json"
REFLEXION = ROOT / "tests" / "fixtures" / "outcomes" / "reflexion" / "100_questions_7_trials-mini.txt"
FIREACT_CHAT = ROOT / "tests" / "fixtures" / "webruns" / "fireact-mini.json"
OUTCOMES = ROOT / "traces" / "outcomes"


def _script(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks" / "corpora"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "corpora"))


def test_detection():
    assert detect_format(FIREACT) == "fireact" and detect_format(FIREACT_CHAT) == "fireact"
    assert detect_format(REFLEXION) == "reflexion"


def test_fireact_text_trajectory_rounds_and_outcome():
    logs = {log.name: log for log in import_file(FIREACT)}
    assert sorted(logs) == ["1557.jsonl", "2864.jsonl", "797.jsonl"]
    log = logs["1557.jsonl"]
    calls = [r.calls[0] for r in log.rounds]
    assert [c.tool for c in calls] == ["search"] * 5 + ["reflect", "search"]
    assert calls[4].args == calls[1].args == {"query": "Hardley Flood waterfowl"}     # the same search, again
    assert calls[4].result == calls[1].result
    assert calls[5].status == ERROR and calls[5].result.startswith("(' reflect', ")   # FireAct: unknown tool
    assert {c.kind for c in calls} == {READ} and log.labels["finish"] == "waterfowl"
    assert log.labels["task_id"] == "hotpotqa:dev-1557"
    assert log.labels["question"].startswith("Hardley Flood is an area of lagoons")
    assert log.labels["outcome"]["value"] == "failure" and log.labels["f1"] == 0
    assert outcome_of(log.labels).value == "failure"
    assert outcome_of(logs["2864.jsonl"].labels).value == "success"
    assert [r.calls[0].status for r in logs["2864.jsonl"].rounds] == [OK]


def test_fireact_action_is_parsed_as_fireact_parsed_it():
    # FireAct run 564 (GPT file): a second thought after the search; what ran was the bracket's text with it
    reply = "Thought: a.\nAction: search[author of the play Medea]\nThought: b.\nAction: finish[Euripides]"
    assert react.fireact_call(react.fireact_action(reply)) == ("search", "author of the play Medea]\nThought: b")
    # run 6952: an unclosed bracket sent the query less its last letter
    assert react.fireact_call(react.fireact_action("Thought: x\nAction: search[1952-53 NBA season")) == (
        "search", "1952-53 NBA seaso")
    assert react.fireact_call("search for it") is None                      # no `[`: FireAct never ran it
    assert react.fireact_action("Thought: no action at all") is None
    traj = [{"role": "user", "content": "Q?"},
            {"role": "assistant", "content": "Thought: t\nAction: search[a]"},
            {"role": "user", "content": "Observation: None"},
            {"role": "assistant", "content": "Thought: t\nAction:  finish[b]"}]
    rounds, answer = react.fireact_rounds(traj)
    assert answer == "b" and [(r.calls[0].args, r.calls[0].status) for r in rounds] == [({"query": "a"}, EMPTY)]


step = st.tuples(st.from_regex(r"[A-Za-z][A-Za-z ]{0,20}", fullmatch=True),
                 st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 .,]{0,40}", fullmatch=True))


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=8), st.one_of(st.none(), st.from_regex(r"[A-Za-z]{1,10}", fullmatch=True)))
def test_fireact_text_and_chat_give_the_same_rounds(steps, answer):
    """A run written in the Llama files' text and in the GPT file's chat
    shape gives the same rounds, in order, and stops at the finish."""
    text = "### Instruction:\nQ?\n\n### Response:\n"
    chat = [{"role": "user", "content": "Q?"}]
    for query, obs in steps + ([(None, "Episode finished, reward = True")] if answer else []):
        action = f"finish[{answer}]" if query is None else f"search[{query}]"
        text += f"Thought: t\nAction: {action}\nObservation: {obs}\n"
        chat += [{"role": "assistant", "content": f"Thought: t\nAction: {action}"},
                 {"role": "user", "content": f"Observation: {obs}"}]
    for traj in (text, chat):
        rounds, got = react.fireact_rounds(traj)
        assert got == answer
        assert [(r.number, r.calls[0].args["query"], r.calls[0].result) for r in rounds] == [
            (i, q, o.strip()) for i, (q, o) in enumerate(steps, start=1)]
        assert react.fireact_steps(traj)[0] == "Q?"


def test_reflexion_runs_outcomes_and_repeats():
    logs = import_file(REFLEXION)
    # trial 2's correct block is trial 1's, listed again: one run
    assert [log.name for log in logs] == ["t1-c01.jsonl", "t1-i01.jsonl", "t1-h01.jsonl", "t2-i01.jsonl"]
    assert [(o := log.labels["outcome"])["value"] + "/" + o["raw"] for log in logs] == [
        "success/correct", "failure/incorrect", "failure/halted", "failure/incorrect"]
    assert all(log.labels["outcome"]["field"] == "section" for log in logs)
    halted = logs[2]
    assert halted.labels["finish"] is None and halted.labels["ground_truth"] == "Shukratara"
    assert [(r.calls[0].tool, r.calls[0].status) for r in halted.rounds] == [
        ("Search", OK), ("Lookup", EMPTY), ("Lookup", OK), ("Lookup", EMPTY), ("Lookup", EMPTY), ("Lookup", EMPTY)]
    assert halted.rounds[-1].calls[0].result == "No Results"            # the answer line is not an observation
    retry = logs[3]
    assert retry.labels["question"] == logs[1].labels["question"] == "What company did Rex Maughan aquire?"
    assert retry.labels["task_id"] == logs[1].labels["task_id"] and retry.labels["reflections"] == 1
    assert (retry.labels["trial"], retry.labels["finish"]) == (2, "none")
    data = TextLog(REFLEXION, REFLEXION.read_text(encoding="utf-8"))
    [_, ided, *_] = react.import_reflexion(data, REFLEXION, {"What company did Rex Maughan aquire?": 5307})
    assert ided.labels["task_id"] == "hotpotqa:dev-5307"


def test_observation_statuses_of_both_environments():
    assert react.observation_status("Could not find that page, please try again.") == ERROR    # fetch raised
    assert react.observation_status("Invalid Action. Valid Actions are Lookup[<topic>] ...") == ERROR
    assert react.observation_status("('click', 'x') generated an exception: Unknown tool name: click") == ERROR
    assert react.observation_status("Could not find [X]. Similar: []") == EMPTY
    assert react.observation_status("Could not find [X]. Similar: ['X (band)']") == OK


def test_import_command_writes_a_folder_per_file(tmp_path, capsys):
    assert imprint(["import", str(FIREACT), str(REFLEXION), "--out", str(tmp_path)]) == 0
    assert "wrote 7 round logs" in capsys.readouterr().out
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.jsonl")) == [
        "100_questions_7_trials-mini/t1-c01.jsonl", "100_questions_7_trials-mini/t1-h01.jsonl",
        "100_questions_7_trials-mini/t1-i01.jsonl", "100_questions_7_trials-mini/t2-i01.jsonl",
        "hotpotqa_dev_0_500_llama-2-7b-mini/1557.jsonl", "hotpotqa_dev_0_500_llama-2-7b-mini/2864.jsonl",
        "hotpotqa_dev_0_500_llama-2-7b-mini/797.jsonl"]


def _bad_fireact(tmp_path, change) -> Path:
    data = json.loads(FIREACT.read_text(encoding="utf-8"))
    change(data)
    p = tmp_path / "hotpotqa_dev_bad.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


@pytest.mark.parametrize("change,key", [
    (lambda d: d["797"].pop("traj"), "797.traj"),
    (lambda d: d["2864"].update(traj=7), "2864.traj"),
    (lambda d: d["1557"].update(traj=[{"role": "user", "content": "Q"}, "oops"]), "1557.traj[1]"),
    (lambda d: d.update({"9": "not a run"}), "9"),
])
def test_malformed_fireact_names_file_and_key(tmp_path, change, key):
    bad = _bad_fireact(tmp_path, change)
    with pytest.raises(UserInputError) as err:
        import_paths([bad], tmp_path / "out")
    assert str(err.value).startswith(f"{bad}: {key}: ") and "(read as fireact)" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_malformed_reflexion_names_file_line_and_key(tmp_path, capsys):
    bad = tmp_path / "log.txt"
    bad.write_text("intro\nBEGIN TRIAL 1\nTrial summary: Correct: 0\n------------- BEGIN CORRECT AGENTS -----\n"
                   "BEGIN TRIAL 2\nnothing\n", encoding="utf-8")
    with pytest.raises(UserInputError) as err:
        import_file(bad)
    assert str(err.value).startswith(f"{bad}:5: BEGIN TRIAL 2: trial without agents")
    other = tmp_path / "notes.txt"
    other.write_text("just some notes\n", encoding="utf-8")
    assert imprint(["import", str(other), "--out", str(tmp_path / "o")]) == 2      # one line, no traceback
    err_text = capsys.readouterr().err
    assert err_text.startswith(f"error: {other}:1: ") and "a text file starting 'just some notes'" in err_text
    assert err_text.count("\n") == 1
    with pytest.raises(UserInputError, match=r"BEGIN TRIAL: not a Reflexion trial log"):
        import_file(other, "reflexion")


def _corpus(name: str) -> list:
    return [read_round_log(p) for p in sorted((OUTCOMES / name).glob("*.jsonl.gz"))]


def test_committed_fireact_corpus():
    logs = _corpus("fireact-hotpotqa")
    tasks = Counter(log.labels["task_id"] for log in logs)
    assert len(logs) == 500 and max(tasks.values()) == 1                    # one run a question
    assert len({log.labels["path"] for log in logs}) == 3                   # all three models
    webruns = {p.stem for p in (ROOT / "traces" / "webruns" / "fireact-hotpotqa").glob("*.jsonl")}
    assert not {log.labels["run_id"] for log in logs if log.name.startswith("gpt35ft-")} & webruns
    for log in logs:
        assert log.rounds and log.labels["task_id"] == f"hotpotqa:dev-{log.labels['run_id']}"
        assert outcome_of(log.labels).value == ("success" if log.labels["em"] else "failure")
        assert log.labels["license"] == "MIT" and log.labels["commit"] == _script("build_fireact_hotpotqa").REPO["commit"]


def test_committed_reflexion_corpus():
    logs = _corpus("reflexion-hotpotqa")
    build = _script("build_reflexion_hotpotqa")
    tasks = Counter(log.labels["task_id"] for log in logs)
    assert len(logs) == 465 and max(tasks.values()) == build.PER_TASK
    assert {log.labels["outcome"]["raw"] for log in logs} == {"correct", "incorrect", "halted"}
    for log in logs:
        assert log.rounds and log.labels["task_id"].startswith("hotpotqa:dev-")
        assert log.labels["outcome"]["value"] == react.VERDICTS[log.labels["section"].upper()]
    fireact = {log.labels["task_id"] for log in _corpus("fireact-hotpotqa")}
    assert set(tasks) & fireact                                               # shared questions share a task


def test_decisions_are_documented():
    from test_importers import test_decisions_are_documented as check
    check(_script("build_fireact_hotpotqa"))
    check(_script("build_reflexion_hotpotqa"))


@pytest.mark.parametrize("source", ["fireact-hotpotqa", "reflexion-hotpotqa"])
def test_labelled_loops_and_repeats_redo_earlier_calls(source):
    """Every round of a labelled loop or repeat sends a call sent before, with
    the same result (the round P back, where a period is given): the labels
    mark only word-for-word repetition."""
    from harness.realruns.labels import load_labels
    labels = load_labels([ROOT / "scenarios" / "labels" / f"labels-{source}.yaml"])
    loops = 0
    for name, label in labels.runs.items():
        log = read_round_log(OUTCOMES / f"{name}.jsonl.gz")
        seen = [(c.tool, c.args, c.result) for r in log.rounds for c in r.calls]
        assert label.should_not_stop_before is None and log.labels["outcome"]["value"] in ("success", "failure")
        for (a, b), period in [*zip(label.loops, label.periods), *((s, None) for s in label.repeats)]:
            for r in range(a, b + 1):
                assert seen[r - 1] == seen[r - 1 - period] if period else seen[r - 1] in seen[:r - 1], (name, r)
        loops += len(label.loops)
    assert loops == {"fireact-hotpotqa": 18, "reflexion-hotpotqa": 17}[source]
