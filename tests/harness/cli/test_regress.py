"""`imprint regress add|list`: regression runs stored with their label, and
the gate and the tuner that judge them."""
from __future__ import annotations

import json
import re
import subprocess
from argparse import Namespace
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from harness.cli import main
from harness.realruns.labels import LABELS_FORMAT, Verdict, parse_labels
from harness.realruns.regressionstore import HEADER, Regression, loop_spec, parse_loop, read_labels_file, with_entry
from harness.realruns.roundlogs import read_round_log
from imprint_core.errors import UserInputError

from helpers import CONFIG, chat_run, regress, repo, stalled  # noqa: F401  (repo: the fixture, by name)
from reportdata import fact, handmade_trace, round_log

ROOT = Path(__file__).resolve().parents[3]


def listed(capsys) -> dict:
    capsys.readouterr()
    assert regress("list", "--json") == 0
    return {r["name"]: r for r in json.loads(capsys.readouterr().out)["regressions"]}


# ---- runs of each kind ----------------------------------------------------------------------------------------
def make_run(kind: str, repo: Path) -> tuple[Path, int, int | None]:
    """(file, its rounds, the stop of the gate's rule or None)."""
    if kind == "trace":
        return handmade_trace(repo / "in" / "trace.jsonl", provider="stub", provider_kind="stub",
                              ratios=[1.0] * 6, scenario="six-rounds"), 6, None
    if kind == "roundlog":
        return round_log(repo / "in" / "log.jsonl", [[{"result": fact(1)}]] * 6), 6, 5
    return stalled(repo), 8, 5


@pytest.mark.parametrize("kind", ["trace", "roundlog", "raw"])
def test_add_stores_a_round_log_and_appends_its_label(repo: Path, kind: str, capsys) -> None:
    path, rounds, stop = make_run(kind, repo)
    assert regress("add", str(path), "--useful-until", str(rounds), "--note", "useful to the end",
                   "--name", f"from-{kind}") == 0
    out = capsys.readouterr().out
    stored = repo / "traces" / "regressions" / f"from-{kind}.jsonl"
    assert f"stored {stored.relative_to(repo)}" in out
    log = read_round_log(stored)
    assert len(log.rounds) == rounds
    labels = parse_labels((repo / "regressions.yaml").read_text(), "regressions.yaml")
    lab = labels.runs[f"regressions/from-{kind}"]
    holds = stop is None or stop >= rounds
    assert (lab.should_not_stop_before, lab.note, lab.source, lab.added) == (rounds, "useful to the end", str(path),
                                                                             "2026-01-31")
    assert lab.when_added == Verdict(stop, holds, "patience 4, normalization=default, user turns reset")
    row = listed(capsys)[f"from-{kind}"]
    assert row["now"]["stop_round"] == stop and row["now"]["holds"] is holds and row["now"]["premature"] is not holds
    assert row["when_added"]["holds"] is holds and row["changed"] is False and row["missing"] is False
    assert not list(repo.rglob("*.tmp"))


