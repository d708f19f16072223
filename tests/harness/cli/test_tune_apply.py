"""`imprint tune --apply`: the recommended setting written where the shipped
defaults live, in the checkout of the current folder, as a diff."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.shipped import apply, planned_edits
from imprint_core.errors import UserInputError

from reportdata import fact, round_log

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch) -> Path:
    for rel in ("imprint_core/settings.py", "imprint_core/novelty/rule.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_apply_rewrites_the_patience_and_novelty_defaults_and_returns_the_diff(checkout):
    diff = apply(7, {"fingerprint_unit": "line", "min_new_shingles": 1, "shingle_capacity": 131072})
    settings = (checkout / "imprint_core/settings.py").read_text()
    rule = (checkout / "imprint_core/novelty/rule.py").read_text()
    assert 'SettingSpec("chat.research_no_progress_rounds", int, "rounds", 7, 2, 20,' in settings
    assert '    fingerprint_unit: str = "line"  # paragraph: a unit' in rule
    assert "    min_new_shingles: int = 1            # new shingles" in rule
    assert "    shingle_capacity: int = 131_072" in rule
    assert "-    SettingSpec(\"chat.research_no_progress_rounds\", int, \"rounds\", 9," in diff
    assert "+    fingerprint_unit: str = \"line\"" in diff and diff.count("\n+++ ") + diff.startswith("+++ ") == 2
    # the edited files still compile, and nothing else in them changed
    compile(settings, "settings.py", "exec")
    compile(rule, "rule.py", "exec")
    assert len(settings.splitlines()) == len((ROOT / "imprint_core/settings.py").read_text().splitlines())
    assert apply(7, {"fingerprint_unit": "line"}) == ""      # already so: no edit, no diff


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
                 "--no-disk-cache", "--out", str(checkout / "out"), "--apply"])
    assert code == 0
    err = capsys.readouterr().err
    assert '"rounds", 4, 2, 20' in (checkout / "imprint_core/settings.py").read_text()
    assert "-    SettingSpec(\"chat.research_no_progress_rounds\", int, \"rounds\", 9" in err and "commit" in err
    assert main(["tune", "--corpus", str(logs), "--labels", str(labels), "--rule", "round-cap", "--grid",
                 "max_rounds=3,20", "--out", str(checkout / "out"), "--apply"]) == 2
