"""One road for the record's rule (issue 41, item 0).

`imprint replay F --rule record --patience P` and `imprint replay F --rule
record --param patience=P` are one rule choice and one replay (the rule reset at each
reply, as the loop, the gate and the tuner reset it); the tuner's cached
fast path (`sweep.compute_progress` + `stop_rounds`) gives the same stops.
Checked on every labelled run of the default corpora at every patience
from 2 to 20. Before the fix the two spellings stopped at different rounds
in 18 of the 4,142 (run, patience) pairs, all tau-bench runs with user turns.

Kept fast: the record rule is replayed once per run (at the largest
patience, observing to the end; its per-round progress does not depend on
patience), and every patience's stop is read off that one replay.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.analysis.sweep.progress import Corpus, compute_progress, load_corpora, stop_rounds
from harness.analysis.tune.settings import Setting
from harness.realruns.noveltyconfigs import SHIPPED
from harness.cli import build_parser, main
from harness.cli.corpora import DEFAULT_CORPORA
from harness.cli.ruleargs import choice_of
from harness.realruns.roundlogs import PATIENCE, RoundLog, replay, replay_rule
from imprint_core.novelty import NoveltyConfig
from imprint_core.stoprules import RuleChoice, choose

ROOT = Path(__file__).resolve().parents[3]
PATIENCES = range(PATIENCE.min, PATIENCE.max + 1)
CORPORA = [(d, lab) for d, lab in DEFAULT_CORPORA if "regressions" not in lab]


def _spellings(p: int) -> tuple[RuleChoice, RuleChoice]:
    parse = build_parser().parse_args
    return (choice_of(parse(["replay", "x", "--rule", "record", "--patience", str(p)])),
            choice_of(parse(["replay", "x", "--rule", "record", "--param", f"patience={p}"])))


def test_both_spellings_are_one_rule_choice_at_every_patience():
    for p in PATIENCES:
        short, long = _spellings(p)
        assert short == long == choose("record", {"patience": p}) == Setting(SHIPPED, p).choice
    tuned = Setting(dataclasses.replace(SHIPPED, min_new_shingles=1, fingerprint_unit="line"), 4).choice
    assert tuned == choice_of(build_parser().parse_args(["replay", "x", "--rule", "record", "--patience", "4",
                                                         "--novelty", "min_new_shingles=1",
                                                         "--novelty", "fingerprint_unit=line"]))
    parse = build_parser().parse_args
    assert choice_of(parse(["replay", "x", "--rule", "record", "--normalization", "none", "--novelty",
                            "min_new_shingles=2"])) == \
        choice_of(parse(["replay", "x", "--rule", "record", "--param", "normalization=none", "--param",
                         "min_new_shingles=2"]))
    # without --rule the shorthand sets the record half of the shipped rule (repeat-aware): its patience, and
    # its novelty config field by field
    shipped = choice_of(parse(["replay", "x", "--patience", "4", "--novelty", "min_new_shingles=2"]))
    assert shipped.name == "repeat-aware" and shipped.params["patience"] == 4
    assert shipped.params["novelty"] == NoveltyConfig(min_new_shingles=2)
    assert shipped.build().rules[0][1].config.min_new_shingles == 2


def _whole(run) -> RoundLog:
    """The run's log as a file holds it (the replies put back together)."""
    first = run.full[0]
    return RoundLog(first.path, first.source, first.labels, [r for rep in run.full for r in rep.rounds])


def _stops_of_one_replay(log: RoundLog) -> dict[int, int | None]:
    """Every patience's stop, from one replay through the rule choice at the
    largest patience: the counter of rounds without progress restarts with
    each reply; write rounds neither count nor reset."""
    replayed = replay_rule(log, Setting(SHIPPED, PATIENCE.max).choice.build, "reset", to_end=True)
    first: dict[int, int] = {}
    counter, reply = 0, None
    for reply_no, view, notes in replayed.rounds:
        if reply_no != reply:
            counter, reply = 0, reply_no
        if view.kind == "write":
            continue
        counter = 0 if notes["progress"] else counter + 1
        first.setdefault(counter, view.index)
    return {p: first.get(p) for p in PATIENCES}