def test_add_a_loop_and_a_run_of_a_file_of_many(repo: Path, capsys) -> None:
    rounds = [[{"result": fact(1)}], [{"result": fact(2)}]] + [[{"result": fact(1)}], [{"result": fact(2)}]] * 3
    log = round_log(repo / "in" / "abab.jsonl", rounds)
    assert regress("add", str(log), "--loop", "3-8:2") == 0          # the default name is the file stem
    tau = repo / "in" / "results.json"
    traj = [{"role": "user", "content": "hi"}] + [
        m for i in range(3) for m in ({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"t{i}", "type": "function", "function": {"name": "get", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"t{i}", "content": fact(i)})]
    tau.write_text(json.dumps([{"task_id": t, "trial": 0, "reward": 1.0, "info": {}, "traj": traj} for t in (4, 7)]))
    assert regress("add", str(tau), "--useful-until", "3") == 2
    assert "holds 2 runs; name one as FILE#RUN" in capsys.readouterr().err
    assert regress("add", f"{tau}#7-0", "--useful-until", "3") == 0
    rows = listed(capsys)
    # patience 4: round 3 to 6 bring nothing new, the stop at round 6 lands in the loop
    assert rows["abab"]["label"]["loops"] == [{"start": 3, "end": 8, "period": 2}]
    assert rows["abab"]["now"]["stop_round"] == 6 and rows["abab"]["now"]["loops_caught"] == 1
    assert rows["7-0"]["now"]["holds"] and (repo / "traces" / "regressions" / "7-0.jsonl").is_file()


# ---- bad inputs: a clear error, nothing written, the labels file intact --------------------------------------------
def _state(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case, args, where", [
    ("round past the end", ["--useful-until", "9"], "raw/stalled.json: --useful-until: round 9 is not a round of "
                                                    "the run, which has 8"),
    ("round zero", ["--useful-until", "0"], "--useful-until: round 0 is not a round"),
    ("loop past the end", ["--loop", "3-12"], "raw/stalled.json: --loop: loop 3-12 ends after the run's last round, 8"),
    ("period too long", ["--loop", "3-6:3"], "--loop: '3-6:3': with period 3, round 3 would repeat round 0"),
    ("not a loop", ["--loop", "3..6"], "--loop: '3..6' is not a loop"),
    ("duplicate run", ["--useful-until", "8", "--name", "again"], "traces/regressions/stalled.jsonl: this run is "
                                                                   "already stored as the regression 'stalled'"),
    # issue 44 item 11: the same run again was told to take another --name, which then failed as a duplicate run
    ("the same run again", ["--useful-until", "8"], "traces/regressions/stalled.jsonl: this run is already stored as "
                                                    "the regression 'stalled' (expected a run not stored yet"),
    ("duplicate name", ["--useful-until", "8", "--name", "stalled"], "a regression named 'stalled' is already stored"),
    ("bad name", ["--useful-until", "8", "--name", "../x"], "--name: '../x' cannot name a regression"),
    ("name of another corpus", ["--useful-until", "8", "--name", "lull"], "--name: 'lull' in labels.yaml:2 would take"),
])
def test_a_bad_add_says_why_and_writes_nothing(repo: Path, case: str, args: list[str], where: str, capsys) -> None:
    raw = stalled(repo)
    assert regress("add", str(raw), "--useful-until", "8") == 0
    if case in ("duplicate run", "duplicate name", "name of another corpus"):   # the same run, from another file;
        # another run
        raw = chat_run(repo / "raw" / "copy.json", [fact(1)] * 7 + [fact(2)] if case == "duplicate run" else
                       [fact(3)] * 8)
    before = _state(repo)
    capsys.readouterr()
    assert regress("add", str(raw), *args) == 2, case
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert where in err, err
    assert ("--name" in err) == (case in ("duplicate name", "bad name", "name of another corpus")), err
    assert _state(repo) == before


@pytest.mark.parametrize("text, where", [
    ("runs:\n  x: {loops: [5, 2]}\n", "regressions.yaml:2: runs.x.loops: loop [5, 2] ends before it starts"),
    ("runs:\n  x:\n    should_not_stop_before: 3\n    when_added: {stop_round: 2}\n",
     "regressions.yaml:4: runs.x.when_added.holds: required key is missing"),
    ("runs:\n  x: {should_not_stop_before: 3, added: 31.1.2026}\n", "regressions.yaml:2: runs.x.added: '31.1.2026' is "
                                                                    "not a date"),
    ("runs: [\n", "regressions.yaml:2: not valid YAML"),
    # valid, but not a layout an entry can be appended to
    ("runs: {x: {should_not_stop_before: 3}}\nformat: imprint-labels/1\n",
     "regressions.yaml: runs: cannot append a label"),
])
def test_a_malformed_labels_file_is_named_and_left_as_it_was(repo: Path, text: str, where: str, capsys) -> None:
    (repo / "regressions.yaml").write_text(text)
    raw = stalled(repo)
    before = _state(repo)
    assert regress("add", str(raw), "--useful-until", "8") == 2
    err = capsys.readouterr().err
    assert where in err and "Traceback" not in err, err
    assert _state(repo) == before and not (repo / "traces" / "regressions").exists()


