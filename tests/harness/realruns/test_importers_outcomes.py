"""The outcome corpora of ReAct's WebShop notebook (`react-webshop` format,
`importers/webshop.py`) and AgentRx's tau-bench retail runs (`tau-bench`
format). Fixtures cut from the sources (MIT; see the LICENSE-NOTE.md files
under traces/outcomes/): `webshop-mini.ipynb` holds the notebook's cell 7
with episodes 0, 1, 3 and 175 as printed (running lines included);
`tau-retail-mini.json` holds tasks 47 and 67 of `tau_dataset_full.json`,
the system policy cut to its first line and `info` to the instruction."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from harness.cli import main as imprint
from harness.realruns.importers import detect_format, import_file, import_paths
from harness.realruns.importers.callkinds import READ, WRITE
from harness.realruns.importers.convert import detect
from harness.realruns.importers.resultstatus import ERROR, OK
from harness.realruns.importers.webshop import episode_outcome, running_lines
from harness.realruns.labels import load_labels
from harness.realruns.outcomes import outcome_of
from harness.realruns.runfiles import load_runs
from imprint_core.errors import UserInputError

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "outcomes"
"""Not under fixtures/interop/: test_interop replays that folder whole and counts its runs."""
SHOP = FIX / "webshop-mini.ipynb"
TAU = FIX / "tau-retail-mini.json"
OUTCOMES = ROOT / "traces" / "outcomes"
LABELS = ROOT / "scenarios" / "labels"


def shop_logs():
    return {log.labels["episode"]: log for log in import_file(SHOP)}


def test_the_notebook_is_detected_and_other_notebooks_are_not():
    assert detect_format(SHOP) == "react-webshop"
    plain = {"cells": [{"cell_type": "code", "source": ["print(1)"], "outputs": [{"text": ["1\n"]}]}]}
    assert detect(plain) is None


def test_webshop_rounds_and_the_running_line_is_no_observation():
    logs = shop_logs()
    assert sorted(logs) == [0, 1, 3, 175]
    last = logs[3].rounds[-1].calls[0]            # 15 steps, no purchase: the last round is a read
    assert (last.tool, last.kind, len(logs[3].rounds)) == ("click", READ, 8)
    assert last.result.rstrip().endswith("[Buy Now]")                 # the page, not the running line after it
    assert all("-------------" not in r.calls[0].result for log in logs.values() for r in log.rounds)
    seq = [(r.calls[0].tool, r.calls[0].args, r.calls[0].kind, r.calls[0].status) for r in logs[175].rounds]
    assert seq[4] == ("click", {"element": "Buy Now"}, WRITE, ERROR)    # refused on the results page: goes on
    assert seq[5][:3] == ("click", {"element": "B07MG7Z32T"}, READ)
    assert seq[-1] == ("click", {"element": "Buy Now"}, WRITE, OK) and len(seq) == 9
    assert logs[1].labels["task_id"] == "webshop:1" and logs[1].labels["num_rounds"] == len(logs[1].rounds)


def test_webshop_outcomes_follow_the_printed_score_then_the_running_reward():
    logs = shop_logs()
    got = {i: (log.labels["outcome"]["value"], log.labels["outcome"]["field"], log.labels["outcome"]["raw"])
           for i, log in logs.items()}
    assert got[1] == ("success", "score", 1.0)
    assert got[175] == ("failure", "score", 0.6666666666666666)       # a partial match is a failure, raw kept
    assert got[0] == ("failure", "reward", 0.0)                       # purchase page without text: lines 0 and 1
    assert got[3] == ("unknown", "reward", None)                      # episode 2, which holds line 3, is cut out
    assert outcome_of(logs[1].labels).value == "success"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 0.8, 1.0]), min_size=1, max_size=60))
def test_rewards_recovered_from_running_lines_are_the_notebooks(rewards):
    """Lines printed as `run_episodes` prints them give back each episode's
    reward and its success (reward == 1), for every episode."""
    text, total, wins = "", 0.0, 0
    for n, r in enumerate(rewards, start=1):
        total += r
        wins += r == 1
        text += f"{n} {total / n} {wins / n} 0.0\n-------------\n"
    lines = running_lines(text)
    for i, r in enumerate(rewards):
        out = episode_outcome(i, None, lines, "f")
        assert out["value"] == ("success" if r == 1 else "failure")
        assert out["raw"] == pytest.approx(r, abs=1e-9)


def test_import_and_replay_read_the_notebook(tmp_path, capsys):
    out = tmp_path / "out"
    assert imprint(["import", str(SHOP), "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "webshop-mini").iterdir()) == ["0.jsonl", "1.jsonl", "175.jsonl", "3.jsonl"]
    runs, warnings = load_runs([SHOP])
    assert len(runs) == 4 and not warnings and {r.name for r in runs} == {"0", "1", "3", "175"}


def _notebook() -> dict:
    return json.loads(SHOP.read_text(encoding="utf-8"))


@pytest.mark.parametrize("change, key", [
    (lambda nb: nb.pop("cells"), "cells"),
    (lambda nb: nb.__setitem__("cells", {"a": 1}), "cells"),
    (lambda nb: nb["cells"][1].__setitem__("outputs", []), "cells[0..1].outputs"),
])
def test_malformed_notebook_names_file_and_key(tmp_path, change, key):
    nb = _notebook()
    change(nb)
    bad = tmp_path / "WebShop.ipynb"
    bad.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(UserInputError) as err:
        import_paths([bad], tmp_path / "out", fmt="react-webshop")
    message = str(err.value)
    assert message.startswith(str(bad)) and f"{key}: " in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_tau_retail_runs_read_as_tau_bench_with_their_outcome(tmp_path):
    assert detect_format(TAU) == "tau-bench"
    logs = {log.labels["task_id"]: log for log in import_file(TAU)}
    assert sorted(logs) == [47, 67]
    ok = logs[67]
    assert [(c.tool, c.status) for r in ok.rounds for c in r.calls][:3] == [
        ("find_user_id_by_name_zip", ERROR), ("find_user_id_by_name_zip", ERROR), ("find_user_id_by_name_zip", OK)]
    assert ok.labels["user_turn_before_round"][:3] == [1, 2, 3]       # each zip code came in a new user reply
    assert ok.labels["outcome"]["value"] == "success" and logs[47].labels["outcome"]["value"] == "failure"
    broken = json.loads(TAU.read_text(encoding="utf-8"))
    del broken[1]["reward"]
    bad = tmp_path / "tau.json"
    bad.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(UserInputError) as err:
        import_file(bad)
    assert str(err.value).startswith(str(bad)) and "[1].reward: " in str(err.value)


@pytest.mark.parametrize("source, runs, fmt, prefix", [
    ("react-webshop", 483, "react-webshop", "webshop:"),
    ("agentrx-tau-retail", 102, "tau-bench", "tau-retail:"),
])
def test_committed_corpus_carries_outcome_task_and_provenance(source, runs, fmt, prefix):
    loaded, warnings = load_runs([OUTCOMES / source])
    assert len(loaded) == runs and not warnings
    tasks = set()
    for run in loaded:
        lab = run.log.labels
        assert lab["source_format"] == fmt and lab["task_id"].startswith(prefix) and lab["license"] == "MIT"
        assert {"repo", "commit", "path", "agent"} <= set(lab) and run.log.rounds
        assert outcome_of(lab).value in ("success", "failure")
        tasks.add(lab["task_id"])
    assert len(tasks) == runs                                         # one run per task
    labels = load_labels([LABELS / f"labels-{source}.yaml"])
    by_name = {f"{source}/{r.name}": r for r in loaded}
    for name, label in labels.runs.items():
        n = len(by_name[name].log.rounds)
        assert all(1 <= a <= b <= n for a, b in label.loops + label.repeats), name
