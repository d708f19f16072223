"""A run's recorded outcome (`realruns.outcomes`) and the gzip round logs the
outcome corpora are committed as."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.analysis.sweep.progress import Corpus, load_corpora
from harness.realruns.outcomes import OutcomeError, outcome_label, outcome_of
from harness.realruns.roundlogs import read_round_log
from harness.realruns.runfiles import load_runs
from imprint_core.errors import UserInputError


@pytest.mark.parametrize("labels, expected", [
    ({"outcome": {"value": "failure", "field": "summary.max_reward", "raw": 0.67}, "reward": 1.0},
     ("failure", "summary.max_reward")),                 # the importer's verdict wins over a legacy field
    ({"resolved": True, "reward": 0.0}, ("success", "resolved")),
    ({"reward": 0.5}, ("failure", "reward")),             # partial credit is a failure
    ({"reward": True}, ("success", "reward")),            # FireAct writes its reward as a boolean
    ({"reward": float("nan"), "correct": False}, ("failure", "correct")),
    ({"score": 1.0}, ("success", "score")),
    ({"task_id": 3}, ("unknown", None)),
])
def test_the_outcome_is_the_source_s_own_verdict(labels, expected):
    got = outcome_of(labels)
    assert (got.value, got.field) == expected


def test_an_importer_s_outcome_entry_reads_back_and_a_bad_one_is_named():
    entry = outcome_label("success", "reward", 1, "data/x.json")
    assert outcome_of({"outcome": entry}).where == "data/x.json"
    with pytest.raises(ValueError):
        outcome_label("won", "reward", 1)
    with pytest.raises(OutcomeError) as e:
        outcome_of({"outcome": {"value": "won"}})
    assert e.value.key == "labels.outcome.value" and "success" in e.value.expected


def _log(path: Path, header: dict, gz: bool) -> Path:
    text = json.dumps({"format": "imprint-rounds/1", "source": "t", "labels": header}) + "\n" + \
        json.dumps({"round": 1, "calls": [{"tool": "s", "args": {}, "kind": "read", "status": "ok",
                                           "result": "a fact"}]}) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def test_a_gzip_round_log_reads_as_its_plain_name_and_a_broken_one_is_named(tmp_path):
    _log(tmp_path / "runs" / "r1.jsonl.gz", {"reward": 1.0}, gz=True)
    (runs, warnings) = load_runs([tmp_path / "runs"])
    assert [(r.name, r.log.path.endswith("r1.jsonl"), len(r.log.rounds)) for r in runs] == [("r1", True, 1)]
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"\x1f\x8b not gzip at all")
    with pytest.raises(UserInputError) as e:
        read_round_log(bad)
    assert e.value.file == str(bad) and "gzip" in str(e.value)


def test_a_malformed_outcome_in_a_corpus_names_the_file_and_key(tmp_path):
    _log(tmp_path / "runs" / "r1.jsonl", {"outcome": {"value": "maybe"}}, gz=False)
    labels = tmp_path / "labels-x.yaml"
    labels.write_text("runs: {}\n")
    with pytest.raises(UserInputError) as e:
        load_corpora([Corpus([str(tmp_path / "runs")], str(labels))], outcomes=True)
    assert e.value.file.endswith("r1.jsonl") and e.value.key == "labels.outcome.value"
