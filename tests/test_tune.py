"""`imprint tune`: labels, the sweep, the recommendation, the curve."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.analysis.frames import load_frames
from harness.realruns.labels import RunLabel, judge, load_labels, parse_labels
from harness.analysis.tune import recommend, runs_from_frames, sweep
from imprint_core.errors import UserInputError
from imprint_core.novelty import NORMALIZATIONS

from reportdata import fact, round_log

ROOT = Path(__file__).resolve().parent.parent
TAU = ROOT.parent / "shared" / "data" / "roundlogs" / "tau-bench-airline"
TAU_LABELS = ROOT / "scenarios" / "labels" / "labels-tau-bench.yaml"


def _calls(*results: str) -> list[dict]:
    return [{"result": r} for r in results]


@pytest.fixture()
def logs(tmp_path: Path) -> tuple[Path, Path]:
    """`useful`: new evidence, a 3-round lull, new evidence again (ends at 7).
    `looping`: two new rounds, then the same evidence for 8 rounds."""
    d = tmp_path / "logs"
    round_log(d / "useful.jsonl", [_calls(fact(1)), _calls(fact(1)), _calls(fact(1)), _calls(fact(1)),
                                   _calls(fact(2)), _calls(fact(3)), _calls(fact(4))])
    round_log(d / "looping.jsonl", [_calls(fact(5)), _calls(fact(6))] + [_calls(fact(5)) for _ in range(8)])
    labels = tmp_path / "labels.yaml"
    labels.write_text("runs:\n  useful: {should_not_stop_before: 7}\n  looping: {loops: [3, 10]}\n")
    return d, labels


def test_sweep_finds_premature_stops_and_loop_rounds(logs) -> None:
    d, labels_file = logs
    runs = runs_from_frames(load_frames([d]), load_labels([labels_file]))
    results = {(s.normalization, s.patience): s for s in sweep(runs, range(2, 21), ["none", "basic", "default"])}
    # the lull is rounds 2-4: patience 2 and 3 stop the useful run early, 4 does not
    assert results[("default", 2)].premature == 1 and results[("default", 2)].premature_runs == ["useful@3<7"]
    assert results[("default", 3)].premature == 1
    assert results[("default", 4)].premature == 0
    # the loop (rounds 3-10): patience p stops it at round 2 + p, after p rounds inside it
    for p in range(2, 9):
        assert results[("default", p)].loop_rounds == p
    assert results[("default", 9)].loop_rounds == 8 == results[("default", 9)].loop_total
    best = recommend(list(results.values()))
    assert (best.patience, best.premature, best.loop_rounds) == (4, 0, 4)


def test_judge_counts_rounds_inside_loops() -> None:
    label = RunLabel("r", should_not_stop_before=5, loops=((3, 6), (9, 9)))
    j = judge(label, 4)
    assert (j.premature, j.rounds_lost, j.loop_rounds, j.loop_total, j.loops_stopped) == (True, 1, 2, 5, 2)
    j = judge(label, None, rounds=8)
    assert (j.premature, j.loop_rounds, j.loop_total, j.loops) == (False, 4, 4, 1)


def test_cli_prints_recommendation_and_writes_curve(logs, tmp_path: Path, capsys) -> None:
    d, labels = logs
    plot = tmp_path / "curve.png"
    assert main(["tune", str(d), "--labels", str(labels), "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "recommended: patience 4, normalization default: 0 premature" in out
    assert "one less: patience 3, normalization default: 1 premature (useful@4<7)" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["tune", str(d), "--labels", str(labels), "--json", "--patience", "2-5"]) == 0
    data = json.loads(capsys.readouterr().out)
    # every normalization: none, basic and the mask profiles
    assert data["recommended"]["patience"] == 4 and len(data["settings"]) == 4 * len(NORMALIZATIONS)


def test_user_turns_start_new_replies(tmp_path: Path, capsys) -> None:
    # a user turn before round 3: by default a new reply, so the lull never reaches patience 2
    round_log(tmp_path / "u.jsonl", [_calls(fact(1)), _calls(fact(1)), _calls(fact(1)), _calls(fact(2))],
              labels={"user_turn_before_round": [1, 3]})
    labels = tmp_path / "l.yaml"
    labels.write_text("runs:\n  u: {should_not_stop_before: 4}\n")
    main(["tune", str(tmp_path / "u.jsonl"), "--labels", str(labels), "--json", "--patience", "2"])
    reset = json.loads(capsys.readouterr().out)
    main(["tune", str(tmp_path / "u.jsonl"), "--labels", str(labels), "--json", "--patience", "2",
          "--user-turns", "ignore"])
    ignore = json.loads(capsys.readouterr().out)
    assert reset["settings"][0]["premature"] == 0
    assert ignore["settings"][0]["premature"] == 1


@pytest.mark.parametrize("text, where", [
    ("runs:\n  a: {should_not_stop_before: 0}\n", ":2: runs.a.should_not_stop_before"),
    ("runs:\n  a:\n    loops: [5, 3]\n", ":3: runs.a.loops"),
    ("runs:\n  a:\n    loops: [[1, 2], [4]]\n", ":3: runs.a.loops[1]"),
    ("runs:\n  a: {stop_before: 3}\n", ":2: runs.a.stop_before"),
    ("runs:\n  a: {note: hi}\n", ":2: runs.a"),
    ("format: imprint-labels/2\nruns: {}\n", ":1: format"),
    ("runz: {}\n", ":1: runz"),
    ("runs:\n  a: {loops: [1, 2]}\n  a: {loops: [3, 4]}\n", ":3: a"),
    ("runs:\n  a:\n    loops:\n      - {start: 3, end: 9, period: 0}\n", ":4: runs.a.loops[0].period"),
    ("runs:\n  a:\n    loops:\n      - {start: 3, end: 4,\n         period: 3}\n", ":5: runs.a.loops[0].period"),
    ("runs:\n  a:\n    loops: {start: 3, end: 9, period: two}\n", ":3: runs.a.loops.period"),
    ("runs:\n  a:\n    loops: [[1, 2], {start: 3}]\n", ":3: runs.a.loops[1].end"),
    ("runs:\n  a:\n    loops:\n      - [1, 2]\n      - {start: 3, end: 4, every: 2}\n", ":5: runs.a.loops[1].every"),
    ("runs:\n  a:\n    loops: {start: 9, end: 3}\n", ":3: runs.a.loops"),
])
def test_malformed_labels_name_file_line_key(tmp_path: Path, text: str, where: str, capsys) -> None:
    with pytest.raises(UserInputError) as err:
        parse_labels(text, "labels.yaml")
    assert err.value.describe().startswith("labels.yaml" + where), err.value.describe()
    f = tmp_path / "labels.yaml"
    f.write_text(text)
    round_log(tmp_path / "a.jsonl", [_calls(fact(1))])
    assert main(["tune", str(tmp_path / "a.jsonl"), "--labels", str(f)]) == 2
    err_out = capsys.readouterr().err
    assert f"{f}{where}" in err_out and "Traceback" not in err_out


def test_loops_with_periods_and_the_old_forms() -> None:
    text = ("runs:\n"
            "  old: {loops: [5, 6]}\n"
            "  old-list: {loops: [[10, 12], [5, 6]]}\n"
            "  mixed:\n"
            "    loops: [{start: 20, end: 27, period: 2}, [3, 4], {start: 8, end: 9}]\n"
            "  one: {loops: {start: 4, end: 6, period: 1}}\n"
            "  pair-of-maps: {loops: [{start: 1, end: 2}, {start: 5, end: 7, period: 4}]}\n")
    labels = parse_labels(text, "l.yaml")
    assert labels.runs["old"].loops == ((5, 6),) and labels.runs["old"].periods == (None,)
    assert labels.runs["old-list"].loops == ((5, 6), (10, 12))
    mixed = labels.runs["mixed"]
    assert mixed.loops == ((3, 4), (8, 9), (20, 27)) and mixed.periods == (None, None, 2)
    assert labels.runs["one"].loops == ((4, 6),) and labels.runs["one"].periods == (1,)
    assert labels.runs["pair-of-maps"].loops == ((1, 2), (5, 7)) and labels.runs["pair-of-maps"].periods == (None, 4)
    j = judge(mixed, None, rounds=30)
    assert (j.loops, j.loop_total) == (3, 2 + 2 + 8)


def test_a_run_is_found_by_its_path_below_a_folder() -> None:
    labels = parse_labels("runs:\n  chat/x: {should_not_stop_before: 3}\n  lite/x: {loops: [1, 2]}\n"
                          "  y: {should_not_stop_before: 9}\n", "l.yaml")
    assert labels.for_run("x", "x#1", "/logs/msa/chat/x.jsonl").should_not_stop_before == 3
    assert labels.for_run("x", "x#2", "logs/msa/lite/x.jsonl").loops == ((1, 2),)
    assert labels.for_run("x", "x#3", "logs/msa/other/x.jsonl") is None
    assert labels.for_run("y", None, "/logs/chat/y.jsonl").should_not_stop_before == 9


def test_no_labelled_run_is_unusable_input(tmp_path: Path, capsys) -> None:
    round_log(tmp_path / "a.jsonl", [_calls(fact(1))])
    labels = tmp_path / "l.yaml"
    labels.write_text("runs:\n  other: {loops: [1, 2]}\n")
    assert main(["tune", str(tmp_path / "a.jsonl"), "--labels", str(labels)]) == 2
    assert "no given run is labelled" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "a.jsonl"), "--labels", str(labels), "--patience", "1-3"]) == 2


def test_shipped_label_files_load() -> None:
    tau = load_labels([TAU_LABELS])
    assert sum(l.useful for l in tau.runs.values()) == 80 and sum(bool(l.loops) for l in tau.runs.values()) == 10
    scen = load_labels([ROOT / "scenarios" / "labels" / "labels-scenarios.yaml"])
    assert scen.runs["past-12-rounds"].should_not_stop_before == 30
    real = load_labels([ROOT / "scenarios" / "labels" / f"labels-{n}.yaml" for n in ("mini-swe-agent", "who-and-when")])
    msa = [l for l in real.runs.values() if l.name.startswith("deepseek_")]
    assert sum(l.useful for l in msa) == 47 and sum(len(l.loops) for l in msa) == 10
    assert not any(l.useful for l in real.runs.values() if l not in msa)
    assert sum(len(l.loops) for l in real.runs.values()) == 30
    assert all(len(l.periods) == len(l.loops) for l in real.runs.values())


@pytest.mark.skipif(not TAU.is_dir(), reason="the tau-bench round logs are not beside the repository")
def test_full_tau_bench_sweep_takes_seconds() -> None:
    started = time.perf_counter()
    frames = load_frames([TAU])
    runs = runs_from_frames(frames, load_labels([TAU_LABELS]))
    results = sweep(runs, range(2, 21), ["none", "basic", "default"])
    elapsed = time.perf_counter() - started
    assert len(runs) == 200 and len(results) == 57
    assert elapsed < 20, f"load and sweep took {elapsed:.1f} s"
    best = recommend(results)
    assert best.premature == 0 and best.useful == 80
