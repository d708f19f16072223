"""The run `imprint check` and `imprint report` judge: the one --run names,
else the newest complete run (the one that finished last, not the folder
that sorts last); always named with its scenario count. A run of part of the
scenario library fails the library's loop-recall line, and is never taken
for changed labels; with no run at all the gate fails."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.cli import main

from reportdata import fact, gate_toml, handmade_trace, round_log

REPO = Path(__file__).resolve().parents[3]
LIBRARY = ("01-answer-at-round-1.yaml", "04-identical-evidence.yaml")


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch) -> Path:
    """A checkout in miniature: a library of two scenarios (one useful, one
    loop, labelled), committed traces that hold every other condition, and
    a gate config whose loop-recall baseline was pinned on the whole library."""
    monkeypatch.setenv("COLUMNS", "400")
    (tmp_path / "scenarios").mkdir()
    for name in LIBRARY:
        shutil.copy(REPO / "scenarios" / name, tmp_path / "scenarios" / name)
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "labels-lib.yaml").write_text("runs:\n  answer-at-round-1: {should_not_stop_before: 1}\n"
                                            "  identical-evidence: {loops: [2, 10]}\n")
    (labels / "labels-logs.yaml").write_text("runs:\n  fine: {should_not_stop_before: 6}\n")
    round_log(tmp_path / "traces" / "fine.jsonl", [[{"result": fact(n)}] for n in range(1, 7)])
    handmade_trace(tmp_path / "traces" / "tok.jsonl", provider="remote", provider_kind="remote", ratios=[1.0] * 5,
                   header_extra={"server": "llamacpp"}, scenario="tok",
                   counting={"mode": "auto", "used": "tokenizer", "exact": True})
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "gate.toml").write_text(
        '[inputs]\ntraces = ["traces"]\nlatest_run = true\nruns_dir = "traces/runs"\nround_logs = []\n'
        'labels = ["labels/labels-lib.yaml", "labels/labels-logs.yaml"]\n\n' + gate_toml(3)
        + "\n[loop_recall_baseline]\nlib = {recall = 1.0, caught = 1, loops = 1, commit = 'abc1234'}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _check(capsys, *args: str) -> tuple[int, dict]:
    code = main(["check", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _recall(out: dict) -> dict:
    return {r["subject"]: r for r in out["conditions"][0]["rows"]}["lib: loop recall"]


def test_the_newest_complete_run_is_judged_and_named_and_a_partial_one_fails_the_library_line(checkout, capsys):
    # the whole library under a name that sorts last, then one scenario of it, finished later
    assert main(["run", "--run-id", "zzz-full"]) == 0
    assert main(["run", "scenarios/04-identical-evidence.yaml", "--run-id", "aaa-part"]) == 0
    runs = checkout / "traces" / "runs"
    past = (runs / "aaa-part" / "summary.json").stat().st_mtime - 600
    os.utime(runs / "zzz-full" / "summary.json", (past, past))
    capsys.readouterr()

    code, out = _check(capsys)
    assert out["run"] == {"path": str(Path("traces/runs/aaa-part")), "run_id": "aaa-part", "scenarios": 1,
                          "library": 2}
    row = _recall(out)
    assert code == 1 and not out["passed"] and row["passed"] is False
    assert row["figure"] == "not judged: 1 of its 2 labelled runs not among the inputs"
    details = out["conditions"][0]["details"]
    assert any("answer-at-round-1 not among the inputs" in d for d in details)
    assert not any("labels changed" in d for d in details)        # a partial run is not a change of labels

    # the text form names the run and its scenario count
    assert main(["check"]) == 1
    text = capsys.readouterr().out
    assert "judged run: traces/runs/aaa-part (1 scenario(s) of the 2 in scenarios/)" in text
    assert "not judged: 1 of its 2 labelled runs" in text and "all three conditions hold" not in text

    # --run names the whole library's run: every condition holds on it
    code, out = _check(capsys, "--run", "traces/runs/zzz-full")
    assert out["run"]["scenarios"] == 2 and _recall(out)["passed"] and _recall(out)["figure"].startswith("1 of 1")
    assert code == 0 and out["passed"], out



def test_the_report_names_the_run_it_judged(checkout, capsys):
    assert main(["run", "scenarios/04-identical-evidence.yaml", "--run-id", "only"]) == 0
    capsys.readouterr()
    assert main(["report", "--out", "r", "--compare", "none"]) == 0
    words = "traces/runs/only (1 scenario(s) of the 2 in scenarios/)"
    assert f"judged run: {words}" in capsys.readouterr().out
    assert f"Judged run: {words}" in (checkout / "r" / "index.html").read_text()
    assert f"Judged run: {words}" in (checkout / "r" / "summary.md").read_text()


def test_with_no_run_the_gate_fails_and_says_why(checkout, capsys):
    code, out = _check(capsys)
    assert code == 1 and not out["passed"] and out["run"] is None
    assert all(c["passed"] for c in out["conditions"][1:]), out     # only the missing run fails it
    assert main(["check"]) == 1
    text = capsys.readouterr().out
    assert "judged run: none: no complete run under traces/runs/" in text
    assert "all three conditions hold" not in text


def test_run_names_a_complete_run_or_is_refused(checkout, capsys):
    (checkout / "traces" / "runs" / "crashed").mkdir(parents=True)
    (checkout / "traces" / "runs" / "crashed" / "a.jsonl").write_text("{}\n")
    for given, why in (("traces/runs/nothing", "no such folder"), ("traces/runs/crashed", "no summary.json")):
        assert main(["check", "--run", given]) == 2
        err = capsys.readouterr().err
        assert f"{given}: --run: {why}" in err and "Traceback" not in err
    assert main(["run", "scenarios/01-answer-at-round-1.yaml", "--run-id", "crashed"]) == 2
    assert "--run-id: 'crashed': exists already" in capsys.readouterr().err
    assert main(["run", "scenarios/01-answer-at-round-1.yaml", "--run-id", "../up"]) == 2
    assert "not a folder name" in capsys.readouterr().err