# ---- the gate and the tuner ----------------------------------------------------------------------------------------
def check(*args: str) -> int:
    return main(["check", "--config", "gate.toml", *args])


def test_a_failing_regression_fails_the_gate_and_is_named(repo: Path, capsys) -> None:
    assert check() == 0                                   # the small corpus passes, no regressions yet
    fine = round_log(repo / "in" / "fine.jsonl", [[{"result": fact(n)}] for n in range(1, 7)])
    assert regress("add", str(fine), "--useful-until", "6") == 0
    assert check() == 0
    assert regress("add", str(stalled(repo)), "--useful-until", "8") == 0
    capsys.readouterr()
    assert check() == 1
    out = capsys.readouterr().out
    assert "regressions/stalled FAILS: replayed no_progress stop at round 5, labelled useful until round 8" in out
    main(["check", "--config", "gate.toml", "--json"])
    c1 = json.loads(capsys.readouterr().out)["conditions"][0]
    row = {r["subject"]: r for r in c1["rows"]}["regressions: runs that hold"]
    assert row["figure"] == "1 of 2 labelled runs" and row["passed"] is False and not c1["passed"]
    # a regression whose round log went missing fails the gate on its own inputs; named paths only note it
    (repo / "traces" / "regressions" / "stalled.jsonl").unlink()
    capsys.readouterr()
    assert check() == 1
    assert "regressions/stalled FAILS: labelled in regressions.yaml:" in capsys.readouterr().out
    assert listed(capsys)["stalled"]["missing"] is True
    assert check("traces") == 0
    assert "regressions/stalled: not among the inputs; not judged" in capsys.readouterr().out


def test_a_missed_loop_fails_the_gate(repo: Path, capsys) -> None:
    # recall of a share would let 1 missed loop of 5 pass (min_loop_recall 0.8); a regression may not miss one
    for i in range(4):
        log = round_log(repo / "in" / f"loop{i}.jsonl", [[{"result": fact(10 * i + 1)}]] + [[{"result": fact(10 * i)}]] * 6)
        assert regress("add", str(log), "--loop", "3-7") == 0
    late = round_log(repo / "in" / "late.jsonl", [[{"result": fact(n)}] for n in range(50, 56)] + [[{"result": fact(50)}]] * 2)
    assert regress("add", str(late), "--loop", "7-8:6") == 0        # never stopped: missed
    capsys.readouterr()
    assert check() == 1
    assert "regressions/late FAILS: loop(s) 7-8 not caught (replayed stop: none)" in capsys.readouterr().out


def test_list_highlights_a_changed_verdict(repo: Path, capsys) -> None:
    assert regress("add", str(stalled(repo)), "--useful-until", "8", "--note", "stops at 5") == 0
    assert listed(capsys)["stalled"]["changed"] is False
    (repo / "gate.toml").write_text(CONFIG.replace("patience = 4", "patience = 8"))   # a rule that lets it run
    row = listed(capsys)["stalled"]
    assert row["now"] == {"stop_round": None, "premature": False, "loops": 0, "loops_caught": 0, "holds": True,
                          "problems": [], "rule": "patience 8, normalization=default, user turns reset"}
    assert row["when_added"] == {"stop_round": 5, "holds": False,
                                 "rule": "patience 4, normalization=default, user turns reset"}
    assert row["changed"] is True
    assert regress("list") == 0
    out = capsys.readouterr().out
    assert "CHANGED" in out and "verdict changed since added: stalled" in out and "2026-01-31: stop 5, FAILS" in out