@pytest.fixture(scope="module")
def labelled():
    corpora = [Corpus([str(ROOT / d)], str(ROOT / lab)) for d, lab in CORPORA if (ROOT / d).exists()]
    if len(corpora) < len(CORPORA):
        pytest.skip("the labelled corpora beside the repository are not there")
    runs, _ = load_corpora(corpora)
    return runs


def test_the_replay_and_the_tuner_agree_on_every_labelled_run_at_every_patience(labelled, tmp_path, capsys):
    runs = labelled
    assert {r.corpus for r in runs} == {"tau-bench", "mini-swe-agent", "who-and-when", "webruns"}
    progress, _ = compute_progress(runs, [NoveltyConfig()], jobs=1)
    derived = {}
    for ri, run in enumerate(runs):
        ours = _stops_of_one_replay(_whole(run))
        assert ours == stop_rounds(progress[(0, ri)], run.numbers, PATIENCES), run.name
        derived[run.name] = ours
    # The read-off is the replay: checked on the runs with several replies
    # (where a replay that ignores user turns would differ), at one patience
    # a run, every patience drawn.
    multi = [r for r in runs if len(r.full) > 1]
    assert len(multi) > len(PATIENCES)
    for i, run in enumerate(multi):
        p = PATIENCES[i % len(PATIENCES)]
        short, long = _spellings(p)
        assert replay(_whole(run), short).stop_round == replay(_whole(run), long).stop_round \
            == derived[run.name][p], (run.name, p)
    # End to end: the command's two spellings on those runs, at the patience
    # values where the two roads parted most before.
    files = tmp_path / "runs"
    files.mkdir()
    for run in multi:
        log = _whole(run)
        header = {"format": "imprint-rounds/1", "source": log.source, "labels": log.labels}
        lines = [json.dumps(header)] + [json.dumps({"round": i, "calls": [
            {"tool": c.tool, "args": c.args, "kind": c.kind, "status": c.status, "result": c.result}
            | ({"segments": c.segments} if c.segments is not None else {}) for c in r.calls]})
            for i, r in enumerate(log.rounds, start=1)]
        (files / f"{run.corpus}--{run.name}.jsonl").write_text("\n".join(lines) + "\n")
    by_file = {f"{r.corpus}--{r.name}.jsonl": r.name for r in multi}
    for p in (2, 3):
        got = []
        for spelling in (["--rule", "record", "--patience", str(p)], ["--rule", "record", "--param", f"patience={p}"]):
            assert main(["replay", "--json", *spelling, str(files)]) == 0
            got.append({Path(d["file"]).name: d["stop_round"]
                        for d in map(json.loads, capsys.readouterr().out.splitlines())})
        assert got[0] == got[1] == {f: derived[name][p] for f, name in by_file.items()}


def test_the_library_s_replay_is_the_same_road():
    """`replay(log, patience=P)` (the record's shorthand) resets at each reply
    like `replay(log, choice)`: a user turn starts a fresh patience count."""
    from harness.realruns.roundlogs import Round, RoundCall
    same = [Round(i, [RoundCall("search", {"q": "a"}, "read", "ok", "the same page " * 20)]) for i in range(1, 7)]
    log = RoundLog("x.jsonl", "test", {"user_turn_before_round": [4]}, same)
    assert replay(log, patience=2).stop_round == replay(log, choose(params={"patience": 2})).stop_round == 3
    # Round 4 follows a user turn: a fresh reply whose first page is new again,
    # so patience 3 never runs out (a replay of the whole log stopped at round 4).
    assert replay(log, patience=3).stop_round is None
    assert replay(log, choose(params={"patience": 3})).stop_round is None
