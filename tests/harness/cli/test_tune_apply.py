"""`imprint tune --apply`: the recommended setting written where the shipped
defaults live, in the checkout of the current folder, as a diff."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.shipped import apply, planned_edits
from imprint_core.errors import UserInputError

from reportdata import fact, round_log

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch) -> Path:
    for rel in ("imprint_core/settings.py", "imprint_core/novelty/config.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_apply_rewrites_the_patience_and_novelty_defaults_and_returns_the_diff(checkout):
    diff = apply(7, {"fingerprint_unit": "line", "min_new_shingles": 1, "shingle_capacity": 131072})
    settings = (checkout / "imprint_core/settings.py").read_text()
    rule = (checkout / "imprint_core/novelty/config.py").read_text()
    assert 'SettingSpec("chat.research_no_progress_rounds", int, "rounds", 7, 2, 20,' in settings
    assert '    fingerprint_unit: str = _knob("line", "paragraph: a unit' in rule
    assert '    min_new_shingles: int = _knob(1, "New shingles' in rule
    assert "    shingle_capacity: int = _knob(131_072, " in rule
    assert "-    SettingSpec(\"chat.research_no_progress_rounds\", int, \"rounds\", 9," in diff
    assert "+    fingerprint_unit: str = _knob(\"line\"," in diff and diff.count("\n+++ ") + diff.startswith("+++ ") == 2
    # the edited files still compile, and nothing else in them changed
    compile(settings, "settings.py", "exec")
    compile(rule, "config.py", "exec")
    assert len(settings.splitlines()) == len((ROOT / "imprint_core/settings.py").read_text().splitlines())
    assert apply(7, {"fingerprint_unit": "line", "min_new_shingles": 1, "shingle_capacity": 131072}) == ""
    # already so: no edit, no diff


def test_apply_outside_a_checkout_or_for_an_unknown_field_is_a_clear_error(tmp_path, monkeypatch, checkout):
    with pytest.raises(UserInputError) as info:
        planned_edits(None, {"no_such_field": 3})
    assert info.value.key == "no_such_field"
    monkeypatch.chdir(tmp_path / "imprint_core")
    with pytest.raises(UserInputError) as info:
        planned_edits(5, {})
    assert "root of a checkout" in info.value.message


def test_tune_apply_writes_the_recommendation_into_the_checkout(checkout, capsys):
    logs = checkout / "runs"
    # a useful run with a 3-round lull: patience 2 and 3 stop it early, 4 and up do not; the loop at 4-9 is
    # caught by patience 4 (stop at round 7), so the recommendation is 4, not the shipped 9
    round_log(logs / "lull.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(n)}] for n in (2, 3, 4)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    labels = checkout / "labels-mine.yaml"
    labels.write_text("runs:\n  lull: {should_not_stop_before: 7}\n  loop: {loops: [3, 9]}\n")
    code = main(["tune", "--corpus", str(logs), "--labels", str(labels), "--grid", "min_new_shingles=3",
                 "--patience", "2-9", "--holdout", "0", "--strict", "none", "--max-premature-share", "0",
                 "--no-disk-cache", "--out", str(checkout / "out"), "--apply", "--yes"])
    assert code == 0
    out = capsys.readouterr().out
    assert '"rounds", 4, 2, 20' in (checkout / "imprint_core/settings.py").read_text()
    assert "-    SettingSpec(\"chat.research_no_progress_rounds\", int, \"rounds\", 9" in out and "commit" in out
    assert main(["tune", "--corpus", str(logs), "--labels", str(labels), "--rule", "round-cap", "--grid",
                 "max_rounds=3,20", "--out", str(checkout / "out"), "--apply"]) == 2


# ---- both files or neither, one apply at a time (issue 45, item 9) ----------------------------------
A = (3, {"fingerprint_unit": "line"})      # two recommendations, each measured against the shipped defaults
B = (5, {})


def shipped_state(root: Path) -> tuple[str, str]:
    return ((root / "imprint_core/settings.py").read_text(), (root / "imprint_core/novelty/config.py").read_text())


def state_after(root: Path, *recommendations) -> tuple[str, str]:
    """What applying `recommendations` one after another to a fresh copy of the shipped files gives."""
    twin = root / "twin"
    for rel in ("imprint_core/settings.py", "imprint_core/novelty/config.py"):
        (twin / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, twin / rel)
    for patience, changed in recommendations:
        apply(patience, changed, twin)
    return shipped_state(twin)


def test_a_second_apply_measured_against_defaults_another_changed_is_refused(checkout):
    apply(*A)
    after_a = shipped_state(checkout)
    with pytest.raises(UserInputError) as info:
        apply(*B)     # B measured fingerprint_unit=paragraph; patience 5 with A's line is nobody's setting
    assert info.value.key == "fingerprint_unit" and info.value.file.endswith("config.py")
    assert "'line'" in info.value.message and "'paragraph'" in info.value.message
    assert shipped_state(checkout) == after_a


@contextlib.contextmanager
def unwritable(path: Path):
    """`path` made so that not even root may replace it (immutable), or its folder read-only for others."""
    if os.geteuid() != 0:
        path.parent.chmod(0o555)
        try:
            yield
        finally:
            path.parent.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("root, and the file system cannot mark a file immutable")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_file_that_cannot_be_written_leaves_both_unchanged_and_is_named(checkout, capsys, monkeypatch):
    before = shipped_state(checkout)
    rule = checkout / "imprint_core/novelty/config.py"
    with unwritable(rule):
        with pytest.raises(UserInputError) as info:
            apply(*A)
        assert shipped_state(checkout) == before
    assert Path(info.value.file) in (rule, rule.parent) and "nothing written" in info.value.message
    assert not [p for p in checkout.rglob("*") if p.name.startswith(".")]     # no staging or temporary file left


def test_a_write_that_fails_after_the_first_rename_puts_the_first_file_back(checkout, monkeypatch):
    before = shipped_state(checkout)
    rule = checkout / "imprint_core/novelty/config.py"
    real = os.replace

    def refuse_rule(src, dst, *a, **kw):
        if Path(dst) == rule:
            raise PermissionError(13, "Permission denied", str(src), None, str(dst))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", refuse_rule)
    with pytest.raises(UserInputError) as info:
        apply(*A)
    monkeypatch.undo()
    assert shipped_state(checkout) == before     # settings.py, renamed first, was put back
    assert info.value.file == str(rule) and info.value.key == "--apply"


def test_two_concurrent_applies_leave_one_evaluated_setting(checkout):
    """Two applies started together, ten times: the files end as A applied, or
    as B applied (then A over it, or B alone), never patience of one with the
    novelty fields of the other; a refused one wrote nothing."""
    pristine = shipped_state(checkout)
    outcomes = {state_after(checkout, A), state_after(checkout, B), state_after(checkout, B, A)}
    for _ in range(10):
        for f, text in zip(("imprint_core/settings.py", "imprint_core/novelty/config.py"), pristine):
            (checkout / f).write_text(text)
        start = threading.Barrier(2)
        refused: list[UserInputError] = []

        def go(rec):
            start.wait()
            try:
                apply(*rec, checkout)
            except UserInputError as exc:
                refused.append(exc)

        threads = [threading.Thread(target=go, args=(rec,)) for rec in (A, B)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert shipped_state(checkout) in outcomes
        assert len(refused) <= 1 and all("this tune measured" in e.message for e in refused)


# ---- the diff first, then a yes; the comment and the baselines it invalidates (issue 44, item 7) --------
def _lull_and_loop(checkout: Path, keep_gate: bool = False) -> list[str]:
    """The corpus above, as tau-bench (a corpus the gate pins a baseline for): the recommendation is patience 4."""
    logs = checkout / "runs"
    round_log(logs / "lull.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(n)}] for n in (2, 3, 4)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    labels = checkout / "labels-tau-bench.yaml"
    labels.write_text("runs:\n  lull: {should_not_stop_before: 7}\n  loop: {loops: [3, 9]}\n")
    (checkout / "reports").mkdir(exist_ok=True)
    if not keep_gate:
        shutil.copy(ROOT / "reports/gate.toml", checkout / "reports/gate.toml")
    return ["tune", "--corpus", str(logs), "--labels", str(labels), "--grid", "min_new_shingles=3", "--patience",
            "2-9", "--holdout", "0", "--strict", "none", "--max-premature-share", "0", "--no-disk-cache",
            "--out", str(checkout / "out")]


class _Terminal:
    """A stdin on a terminal that answers the question with `answer`, noting what was shown before it."""
    def __init__(self, answer: str, capsys, checkout: Path):
        self.answer, self.capsys, self.checkout, self.shown = answer, capsys, checkout, None

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        self.shown = self.capsys.readouterr()
        self.settings_then = (self.checkout / "imprint_core/settings.py").read_text()
        return self.answer


def test_apply_off_a_terminal_without_yes_is_refused_before_the_sweep(checkout, capsys):
    before = shipped_state(checkout)
    assert main([*_lull_and_loop(checkout), "--apply"]) == 2
    err = capsys.readouterr().err
    assert "error: --apply: --apply rewrites the shipped defaults and cannot ask for confirmation off a terminal" in err
    assert "--apply --yes" in err and "--dry-run" in err
    assert shipped_state(checkout) == before and not (checkout / "out").exists()      # nothing tuned or written


def test_dry_run_prints_the_diff_with_the_comment_and_the_baselines_and_writes_nothing(checkout, capsys):
    before = shipped_state(checkout)
    assert main([*_lull_and_loop(checkout), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert shipped_state(checkout) == before and "--dry-run: nothing written" in out
    assert '+    SettingSpec("chat.research_no_progress_rounds", int, "rounds", 4, 2, 20,' in out
    # the comment above the value vouched for the old one: it names the new one
    assert "-    # patience. `imprint tune` chose 9 (reports/tune/README.md)." in out
    assert "+    # patience. `imprint tune` chose 4 (reports/tune/README.md)." in out
    assert "+    # 4, not the record's 4:" in out
    # the gate's baselines that measure the shipped rule, with what this tune saw, and how to re-pin them
    assert "the gate's loop-recall baselines (reports/gate.toml [loop_recall_baseline]) measure the shipped rule" in out
    # pinned for the shipped repeat-aware, whose record half the tuner changes but did not judge as a whole
    assert ("  tau-bench: pinned 1/10 for repeat-aware, whose record half this setting changes; this tune judged "
            "the record's rule alone: re-measure it") in out
    assert "re-measure with: make run && imprint check --json" in out
    # a gate that replays the record's rule, with baselines pinned for it: this tune's own figures
    gate = checkout / "reports/gate.toml"
    text = gate.read_text().replace('rule = "repeat-aware"', 'rule = "record"')
    gate.write_text(text.replace("[premature_stops]\n", '[premature_stops]\nrule = "record"\n', 1))
    assert main([*_lull_and_loop(checkout, keep_gate=True), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ("  tau-bench: pinned 1/10; moves: 0/1 caught at the shipped setting, 1/1 at the applied one, on the 2 "
            "run(s) this tune judged") in out
    assert "  scenarios: pinned " in out and "not among this tune's corpora: re-measure it" in out


@pytest.mark.parametrize("answer", ["n\n", "y\n"])
def test_apply_on_a_terminal_shows_the_diff_then_asks(checkout, capsys, monkeypatch, answer):
    before = shipped_state(checkout)
    term = _Terminal(answer, capsys, checkout)
    monkeypatch.setattr("sys.stdin", term)
    assert main([*_lull_and_loop(checkout), "--apply"]) == 0
    assert '+    SettingSpec("chat.research_no_progress_rounds", int, "rounds", 4' in term.shown.out   # shown first
    assert "write this change? [y/N]" in term.shown.err and term.settings_then == before[0]     # nothing written yet
    rest = capsys.readouterr()
    if answer == "n\n":
        assert shipped_state(checkout) == before and "--apply: nothing written" in rest.err
    else:
        settings = (checkout / "imprint_core/settings.py").read_text()
        assert '"rounds", 4, 2, 20' in settings and "`imprint tune` chose 4" in settings
        assert "--apply: wrote the recommended setting" in rest.out and "re-pinned baselines" in rest.out


def test_the_warnings_are_printed_and_in_the_summary_and_the_json(checkout, capsys):
    assert main([*_lull_and_loop(checkout), "--json"]) == 0
    got = capsys.readouterr()
    few = ("corpus tau-bench contributes 2 run(s) to the runs the choice was made on (fewer than 5): its figures, "
           "and any limit they meet, rest on too few runs")
    assert f"warning: {few}" in got.err
    assert few in json.loads(got.out)["warnings"]
    assert f"**Warning: {few}.**" in (checkout / "out" / "summary.md").read_text()
    assert few in json.loads((checkout / "out" / "recommendation.json").read_text())["warnings"]