def test_tune_takes_the_regressions_as_a_corpus_always_tuned_on(repo: Path, monkeypatch, capsys) -> None:
    from harness.analysis.sweep.progress import load_corpora
    from harness.analysis.tune.search import Split, tune
    from harness.cli import corpora as tune_cli
    from harness.realruns.noveltyconfigs import SHIPPED
    labels = repo / "scenarios" / "labels" / "regressions.yaml"
    labels.parent.mkdir(parents=True)
    labels.write_text(HEADER)
    with pytest.raises(UserInputError, match="none of the default corpora"):   # an empty regressions file is none
        tune_cli.corpora_from(Namespace())
    assert main(["regress", "add", str(stalled(repo)), "--useful-until", "8", "--labels", str(labels),
                 "--store", str(repo / "traces" / "regressions"), "--config", "gate.toml"]) == 0
    corpora, notes = tune_cli.corpora_from(Namespace())
    assert [(c.name, c.always_dev) for c in corpora] == [("regressions", True)]
    runs, _ = load_corpora(corpora)
    assert [(r.task, r.always_dev) for r in runs] == [("regressions:regressions/stalled", True)]
    t = tune(runs, [SHIPPED], [4, 8], split=Split(holdout=0.999), jobs=1)
    assert t.parts == {"regressions:regressions/stalled": "dev"}     # never held out, however large the share
    # the recommendation fixes it: patience 4 stops it early, 8 (or the shipped 9, nearer the shipped setting) not
    assert t.scores.settings[t.best].patience in (8, 9) and t.feasible and t.figures(t.best, None).premature == 0
    from harness.cli.tune import DEFAULT_STRICT
    assert "regressions" in DEFAULT_STRICT


def test_tune_in_a_second_clone_sees_the_regression_stored_there(repo: Path, capsys) -> None:
    """A checkout other than the one the package is installed from (the cwd
    here): `regress add` stores into it, so tune's default corpora and its
    output folder must be its own too, not the installed checkout's."""
    labels = repo / "scenarios" / "labels" / "regressions.yaml"
    labels.parent.mkdir(parents=True)
    labels.write_text(HEADER)
    assert main(["regress", "add", str(stalled(repo)), "--useful-until", "8", "--config", "gate.toml"]) == 0
    capsys.readouterr()
    assert main(["tune", "--patience", "4,8", "--jobs", "1", "--no-disk-cache", "--json"]) == 0
    captured = capsys.readouterr()
    rec = json.loads(captured.out)
    assert rec["runs"] == 1 and {r["corpus"] for r in rec["figures"]} == {"regressions", "overall"}
    assert rec["setting"]["patience"] in (8, 9)          # the clone's regression decides: 4 stops it early
    beside = (repo / "../shared/data/roundlogs/tau-bench-airline").resolve()     # looked beside the clone
    assert f"default corpus {beside} not found; skipped" in captured.err
    from harness.cli.tune import DEFAULT_OUT
    assert (repo / DEFAULT_OUT / "recommendation.json").exists()


def test_faults_writes_its_report_into_the_current_folder(repo: Path, capsys) -> None:
    from harness.conventions import REPO_ROOT
    before = sorted((REPO_ROOT / "traces").rglob("*"))
    assert main(["faults", "--providers", "stub"]) == 0
    assert "32 of 32 cells hold" in capsys.readouterr().out
    assert (repo / "reports" / "faults.md").read_text().startswith("# Fault matrix")
    assert sorted((REPO_ROOT / "traces").rglob("*")) == before    # no scratch trace left in the installed checkout


def test_a_second_clone_replays_and_records_its_own_cassettes(repo: Path) -> None:
    from harness.scenarios import parse_scenario
    from harness.scenarios.providers import cassette_path
    text = ("name: r\nquestion: q\nprovider: {kind: remote, server: llamacpp}\n"
            "tools: [{name: search, default: {text: t}}]\n")
    clone = repo / "clone"
    (clone / "scenarios").mkdir(parents=True)
    (clone / "scenarios" / "50-r.yaml").write_text(text)
    scn = parse_scenario(text, str(clone / "scenarios" / "50-r.yaml"))
    assert cassette_path(scn) == clone.resolve() / "traces" / "cassettes" / "llamacpp" / "50-r.yaml"
    pinned = parse_scenario(text.replace("server: llamacpp}", "server: llamacpp, cassette: traces/c.yaml}"),
                            str(clone / "scenarios" / "50-r.yaml"))
    assert cassette_path(pinned) == clone.resolve() / "traces" / "c.yaml"
    elsewhere = parse_scenario(text, str(repo / "mine" / "r.yaml"))      # not in a scenarios/ folder: the cwd's
    assert cassette_path(elsewhere) == repo / "traces" / "cassettes" / "llamacpp" / "r.yaml"


