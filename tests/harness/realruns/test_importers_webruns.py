"""The ReAct web-run importer (`harness.realruns.importers.react`) on
small excerpts of its three sources (tests/fixtures/webruns/, MIT-licensed,
see traces/webruns/LICENSE-NOTE.md), and the committed corpus against its
labels and its build script (benchmarks/corpora/build_webruns.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.realruns.importers import react
from harness.realruns.importers.convert import render_round_log
from harness.realruns.importers.callkinds import READ, WRITE
from harness.realruns.importers.resultstatus import EMPTY, ERROR, OK
from harness.realruns.labels import load_labels
from harness.realruns.roundlogs import parse_round_log, read_round_log

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "webruns"
CORPUS = ROOT / "traces" / "webruns"
LABELS = ROOT / "scenarios" / "labels" / "labels-webruns.yaml"


def _build():
    sys.path.insert(0, str(ROOT / "benchmarks" / "corpora"))
    try:
        import build_webruns
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "corpora"))
    return build_webruns


build = _build()


def test_fireact_rounds_are_searches_and_finish_is_the_answer():
    data = json.loads((FIX / "fireact-mini.json").read_text(encoding="utf-8"))
    [log] = build.fireact_logs(data, ["2401"], build.FIREACT)
    assert [r.calls[0].status for r in log.rounds] == [EMPTY, EMPTY, OK, OK]      # `None`: Google found nothing
    call = log.rounds[2].calls[0]
    assert (call.tool, call.args, call.kind, call.result) == (
        "search", {"query": "American indie rock group Jesse Sandoval"}, READ, "The Shins")
    assert log.labels["finish"] == "The Shins" and log.labels["em"] is True and log.labels["num_rounds"] == 4
    assert log.labels["commit"] == build.FIREACT["commit"] and log.labels["license"] == "MIT"
    again = parse_round_log(render_round_log(log), "x.jsonl")                      # the format round-trips
    assert [r.calls[0].result for r in again.rounds] == [r.calls[0].result for r in log.rounds]
    assert render_round_log(log) == (CORPUS / "fireact-hotpotqa" / "2401.jsonl").read_text(encoding="utf-8")


def test_fireact_run_without_search_has_no_rounds():
    data = json.loads((FIX / "fireact-mini.json").read_text(encoding="utf-8"))
    log = react.fireact_log("6238", data["6238"], FIX / "fireact-mini.json")
    assert log.rounds == [] and log.labels["finish"] == "Seth MacFarlane"
    assert log.labels["outcome"] == {"value": "success", "field": "em", "raw": True,
                                     "from": f"{FIX / 'fireact-mini.json'}#6238"}


def test_reflexion_blocks_lookup_and_not_found():
    text = (FIX / "reflexion-mini.txt").read_text(encoding="utf-8")
    blocks = react.reflexion_correct_blocks(text)
    assert len(blocks) == 2                                          # the incorrect agents are not taken
    q, rounds, answer, truth, marked = react.reflexion_rounds(blocks[0])
    assert q.startswith("In what state is the manufacturer of Bisquick")
    assert [(r.calls[0].tool, r.calls[0].status) for r in rounds] == [
        ("Search", OK), ("Lookup", EMPTY), ("Search", OK), ("Search", OK)]           # 'No Results' is empty
    assert rounds[1].calls[0].args == {"keyword": "manufacturer"}
    assert rounds[2].calls[0].result.startswith("Could not find [Bisquick manufacturer]. Similar: ['Bisquick'")
    assert "Golden Valley, Minnesota" in rounds[3].calls[0].result                   # multi-line pages kept whole
    assert (answer, truth, marked) == ("Minnesota", "Minnesota", True)
    _, rounds, *_ = react.reflexion_rounds(blocks[1])
    assert [r.calls[0].status for r in rounds] == [EMPTY, OK, EMPTY, OK]             # 'Similar: []' is empty


def test_observation_statuses():
    assert react.observation_status("None") == EMPTY
    assert react.observation_status("Invalid Action. Valid Actions are Lookup[<topic>] ...") == ERROR
    assert react.observation_status("There were no results matching the query.") == EMPTY
    assert react.observation_status("Could not find [X]. Similar: ['X (band)']") == OK
    assert react.observation_status("76,416") == OK


def test_committed_corpus_is_labelled_and_valid():
    labels = load_labels([LABELS])
    files = sorted(CORPUS.glob("*/*.jsonl"))
    assert len(files) == len(labels) == 50
    for f in files:
        log = read_round_log(f)
        label = labels.for_run(log.name, None, str(f))
        assert label is not None and log.labels["correct"] is True, f
        assert 1 <= label.should_not_stop_before <= len(log.rounds), f
        assert len(log.rounds) >= build.MIN_ROUNDS
    shop = [read_round_log(f) for f in files if f.parent.name == "react-webshop"]
    assert len(shop) == 17 and all(log.rounds[-1].calls[0].kind == WRITE for log in shop)


def test_webshop_episode_purchase_is_the_last_round():
    text = (FIX / "webshop-mini.txt").read_text(encoding="utf-8")
    episodes = react.webshop_episodes(text)
    assert sorted(episodes) == [115, 316, 442]
    instruction, rounds, score = react.webshop_rounds(episodes[115])
    assert instruction.startswith("i'd like to find a large pink tankini swimsuit") and score == 1.0
    assert [(r.calls[0].tool, r.calls[0].kind, r.calls[0].status) for r in rounds] == [
        ("search", READ, OK), ("click", READ, OK), ("click", READ, OK), ("click", READ, OK),
        ("click", READ, ERROR), ("click", READ, OK), ("click", WRITE, OK)]        # think[...] steps are no calls
    assert rounds[0].calls[0].args == {"query": "large pink tankini swimsuit loose-fitting"}
    assert rounds[-1].calls[0].result == "Your score (min 0.0, max 1.0): 1.0"          # the run's tally cut off
    assert react.webshop_rounds(episodes[442])[2] == 0.0
    [log] = react.import_webshop(text, [316], build.WEBSHOP)
    assert log.labels["correct"] is True and log.labels["commit"] == build.WEBSHOP["commit"]
    [log] = react.import_webshop(text, [115], build.WEBSHOP)                       # the committed run, byte for byte
    assert render_round_log(log) == (CORPUS / "react-webshop" / "115.jsonl").read_text(encoding="utf-8")


def test_decisions_are_documented():
    from test_importers import test_decisions_are_documented as check
    check(react)
    check(build)
