"""`imprint tune`: labels, the split by task, the novelty cache, the sweep on
processes and on Dask, the Pareto front, the recommendation rule, the outputs."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from harness.analysis.sweep import work as sweep_mod
from harness.analysis.sweep.cache import ProgressCache, clear_memory_cache
from harness.analysis.sweep.progress import Corpus, TuneRun, load_corpora, stop_rounds
from harness.analysis.tune.ceiling import loop_ceiling, oracle_progress
from harness.analysis.tune.search import Rule, Scores, Split, pareto_front, tune
from harness.analysis.tune.settings import Setting
from harness.cli import main
from imprint_core.novelty import config as noveltyconfigs
from harness.realruns.labels import RunLabel, judge, load_labels, parse_labels
from harness.realruns.roundlogs import RoundLog, apply_patience
from imprint_core.errors import UserInputError
from imprint_core.novelty import NoveltyConfig
from imprint_core.settings import SPECS

from reportdata import fact, round_log

ROOT = Path(__file__).resolve().parents[3]
TAU = ROOT.parent / "shared" / "data" / "roundlogs" / "tau-bench-airline"
TAU_LABELS = ROOT / "scenarios" / "labels" / "labels-tau-bench.yaml"
WHO = ROOT.parent / "shared" / "data" / "raw" / "who-and-when"
WHO_LABELS = ROOT / "scenarios" / "labels" / "labels-who-and-when.yaml"


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch):
    """Every test starts with an empty in-memory novelty cache and a disk cache in its own folder."""
    clear_memory_cache()
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    clear_memory_cache()


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


def test_judge_counts_rounds_inside_loops() -> None:
    label = RunLabel("r", should_not_stop_before=5, loops=((3, 6), (9, 9)))
    j = judge(label, 4)
    assert (j.premature, j.rounds_lost, j.loop_rounds, j.loop_total, j.loops_stopped) == (True, 1, 2, 5, 2)
    j = judge(label, None, rounds=8)
    assert (j.premature, j.loop_rounds, j.loop_total, j.loops) == (False, 4, 4, 1)


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
    assert main(["tune", str(tmp_path / "a.jsonl"), "--labels", str(labels), "--out", str(tmp_path / "o")]) == 2
    assert "corpus l: no run is labelled" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "a.jsonl"), "--labels", str(labels), "--patience", "1-3"]) == 2


def test_shipped_label_files_load() -> None:
    tau = load_labels([TAU_LABELS])
    assert sum(l.useful for l in tau.runs.values()) == 80 and sum(bool(l.loops) for l in tau.runs.values()) == 10
    scen = load_labels([ROOT / "scenarios" / "labels" / "labels-scenarios.yaml"])
    assert scen.runs["past-12-rounds"].should_not_stop_before == 30
    real = load_labels([ROOT / "scenarios" / "labels" / f"labels-{n}.yaml" for n in ("mini-swe-agent", "who-and-when")])
    msa = [l for l in real.runs.values() if l.name.startswith("deepseek_")]
    assert sum(l.useful for l in msa) == 47 and sum(len(l.loops) for l in msa) == 12
    assert not any(l.useful for l in real.runs.values() if l not in msa)
    assert sum(len(l.loops) for l in real.runs.values()) == 21
    assert all(len(l.periods) == len(l.loops) for l in real.runs.values())


def test_every_real_loop_label_meets_the_loop_definition() -> None:
    """scenarios/labels/README.md: three rounds, or two full periods, that
    bring nothing new; a single repetition is a repeat, labelled apart."""
    files = [ROOT / "scenarios" / "labels" / f"labels-{n}.yaml"
             for n in ("mini-swe-agent", "who-and-when", "tau-bench", "webruns")]
    labels = load_labels(files)
    for lab in labels.runs.values():
        for (a, b), period in zip(lab.loops, lab.periods or (None,) * len(lab.loops)):
            length = b - a + 1
            assert length >= 3 or period is not None and length >= 2 * period, (lab.name, a, b, period)
    assert sum(len(l.repeats) for l in labels.runs.values()) >= 12




# ---- a small labelled corpus ----------------------------------------------------------------------------
LULL = [_calls(fact(1)), _calls(fact(1)), _calls(fact(1)), _calls(fact(1)), _calls(fact(2)), _calls(fact(3)),
        _calls(fact(4))]
LOOP = [_calls(fact(5)), _calls(fact(6))] + [_calls(fact(5)) for _ in range(8)]


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    """Round logs of four tasks: two trials of one useful task (a lull at 2-4,
    useful to 7), a loop at 3-10, a run cut by a user turn (two replies), and
    an unlabelled one."""
    d = tmp_path / "demo"
    round_log(d / "useful-a.jsonl", LULL, labels={"task_id": "t1"})
    round_log(d / "useful-b.jsonl", LULL, labels={"task_id": "t1"})
    round_log(d / "looping.jsonl", LOOP, labels={"task_id": "t2"})
    round_log(d / "turns.jsonl", [_calls(fact(7)), _calls(fact(7)), _calls(fact(8)), _calls(fact(8)), _calls(fact(8))],
              labels={"task_id": "t3", "user_turn_before_round": [1, 3]})
    round_log(d / "other.jsonl", LOOP, labels={"task_id": "t4"})
    labels = tmp_path / "labels-demo.yaml"
    labels.write_text("runs:\n  useful-a: {should_not_stop_before: 7}\n  useful-b: {should_not_stop_before: 7}\n"
                      "  looping: {loops: [3, 10]}\n  turns: {should_not_stop_before: 5}\n")
    return d, labels


def _runs(corpus) -> list[TuneRun]:
    d, labels = corpus
    return load_corpora([Corpus([str(d)], str(labels))])[0]


def test_judge_catches_a_loop_from_its_start_to_slack_rounds_after_its_end() -> None:
    label = RunLabel("r", loops=((5, 8), (12, 12)))
    caught = {stop: judge(label, stop, 20, slack=1).loops_caught for stop in (None, 4, 5, 8, 9, 10, 12, 13, 14)}
    # a stop in the first loop (or one round after it) also spares the second, which never runs
    assert caught == {None: 0, 4: 0, 5: 2, 8: 2, 9: 2, 10: 0, 12: 1, 13: 1, 14: 0}
    assert judge(label, 9, 20, slack=0).loops_caught == 0
    assert judge(label, None, 10).loops == 1          # the second loop lies past the run's end


def test_split_is_by_task_deterministic_and_never_cuts_a_task(corpus) -> None:
    tasks = [f"task-{i}" for i in range(400)]
    split = Split(holdout=0.3, folds=3, seed="s")
    parts = [split.part(t) for t in tasks]
    assert parts == [Split(holdout=0.3, folds=3, seed="s").part(t) for t in reversed(tasks)][::-1]
    assert 0.2 < parts.count("held-out") / len(tasks) < 0.4
    assert {split.fold(t) for t in tasks} == {0, 1, 2}
    assert [Split(holdout=0.3, seed="other").part(t) for t in tasks] != parts
    runs = _runs(corpus)
    assert {r.name: r.task for r in runs} == {"useful-a": "t1", "useful-b": "t1", "looping": "t2", "turns": "t3"}
    # whatever the seed, both trials of task t1 land in the same part, and no task is in both parts
    seen_parts = set()
    for seed in range(12):
        t = tune(runs, [NoveltyConfig()], [4], split=Split(holdout=0.5, folds=2, seed=str(seed)), jobs=1)
        dev = {r.task for r, m in zip(t.scores.runs, t.part_mask("dev")) if m}
        held = {r.task for r, m in zip(t.scores.runs, t.part_mask("held-out")) if m}
        assert not dev & held and dev | held == {"t1", "t2", "t3"}
        assert len({t.parts[r.task] for r in runs if r.task == "t1"}) == 1
        seen_parts.add(t.parts["t1"])
        assert all(t.folds[task] in (0, 1) for task in dev)
    assert seen_parts == {"dev", "held-out"}


@pytest.mark.skipif(not WHO.is_dir(), reason="the Who&When raw files are not beside the repository")
def test_who_and_when_is_split_by_question_not_by_file() -> None:
    runs, _ = load_corpora([Corpus([str(WHO)], str(WHO_LABELS))])
    by_name = {r.name: r for r in runs}
    # Hand-Crafted/56 and Algorithm-Generated/88 ask the same question (08cae58d)
    assert by_name["Hand-Crafted/56"].task == by_name["Algorithm-Generated/88"].task
    assert by_name["Hand-Crafted/56"].task.startswith("08cae58d")
    assert len({r.task for r in runs}) < len(runs)


def test_novelty_is_computed_once_per_config_and_cached(corpus, monkeypatch, tmp_path: Path) -> None:
    calls: list[NoveltyConfig] = []
    real = sweep_mod.family_progress   # every (reply, config) the sweep judges goes through it
    monkeypatch.setattr(sweep_mod, "family_progress", lambda log, cfgs: calls.extend(cfgs) or real(log, cfgs))
    runs = _runs(corpus)
    assert len(runs) == 4 and len({r.digest for r in runs}) == 3   # two trials of equal content
    replies = sum(len(r.replies) for r in runs if r.name != "useful-b")
    assert replies == 4                                # the user turn cuts one run in two
    configs = [NoveltyConfig(), NoveltyConfig(min_new_shingles=1)]
    t = tune(runs, configs, range(2, 21), jobs=1, cache=ProgressCache(None))
    assert len(calls) == 2 * replies and t.stats.computed == 2 * 3
    a, b = ([r.name for r in runs].index(n) for n in ("useful-a", "useful-b"))
    assert (t.scores.stops[:, a] == t.scores.stops[:, b]).all()      # equal content: the same stops
    # another patience sweep, another rule: nothing is recomputed in this process
    t = tune(runs, configs, [5, 6], jobs=1, rule=Rule(0.5), cache=ProgressCache(None))
    assert len(calls) == 2 * replies and t.stats.memory == 2 * 3 and t.stats.computed == 0
    # on disk: a new process (an empty memory) finds it there
    disk = tmp_path / "disk"
    clear_memory_cache()
    tune(runs, configs, [4], jobs=1, cache=ProgressCache(disk))
    assert len(calls) == 4 * replies
    clear_memory_cache()
    t = tune(runs, configs, [4], jobs=1, cache=ProgressCache(disk))
    assert len(calls) == 4 * replies and t.stats.disk == 2 * 3 and t.stats.computed == 0
    # a changed run is a miss for that run only
    d, _ = corpus
    round_log(d / "looping.jsonl", LOOP[:-1], labels={"task_id": "t2"})
    clear_memory_cache()
    t = tune(_runs(corpus), configs, [4], jobs=1, cache=ProgressCache(disk))
    assert len(calls) == 4 * replies + 2 and t.stats.computed == 2 and t.stats.disk == 2 * 2


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(["read", "write", "ask", "error"]), st.booleans()), max_size=25),
                min_size=1, max_size=4))
def test_stop_rounds_is_the_patience_rule_for_every_patience(reps) -> None:
    numbers, n = [], 0
    for rep in reps:
        numbers.append(list(range(n + 1, n + 1 + len(rep))))
        n += len(rep)
    got = stop_rounds(reps, numbers, range(2, 21))
    for p in range(2, 21):
        expected = None
        for rep, nums in zip(reps, numbers):
            stop, _ = apply_patience(rep, p)
            if stop is not None:
                expected = nums[stop - 1]
                break
        assert got[p] == expected, p


def test_a_regression_pulls_its_task_into_dev(tmp_path: Path) -> None:
    """A run stored as a regression keeps its task id; that task's runs in the
    other corpora are then tuned on too, never scored as held-out."""
    same = {"instance_id": "astropy__astropy-1"}
    round_log(tmp_path / "corpus" / "a.jsonl", [_calls(fact(1))] * 3, same)
    round_log(tmp_path / "corpus" / "b.jsonl", [_calls(fact(2))] * 3, {"instance_id": "astropy__astropy-2"})
    round_log(tmp_path / "regressions" / "a-again.jsonl", [_calls(fact(1))] * 3, same)
    round_log(tmp_path / "regressions" / "bare.jsonl", [_calls(fact(3))] * 3)
    (tmp_path / "labels-demo.yaml").write_text("runs:\n  a: {loops: [2, 3]}\n  b: {loops: [2, 3]}\n")
    (tmp_path / "regressions.yaml").write_text("runs:\n  a-again: {loops: [2, 3]}\n  bare: {loops: [2, 3]}\n")
    runs, _ = load_corpora([Corpus([str(tmp_path / "corpus")], str(tmp_path / "labels-demo.yaml")),
                            Corpus([str(tmp_path / "regressions")], str(tmp_path / "regressions.yaml"))])
    assert {(r.corpus, r.name): r.task for r in runs} == {
        ("demo", "a"): "astropy__astropy-1", ("demo", "b"): "astropy__astropy-2",
        ("regressions", "a-again"): "astropy__astropy-1", ("regressions", "bare"): "regressions:bare"}
    t = tune(runs, [NoveltyConfig()], [2], split=Split(holdout=0.999), jobs=1)
    assert t.parts == {"astropy__astropy-1": "dev", "astropy__astropy-2": "held-out", "regressions:bare": "dev"}


def _ceiling_run(label: RunLabel, rounds: int) -> TuneRun:
    return TuneRun("demo", label.name, label.name, label.name, label.name, rounds, label,
                   [list(range(1, rounds + 1))], [])


def test_oracle_progress_clears_progress_inside_loops_only() -> None:
    prog = [[("read", True), ("read", True), ("write", True), ("read", True)], [("read", True)]]
    numbers = [[1, 2, 3, 4], [5]]
    assert oracle_progress(prog, numbers, [(2, 3)], writes_count=False) == [
        [("read", True), ("read", False), ("write", False), ("read", True)], [("read", True)]]
    assert oracle_progress(prog, numbers, [(2, 3), (5, 5)], writes_count=True) == [
        [("read", True), ("read", False), ("read", False), ("read", True)], [("read", False)]]


def test_loop_ceiling_is_what_patience_can_reach_with_perfect_novelty() -> None:
    # Rounds 1-3 progress; loop 4-6 of reads: patience 3 stops at 6 (caught), patience 4 at 7 (slack 1: caught),
    # patience 5 never. A loop of write rounds is out of reach unless writes count.
    reads = _ceiling_run(RunLabel("reads", loops=((4, 6),)), 8)
    writes = _ceiling_run(RunLabel("writes", loops=((2, 4),)), 6)
    unlabelled = _ceiling_run(RunLabel("plain", should_not_stop_before=3), 3)
    prog = [[[("read", True)] * 3 + [("read", True)] * 3 + [("read", False)] * 2],
            [[("read", True)] + [("write", True)] * 3 + [("read", True)] * 2],
            [[("read", False)] * 3]]
    rows = loop_ceiling([reads, writes, unlabelled], prog, [3, 4, 5], slack=1)
    got = {(r["ceiling"], r["patience"]): (r["caught"], r["loops"]) for r in rows}
    assert {r["corpus"] for r in rows} == {"demo"}
    assert got[("record", 3)] == (1, 2) and got[("record", 4)] == (1, 2) and got[("record", 5)] == (0, 2)
    assert got[("writes count", 3)] == (2, 2) and got[("writes count", 4)] == (1, 2)


def test_pareto_front_of_a_hand_made_example() -> None:
    pts = [(0.5, 0.0),   # 0: front
           (0.8, 0.1),   # 1: front
           (0.8, 0.2),   # 2: dominated by 1 (same recall, more premature)
           (0.4, 0.0),   # 3: dominated by 0
           (1.0, 0.5),   # 4: front
           (0.5, 0.0),   # 5: equal to 0: on the front with it
           (0.9, 0.5),   # 6: dominated by 4
           (0.7, 0.1)]   # 7: dominated by 1
    assert pareto_front(pts) == [0, 5, 1, 4]
    assert pareto_front([(0.3, 0.3)]) == [0]
    assert pareto_front([(0.2, 0.0), (0.2, 0.0)]) == [0, 1]


def _hand_run(corpus: str, name: str, label: RunLabel) -> TuneRun:
    return TuneRun(corpus, name, name, name, name, 20, label, [list(range(1, 21))], [], name)


def _hand_scores(stops_by_setting: list[tuple[Setting, dict[str, int]]]) -> Scores:
    runs = [_hand_run("tau-bench", f"u{i}", RunLabel(f"u{i}", should_not_stop_before=10)) for i in range(10)]
    runs += [_hand_run("tau-bench", "l1", RunLabel("l1", loops=((5, 8),)))]
    runs += [_hand_run("other", f"o{i}", RunLabel(f"o{i}", should_not_stop_before=20)) for i in range(10)]
    runs += [_hand_run("other", "ol1", RunLabel("ol1", loops=((5, 6),))),
             _hand_run("other", "ol2", RunLabel("ol2", loops=((12, 14),)))]
    stops = np.array([[s.get(r.name, -1) for r in runs] for _, s in stops_by_setting])
    return Scores([s for s, _ in stops_by_setting], runs, stops, slack=1)


A = dataclasses.replace(noveltyconfigs.SHIPPED, min_new_shingles=1)


def test_recommendation_rule() -> None:
    everything = {"l1": 6, "ol1": 6, "ol2": 13}
    table = [
        (Setting(noveltyconfigs.SHIPPED, 4), {"l1": 6}),                           # 0 shipped: other recall 0/2
        (Setting(A, 3), {"u1": 3, **everything}),                                 # 1 one premature on tau-bench
        (Setting(A, 5), {"o0": 10, "o1": 10, **everything}),                      # 2 20% premature on other
        (Setting(A, 6), {"o0": 10, "l1": 7, "ol1": 7}),                           # 3 10%, min recall 1/2
        (Setting(A, 14), {"o0": 10, "l1": 7, "ol1": 7}),                          # 4 the same, farther away
        (Setting(noveltyconfigs.SHIPPED, 5), {}),                                  # 5 no stop at all
    ]
    scores = _hand_scores(table)
    everyone = np.ones(len(scores.runs), dtype=bool)
    best, ok, why = Rule(0.10, ("tau-bench",)).choose(scores, everyone)
    assert (best, ok) == (3, True) and "minimum loop recall 50%" in why and "4 of 6 settings" in why
    # were tau-bench not strict, setting 1 (10% premature there) would catch every loop
    assert Rule(0.10, ()).choose(scores, everyone)[0] == 1
    # a looser share admits setting 2 (every loop caught)
    assert Rule(0.20, ("tau-bench",)).choose(scores, everyone)[0] == 2
    # nothing feasible: the least violation wins, and the reason says so
    infeasible = _hand_scores([table[1], table[2]])
    best, ok, why = Rule(0.10, ("tau-bench",)).choose(infeasible, everyone)
    assert (best, ok) == (0, False) and why.startswith("no setting meets")
    # equal scores lean to the shipped setting, wherever it stands in the grid
    p0 = SPECS["chat.research_no_progress_rounds"].default
    tied = _hand_scores([(Setting(A, p0), {"l1": 6}), (Setting(noveltyconfigs.SHIPPED, p0 + 2), {"l1": 6}),
                         (Setting(noveltyconfigs.SHIPPED, p0), {"l1": 6})])
    assert Rule().choose(tied, everyone)[0] == 2
    # equal recall (none caught: no stop lands inside a loop): fewer premature stops first (issue 44 item 7:
    # a stop that cuts a useful run short outranks loop rounds saved), then the setting that spends the fewest
    # loop rounds, then the shipped setting (never stopped: 4 + 2 + 3 rounds; ol2 stopped before it starts:
    # 4 + 2; l1 too: 2, at the price of a premature stop of o0)
    short = _hand_scores([(Setting(noveltyconfigs.SHIPPED, 4), {}), (Setting(A, 7), {"ol2": 11}),
                          (Setting(A, 8), {"ol2": 11, "l1": 4, "o0": 10})])
    best, _, why = Rule(0.10, ()).choose(short, everyone)
    assert best == 1 and "then fewer premature stops (0 here), then fewer rounds spent inside loops" in why
    assert Rule(0.10, ()).describe().endswith("ties: higher pooled recall, fewer premature stops, fewer rounds "
                                                "spent inside labelled loops, nearer the shipped setting")


def test_a_choice_that_rests_on_little_is_warned_of() -> None:
    # every setting catches nothing: the tie-breaks decide, and the warning says which
    short = _hand_scores([(Setting(noveltyconfigs.SHIPPED, 4), {}), (Setting(A, 7), {"ol2": 11}),
                          (Setting(A, 8), {"ol2": 11, "l1": 4, "o0": 10})])
    everyone = np.ones(len(short.runs), dtype=bool)
    rule = Rule(0.10, ())
    best = rule.choose(short, everyone)[0]
    warned = rule.warnings(short, everyone, best)
    assert warned == ["no setting within the limits catches any of the 3 labelled loops here: loop recall decides "
                      "nothing, and the choice rests on the tie-breaks (fewer rounds spent inside loops, 6 against 9 "
                      "decided)"]
    # the shipped setting chosen on a tie that never stops a run: said so too
    never = _hand_scores([(Setting(noveltyconfigs.SHIPPED, SPECS["chat.research_no_progress_rounds"].default), {}),
                          (Setting(A, 7), {})])
    best = rule.choose(never, everyone)[0]
    warned = rule.warnings(never, everyone, best)
    assert warned[0].endswith("(nearness to the shipped setting decided)")
    assert warned[1].startswith("the recommended setting (patience ") and "never stops any of the 23 run(s)" in warned[1]
    # recall ties that a tie-break settles: the choice rests on ties
    tied = _hand_scores([(Setting(A, 6), {"o0": 10, "l1": 7, "ol1": 7}), (Setting(A, 5), {"l1": 7, "ol1": 7})])
    best = rule.choose(tied, everyone)[0]
    assert best == 1 and rule.warnings(tied, everyone, best) == [
        "the choice rests on ties: 2 of the 2 settings within the limits share its loop recall (minimum 50%, pooled "
        "67%), and the tie-breaks picked it (fewer premature stops, 0 against 1 decided)"]
    # a corpus with fewer than 5 runs in the part chosen on
    few = everyone.copy()
    few[[i for i, r in enumerate(tied.runs) if r.corpus == "tau-bench"][4:]] = False
    assert ("corpus tau-bench contributes 4 run(s) to the runs the choice was made on (fewer than 5): its figures, "
            "and any limit they meet, rest on too few runs") in rule.warnings(tied, few, rule.choose(tied, few)[0])


def test_local_processes_and_inline_agree(corpus) -> None:
    runs = _runs(corpus)
    configs = noveltyconfigs.expand({"min_new_shingles": [1, 3], "normalization": ["none", "default"]})
    one = tune(runs, configs, range(2, 8), jobs=1, cache=ProgressCache(None))
    clear_memory_cache()
    two = tune(runs, configs, range(2, 8), jobs=2, cache=ProgressCache(None))
    assert two.stats.computed == len(configs) * 3 and two.stats.where == "2 local processes"
    assert np.array_equal(one.scores.stops, two.scores.stops) and one.best == two.best and one.cv == two.cv


def _tune_json(argv: list[str], capsys) -> dict:
    assert main(["tune", *argv, "--json"]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    data.pop("command")
    return data


def test_dask_cluster_gives_the_local_results(corpus, tmp_path: Path, monkeypatch, capsys) -> None:
    distributed = pytest.importorskip("distributed")
    d, labels = corpus
    args = ["--corpus", str(d), "--labels", str(labels), "--patience", "2-8", "--grid", "min_new_shingles=1,3",
            "--no-disk-cache"]
    local = _tune_json(args + ["--jobs", "1", "--out", str(tmp_path / "local")], capsys)
    clear_memory_cache()
    calls: list = []
    real = sweep_mod.family_progress   # every (reply, config) the sweep judges goes through it
    monkeypatch.setattr(sweep_mod, "family_progress", lambda log, cfgs: calls.extend(cfgs) or real(log, cfgs))
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        remote = _tune_json(args + ["--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "dask")], capsys)
    assert calls, "the Dask run computed novelty itself"
    assert remote == local
    assert (tmp_path / "dask" / "settings.csv").read_text() == (tmp_path / "local" / "settings.csv").read_text()


def test_cli_writes_every_output(corpus, tmp_path: Path, capsys) -> None:
    d, labels = corpus
    out = tmp_path / "out"
    argv = ["tune", "--corpus", str(d), "--labels", str(labels), "--patience", "2-6", "--jobs", "1",
            "--holdout", "0.4", "--folds", "2", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "recommended" in printed and "demo" in printed
    names = {p.name for p in out.iterdir()}
    assert names == {"summary.md", "front.md", "front.png", "split.md", "ceiling.md", "settings.csv",
                     "recommendation.json", "command.txt"}
    assert (out / "command.txt").read_text() == "imprint " + " ".join(argv) + "\n"
    assert (out / "front.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = json.loads((out / "recommendation.json").read_text())
    assert rec["setting"]["patience"] in range(2, 7) and rec["rule"]["strict"] == ["tau-bench"]
    assert {row["corpus"] for row in rec["figures"]} == {"demo", "overall"}
    assert "## demo, dev" in (out / "front.md").read_text() and "| demo | held-out |" in (out / "split.md").read_text()
    rows = (out / "settings.csv").read_text().splitlines()
    grid, _ = noveltyconfigs.default_grid()
    # every setting of the grid, and the shipped one (its patience is outside 2-6)
    shipped_outside = SPECS["chat.research_no_progress_rounds"].default not in range(2, 7)
    assert len(rows) == 1 + len(noveltyconfigs.expand(grid)) * 5 + shipped_outside
    assert rows[0].startswith("patience,") and {"normalization", "min_new_shingles"} <= set(rows[0].split(","))


def test_a_new_novelty_field_is_a_knob_without_code_changes(monkeypatch) -> None:
    @dataclasses.dataclass(frozen=NoveltyConfig.__dataclass_params__.frozen)
    class Extended(NoveltyConfig):
        line_fingerprints: bool = False
        near_copy: float = dataclasses.field(default=0.9, metadata={"grid": (0.8, 0.95)})
        profile: str = "plain"

    monkeypatch.setattr(noveltyconfigs, "NoveltyConfig", Extended)
    monkeypatch.setattr(noveltyconfigs, "SHIPPED", Extended())
    noveltyconfigs._fields.cache_clear()
    try:
        grid, held = noveltyconfigs.default_grid()
        assert grid["line_fingerprints"] == [False, True] and grid["near_copy"] == [0.9, 0.8, 0.95]
        assert "profile" in held and "shingle_capacity" in held
        assert noveltyconfigs.parse_assignment("profile=plain,strict") == ("profile", ["plain", "strict"])
        configs = noveltyconfigs.expand({"line_fingerprints": [False, True], "min_new_shingles": [1, 3]})
        assert [(c.line_fingerprints, c.min_new_shingles) for c in configs] == \
            [(False, 1), (False, 3), (True, 1), (True, 3)]
        assert len({noveltyconfigs.config_key(c) for c in configs}) == 4
    finally:
        noveltyconfigs._fields.cache_clear()


# ---- raw trajectories, read on the fly ---------------------------------------------------------------------
def chat_run(path: Path, results: list[str], gz: bool = False) -> Path:
    """An openai-chat trajectory: one search call and its result a round."""
    import gzip
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    for i, text in enumerate(results):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    msgs.append({"role": "assistant", "content": "done"})
    data = json.dumps({"messages": msgs}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture()
def raw(tmp_path: Path) -> tuple[Path, Path]:
    d = tmp_path / "raw"
    chat_run(d / "useful.json", [c[0]["result"] for c in LULL])
    chat_run(d / "looping.json.gz", [c[0]["result"] for c in LOOP], gz=True)
    labels = tmp_path / "labels-raw.yaml"
    labels.write_text("runs:\n  useful: {should_not_stop_before: 7}\n  looping: {loops: [3, 10]}\n")
    return d, labels


def test_replay_tune_and_check_read_raw_trajectories(raw, tmp_path: Path, capsys) -> None:
    d, labels = raw
    before = sorted(p.name for p in d.iterdir())
    imported = tmp_path / "imported"
    assert main(["import", str(d), "--out", str(imported)]) == 0
    capsys.readouterr()
    # replay: the same stops as the imported round logs, named by the raw file
    assert main(["replay", "--json", "--patience", "3", str(d)]) == 0
    from_raw = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["replay", "--json", "--patience", "3", str(imported)]) == 0
    from_logs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["kind"] for r in from_raw] == ["raw", "raw"] and from_raw[0]["file"].endswith("looping.json.gz")
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("file", "kind")} for r in rows]  # noqa: E731
    assert strip(from_raw) == strip(from_logs) and from_raw[1]["stop_round"] == 4
    # tune: the same figures
    args = ["--patience", "2-6", "--grid", "min_new_shingles=1,3", "--jobs", "1", "--no-disk-cache"]
    a = _tune_json(["--corpus", str(d), "--labels", str(labels), "--out", str(tmp_path / "a"), *args], capsys)
    b = _tune_json(["--corpus", str(imported), "--labels", str(labels), "--out", str(tmp_path / "b"), *args], capsys)
    assert a == b and a["runs"] == 2
    # check: the same verdict on condition 1
    cfg = tmp_path / "gate.toml"
    cfg.write_text("[premature_stops]\npatience = 3\n")
    results = []
    for where in (d, imported):
        main(["check", str(where), "--config", str(cfg), "--labels", str(labels), "--json"])
        results.append(json.loads(capsys.readouterr().out)["conditions"][0])
    assert results[0]["rows"] == results[1]["rows"] and results[0]["passed"] is False
    assert "raw/useful: replayed no_progress stop at round 4" in results[0]["details"][0]
    rows = {r["subject"]: r for r in results[0]["rows"]}
    assert rows["raw: premature stops"]["figure"] == "1 of 1 useful runs (100.0%; 95% interval 20.7%–100.0%)"
    assert rows["raw: loop recall"]["figure"] == "1 of 1 loops caught (100.0%; 95% interval 20.7%–100.0%)"
    assert sorted(p.name for p in d.iterdir()) == before, "nothing is written beside the raw files"


def test_bad_raw_files_and_arguments_exit_2(raw, corpus, tmp_path: Path, capsys) -> None:
    d, labels = raw
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes((d / "looping.json.gz").read_bytes()[:60])
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"hello": 1}))
    broken = tmp_path / "broken" / "run.json"
    broken.parent.mkdir()
    broken.write_text('{"messages": [\n  {"role": "user", "content": "q"},\n  {"role": ]}\n')
    cfg = tmp_path / "gate.toml"
    cfg.write_text("[premature_stops]\npatience = 3\n")
    cd, cl = corpus
    cases = [
        (["replay", str(cut)], [str(cut), "truncated gzip"]),
        (["replay", str(unknown)], [f"{unknown}:1: format", "a JSON object with keys hello"]),
        (["check", str(broken.parent), "--config", str(cfg), "--labels", str(labels)], [f"{broken}:3", "not valid JSON"]),
        (["tune", "--corpus", str(broken.parent), "--labels", str(labels)], [f"{broken}:3"]),
        (["tune", "--grid", "nope=1"], ["--grid", "no field 'nope'"]),
        (["tune", "--grid", "containment_threshold=0.5,2"], ["--grid", "containment_threshold"]),
        (["tune", "--grid", "min_new_shingles=three"], ["--grid", "not an integer"]),
        (["tune", "--corpus", str(cd)], ["--corpus", "has no --labels after it"]),
        (["tune", "--labels", str(cl)], ["--labels", "has no --corpus before it"]),
        (["tune", "--corpus", str(cd), "--labels", str(cl), "--holdout", "1.5"], ["--holdout"]),
        (["tune", "--corpus", str(cd), "--labels", str(cl), "--patience", "1-3"], ["--patience"]),
        (["tune", "--corpus", str(cd), "--labels", str(cl), "--corpus", str(cd), "--labels", str(cl)],
         ["two corpora are both named 'demo'"]),
        (["replay", "--novelty", "min_new_shingles=1,2", str(cd)], ["--novelty", "FIELD=VALUE"]),
    ]
    for argv, needles in cases:
        code = main(argv + (["--out", str(tmp_path / "never")] if argv[0] == "tune" else []))
        err = capsys.readouterr().err
        assert code == 2, (argv, err)
        assert "Traceback" not in err
        for n in needles:
            assert n in err, (argv, n, err)
    assert not (tmp_path / "never").exists()


@pytest.mark.skipif(not TAU.is_dir(), reason="the tau-bench round logs are not beside the repository")
def test_tune_and_the_gate_agree_on_the_shipped_setting(tmp_path: Path, capsys) -> None:
    runs, _ = load_corpora([Corpus([str(TAU)], str(TAU_LABELS))])
    p0 = SPECS["chat.research_no_progress_rounds"].default
    t = tune(runs, [NoveltyConfig()], [p0], jobs=1, cache=ProgressCache(None))
    f = t.figures(t.shipped, None)
    assert (f.useful, f.loops) == (80, 10)
    cfg = tmp_path / "gate.toml"
    # the tuner's default sweep is the record's rule (patience x novelty), the half of the shipped rule it tunes
    cfg.write_text(f'[premature_stops]\npatience = {p0}\nrule = "record"\nstrict = ["tau-bench"]\n')
    main(["check", str(TAU), "--config", str(cfg), "--labels", str(TAU_LABELS), "--json"])
    rows = {r["subject"]: r for r in json.loads(capsys.readouterr().out)["conditions"][0]["rows"]}
    assert rows["tau-bench: premature stops"]["figure"].startswith(f"{f.premature} of 80 ")
    assert rows["tau-bench: loop recall"]["figure"].startswith(f"{f.caught} of {f.loops} ")


def test_scores_of_long_runs_and_many_loops_are_exact_in_their_narrow_types() -> None:
    # The settings × runs matrices take the narrowest integer type their values fit: a run of 40,000
    # rounds, 200 one-round loops and a stop past int16 must still count every round and catch exactly.
    loops = tuple((i, 400) for i in range(1, 201))               # 200 loops: caught past int8, rounds past int16
    many = TuneRun("demo", "many", "many", "many", "many", 400, RunLabel("many", loops=loops), [[]], [], "m")
    long = TuneRun("demo", "long", "long", "long", "long", 40_000, RunLabel("long", loops=((1, 40_000),),
                   should_not_stop_before=39_999), [[]], [], "l")
    settings = [Setting(NoveltyConfig(), 2), Setting(NoveltyConfig(), 3)]
    scores = Scores(settings, [many, long], np.array([[400, 39_000], [-1, 40_000]]), slack=0)
    assert scores.caught[:, 0].tolist() == [200, 0]              # the stop at 400: every loop is caught
    assert scores.loop_rounds[:, 0].tolist() == [60_100, 60_100]  # 400 + 399 + ... + 201 rounds inside them
    alone = Scores(settings, [many], np.array([[400], [-1]]), slack=0)   # its 400 rounds alone fit int16
    assert alone.loop_rounds[:, 0].tolist() == [60_100, 60_100] and alone.caught[:, 0].tolist() == [200, 0]
    assert scores.loop_rounds[:, 1].tolist() == [39_000, 40_000]
    assert scores.premature[:, 1].tolist() == [1, 0]
    assert scores.stops.tolist() == [[400, 39_000], [-1, 40_000]]
    assert scores.sums(np.array([True, True]))["loop_rounds"].tolist() == [99_100, 100_100]