# ---- invariants ----------------------------------------------------------------------------------------------------
@given(st.text(max_size=30))
def test_any_loop_spec_parses_or_gets_a_clean_error(spec: str) -> None:
    try:
        a, b, p = parse_loop(spec)
    except UserInputError as exc:
        assert exc.key == "--loop" and "Traceback" not in exc.describe()
        return
    assert 1 <= a <= b and (p is None or 1 <= p < a)
    assert parse_loop(loop_spec(a, b, p)) == (a, b, p)


@given(st.integers(1, 10 ** 6), st.integers(0, 10 ** 6), st.one_of(st.none(), st.integers(1, 10 ** 6)))
def test_every_valid_loop_spec_is_read_as_written(a: int, extra: int, p: int | None) -> None:
    spec = loop_spec(a, a + extra, p)
    if p is not None and p >= a:
        with pytest.raises(UserInputError):
            parse_loop(spec)
    else:
        assert parse_loop(spec) == (a, a + extra, p)
        assert parse_loop(f" {a} - {a + extra}" + (f" : {p} " if p is not None else " ")) == (a, a + extra, p)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_LOOPS = st.lists(st.tuples(st.integers(2, 200), st.integers(0, 50), st.booleans()).map(
    lambda t: (t[0], t[0] + t[1], t[0] - 1 if t[2] else None)), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(1, 500)), _LOOPS, _TEXT, _TEXT,
                          st.dates().map(date.isoformat),
                          st.one_of(st.none(), st.builds(Verdict, st.one_of(st.none(), st.integers(1, 500)),
                                                         st.booleans(), _TEXT))), min_size=1, max_size=4)
       .filter(lambda entries: all(e[0] is not None or e[1] for e in entries)))
def test_the_labels_file_round_trips(entries) -> None:
    text, labels = HEADER, parse_labels(HEADER, "regressions.yaml")
    for i, (useful, loops, note, source, added, when) in enumerate(entries):
        reg = Regression(f"r{i}", useful, loops, note, source, added, when)
        text = with_entry(text, labels, Path("regressions.yaml"), f"regressions/r{i}", reg)
        before = labels
        labels = parse_labels(text, "regressions.yaml")
        assert all(labels.runs[k] == v for k, v in before.runs.items())
        got = labels.runs[f"regressions/r{i}"]
        assert (got.should_not_stop_before, got.note, got.source, got.added, got.when_added) == \
            (useful, note, source, added, when)
        # the same span may come twice, once with a period and once without: order None first
        def order(item: tuple) -> tuple:
            (a, b), p = item
            return a, b, p is not None, p or 0
        assert sorted(zip(got.loops, got.periods), key=order) == sorted((((a, b), p) for a, b, p in loops), key=order)
    assert text.startswith(HEADER.replace("runs: {}\n", "runs:\n")) and f"format: {LABELS_FORMAT}" in text


def test_the_committed_regressions_are_consistent() -> None:
    """Every committed regression has its round log, and every round log its label."""
    _, labels = read_labels_file(ROOT / "scenarios" / "labels" / "regressions.yaml")
    stored = {f"regressions/{p.stem}" for p in (ROOT / "traces" / "regressions").glob("*.jsonl")}
    assert stored == set(labels.runs)


# ---- the main command leaves the tree clean ----------------------------------------------------------------------
def test_make_run_writes_only_ignored_paths() -> None:
    """`make run` writes traces/runs/ and its report folder, both ignored by
    git; the committed reports/latest/ is refreshed by `make snapshot` only."""
    make = (ROOT / "Makefile").read_text()
    recipe = make.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "reports/latest" not in recipe and "--out $(RUN_REPORT)" in recipe
    out = re.search(r"^RUN_REPORT\s*:?=\s*(\S+)", make, re.MULTILINE).group(1)
    assert "reports/latest" in make.split("\nsnapshot:", 1)[1].split("\n\n", 1)[0]
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (f"{out}/index.html", f"{out}/summary.md", "traces/runs/x/y.jsonl"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, f"{path} is not ignored"
