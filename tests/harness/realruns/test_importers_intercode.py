"""The InterCode importer (`harness.realruns.importers.intercode`) on runs
cut whole from its results files (tests/fixtures/intercode/, MIT, see
traces/outcomes/intercode-sql/LICENSE-NOTE.md), SQL classification, and
the committed corpus."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from harness.cli import main as imprint
from harness.realruns.importers import FORMATS, detect_format, import_file, import_paths
from harness.realruns.importers.callkinds import READ, WRITE, classify_sql
from harness.realruns.importers.intercode import agent_of, import_intercode, is_intercode
from harness.realruns.importers.resultstatus import EMPTY, ERROR, OK
from harness.realruns.labels import load_labels
from harness.realruns.outcomes import outcome_of
from harness.realruns.roundlogs import read_round_log
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "intercode"
CORPUS = ROOT / "traces" / "outcomes"
SOURCES = ("intercode-sql", "intercode-bash", "intercode-ctf", "intercode-python")


def logs(rel: str) -> dict[str, object]:
    return {log.labels["run_id"]: log for log in import_file(FIX / rel)}


def shape(log) -> list[tuple[str, str, str]]:
    return [(r.calls[0].tool, r.calls[0].kind, r.calls[0].status) for r in log.rounds]


@pytest.mark.parametrize("rel", sorted(str(p.relative_to(FIX)) for p in FIX.rglob("*.json")))
def test_every_fixture_is_detected(rel):
    assert detect_format(FIX / rel) == "intercode"


def test_other_shapes_are_not_intercode():
    assert not is_intercode({"0": {"environment": "gym", "turn_history": {}}})
    assert not is_intercode({"meta": {}, "logs": {}})
    assert not is_intercode([{"environment": "ic_sql", "turn_history": {}}])


def test_sql_try_again_round_mapping_and_outcome():
    log = logs("ic_sql_multiturn_gpt-3.5_10_turns.json")["128"]
    assert shape(log) == [("sql", READ, EMPTY), ("sql", READ, ERROR), ("sql", READ, ERROR), ("sql", READ, OK),
                          ("sql", READ, ERROR), ("sql", READ, OK), ("sql", READ, OK)]   # 5: 'USE' is no code to it
    assert log.rounds[4].calls[0].result.startswith("No SQL code was found")
    lab = log.labels
    assert lab["task_id"] == "intercode-sql:dev_spider:128" and lab["run_id"] == "128"
    assert (lab["model"], lab["strategy"], lab["turns_limit"], lab["handicap"]) == ("gpt-3.5", "multiturn", 10, False)
    assert outcome_of(lab).value == "success" and lab["outcome"]["field"] == "summary.max_reward"
    assert (lab["success_round"], lab["ended"], lab["num_rounds"]) == (7, "reward", 7)


def test_a_blocked_action_is_no_round():
    log = logs("ic_sql_multiturn_chat-bison-001_10_turns.json")["117"]
    assert shape(log) == [("sql", READ, OK), ("sql", READ, ERROR)]
    assert log.labels["ended"] == "blocked" and outcome_of(log.labels).value == "failure"
    assert log.labels["outcome"]["raw"] == 0.0


def test_react_execute_is_unwrapped_and_submit_is_the_answer():
    runs = logs("gpt-3.5/ic_sql_react_10_turns.json")
    ok = runs["223"]
    assert [r.calls[0].args["query"] for r in ok.rounds][:2] == ["SHOW TABLES", "DESC tv_channel"]
    assert shape(ok)[2] == ("sql", READ, ERROR)            # the harness refused a cut-off `execute[`
    assert (ok.labels["ended"], ok.labels["success_round"], outcome_of(ok.labels).value) == ("submit", None, "success")
    assert ok.labels["model"] == "gpt-3.5" and ok.labels["strategy"] == "react"   # the folder names the model
    forced = runs["267"]
    assert len(forced.rounds) == 10 and forced.labels["ended"] == "forced submit"
    assert len({r.calls[0].args["query"] for r in forced.rounds[5:]}) == 1      # the same query, rounds 6-10


def test_plan_solve_success_before_the_last_round():
    log = logs("gpt-3.5/ic_sql_plan_solve.json")["304"]
    assert len(log.rounds) == 3 and log.labels["success_round"] == 2 and log.labels["ended"] == "plan"
    assert log.labels["strategy"] == "plan_solve" and log.labels["plan"][0].startswith("Check")
    assert outcome_of(log.labels).value == "success"


def test_bash_kinds_and_statuses_follow_the_exit_code():
    log = logs("gpt-4/ic_bash_multiturn_gpt-4_10_turns_fs_1.json")["12"]
    assert log.labels["task_id"] == "intercode-bash:nl2bash_fs_1:12"
    assert shape(log)[:4] == [("bash", WRITE, OK), ("bash", WRITE, OK), ("bash", WRITE, OK), ("bash", WRITE, ERROR)]
    assert log.rounds[3].calls[0].result == "Malformed command"
    assert outcome_of(log.labels).value == "failure" and log.labels["outcome"]["raw"] == 0.39   # partial credit
    react = logs("gpt-3.5/ic_bash_react_10_turns_fs_1.json")["16"]
    # find's usage complaint with a failed exit is an error; a silent `find -exec true` an empty read
    assert shape(react) == [("bash", READ, ERROR), ("bash", READ, EMPTY)]


def test_ctf_submit_is_a_write_and_skip_ends_the_run():
    runs = logs("ic_ctf_multiturn_gpt-4_10_turns.json")
    # the model pasted a transcript as its command: `<main+0>:` redirects, so the shell rule calls it a write
    assert shape(runs["98"]) == [("bash", WRITE, ERROR), ("submit", WRITE, ERROR)]
    assert runs["98"].rounds[1].calls[0].args == {"flag": "picoCTF{1000}"}
    assert runs["98"].labels["ended"] == "skip" and runs["29"].labels["ended"] == "skip"
    assert shape(runs["29"]) == [("bash", READ, ERROR)]                      # Command timed out
    (won,) = import_file(FIX / "ic_ctf_gpt-4_25_turns.json")
    assert won.rounds[0].calls[0].args["command"].startswith("/bin/bash -c")   # `cmd ` dropped
    assert shape(won)[-1] == ("submit", WRITE, OK) and won.labels["success_round"] == 5
    assert won.labels["turns_limit"] == 25 and won.labels["turns_max"] == 15   # name and summary disagree


def test_python_test_verdicts_are_evidence():
    log = logs("gpt-3.5/ic_python_multiturn_gpt-4_7_turns.json")["80"]
    assert shape(log) == [("python", READ, OK)] * 7
    assert log.labels["model"] == "gpt-4"                  # the file's name, not its folder
    assert log.labels["task_id"] == "intercode-python:ic_mbpp:80"


def test_agent_names():
    assert agent_of("data/results/sql/gpt-3.5/ic_sql_multiturn_gpt-3.5-1_turns_handicap.json") == {
        "strategy": "multiturn", "model": "gpt-3.5", "turns_limit": 1, "handicap": True,
        "agent": "InterCode Try Again, gpt-3.5, 1 turns, schema given (handicap)"}
    assert agent_of("x/gpt-3.5/ic_bash_plan_solve_refine_3_turns.json")["strategy"] == "plan_solve_refine"
    assert agent_of("x/y/ic_bash_multiturn_text-bison-001_10_turns_fs_3.json")["model"] == "text-bison-001"


def test_cli_import_writes_one_folder_per_file(tmp_path):
    out = tmp_path / "out"
    assert imprint(["import", str(FIX), "--out", str(out)]) == 0
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.jsonl"))
    assert "gpt-3.5/ic_sql_react_10_turns/223.jsonl" in got and len(got) == 11


@pytest.mark.parametrize("case,mutate,key", [
    ("turn_history missing", lambda r: r.pop("turn_history"), "117.turn_history"),
    ("actions not a list", lambda r: r["turn_history"].update(actions="SELECT 1"), "117.turn_history.actions"),
    ("observation not text", lambda r: r["turn_history"]["observations"].__setitem__(0, 5),
     "117.turn_history.observations[0]"),
    ("more observations than actions", lambda r: r["turn_history"]["observations"].extend(["a", "b"]),
     "117.turn_history.observations"),
    ("summary missing", lambda r: r.pop("summary"), "117.summary"),
    ("unknown environment", lambda r: r.update(environment="ic_java"), "117.environment"),
])
def test_malformed_runs_name_file_and_key(tmp_path, case, mutate, key):
    data = json.loads((FIX / "ic_sql_multiturn_chat-bison-001_10_turns.json").read_text())
    mutate(data["117"])
    bad = tmp_path / "ic_sql_multiturn_x_10_turns.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(UserInputError) as err:
        # a file whose first run lost its shape is detected as nothing: named as intercode, it is read
        import_paths([bad], tmp_path / "out", fmt="intercode" if case in ("unknown environment",
                                                                           "turn_history missing") else None)
    message = str(err.value)
    assert message.startswith(str(bad)) and f"{key}: " in message and "importable formats: " in message
    assert "\n" not in message and not (tmp_path / "out").exists()


def test_a_run_the_file_lacks_is_named():
    data = json.loads((FIX / "ic_sql_multiturn_chat-bison-001_10_turns.json").read_text())
    with pytest.raises(UserInputError, match="999: "):
        import_intercode(data, "f.json", names=["999"])


def test_intercode_is_an_importable_format():
    assert "intercode" in FORMATS


@pytest.mark.parametrize("query,kind", [
    ("SELECT name FROM singer", READ), ("show tables", READ), ("DESCRIBE t", READ), ("USE world_1", READ),
    ("SELECT 'drop table x' FROM t", READ), ("-- DELETE FROM t\nSELECT 1", READ),
    ("INSERT INTO t VALUES (1)", WRITE), ("  update t set a = 1", WRITE), ("ALTER TABLE t ADD COLUMN c INT", WRITE),
    ("SELECT 1; DROP TABLE t", WRITE), ("SET sql_mode = ''", WRITE),
    ("WITH x AS (SELECT 1) DELETE FROM t", WRITE), ("SELECT * FROM t INTO OUTFILE '/tmp/f'", WRITE),
])
def test_sql_kinds(query, kind):
    assert classify_sql(query) == kind


@given(st.lists(st.sampled_from(["SELECT a FROM t", "SHOW TABLES", "DESC t",
                                 "SELECT count(*) FROM t WHERE x = 'update'"]), min_size=1, max_size=4),
       st.sampled_from(["INSERT INTO t VALUES (2)", "DROP TABLE t", "UPDATE t SET a = 1", "CREATE TABLE u (a INT)"]),
       st.integers(min_value=0, max_value=4))
def test_one_writing_statement_makes_a_write(reads, write, at):
    assert classify_sql("; ".join(reads)) == READ
    statements = reads[:at] + [write] + reads[at:]
    assert classify_sql("; ".join(statements)) == WRITE


# ---- the committed corpus ------------------------------------------------------------------------

@pytest.mark.parametrize("source", SOURCES)
def test_committed_runs_carry_task_outcome_and_provenance(source):
    files = sorted((CORPUS / source).glob("*.jsonl.gz"))
    assert files and (CORPUS / source / "LICENSE-NOTE.md").is_file()
    per_task: dict[str, int] = {}
    for f in files:
        assert gzip.decompress(f.read_bytes())[:1] == b"{"
        log = read_round_log(f)
        lab = log.labels
        assert lab["source_format"] == "intercode" and lab["license"] == "MIT" and lab["commit"]
        assert lab["task_id"].startswith(source + ":") and log.rounds
        assert outcome_of(lab).value in ("success", "failure")
        assert (outcome_of(lab).value == "success") == (lab["max_reward"] == 1)
        per_task[lab["task_id"]] = per_task.get(lab["task_id"], 0) + 1
    assert max(per_task.values()) <= 2


@pytest.mark.parametrize("source", SOURCES)
def test_labels_name_committed_runs_and_fit_them(source):
    labels = load_labels([ROOT / "scenarios" / "labels" / f"labels-{source}.yaml"])
    for name, label in labels.runs.items():
        assert name.startswith(source + "/"), name
        path = CORPUS / f"{name}.jsonl.gz"
        assert path.is_file(), name
        rounds = len(read_round_log(path).rounds)
        assert label.note and all(1 <= a <= b <= rounds for a, b in label.loops + label.repeats), name
