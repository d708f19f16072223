"""Off a terminal (a CI log): `imprint run` says when each scenario is done,
`imprint compare` how far its replays are, and tables are as wide as their content, whatever COLUMNS says, so that no
column is squeezed or cut."""
from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from hypothesis import given, strategies as st

from harness.cli import main
from harness.cli.console import progress_lines

from reportdata import fact, gate_toml, round_log

REPO = Path(__file__).resolve().parents[3]


def test_run_prints_a_line_per_finished_scenario_in_a_log(tmp_path: Path, capsys) -> None:
    names = ("01-answer-at-round-1.yaml", "04-identical-evidence.yaml")
    for name in names:
        shutil.copy(REPO / "scenarios" / name, tmp_path / name)
    assert main(["run", *(str(tmp_path / n) for n in names), "--traces", str(tmp_path / "runs")]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("imprint run [")]
    assert [re.sub(r" \(.*", "", ln) for ln in lines] == ["imprint run [1/2] answer-at-round-1: pass",
                                                          "imprint run [2/2] identical-evidence: pass"]
    assert "(no_progress, 10 round(s)," in lines[1]


def test_a_table_in_a_log_keeps_every_column_on_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "80")      # what a CI runner or a shell may export; a log has no width
    logs = tmp_path / "logs"
    round_log(logs / "fine.jsonl", [[{"result": fact(n)}] for n in range(1, 7)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  fine: {should_not_stop_before: 6}\n  loop: {loops: [3, 10]}\n")
    cfg = tmp_path / "gate.toml"
    cfg.write_text(gate_toml(3) + "\n[loop_recall_baseline]\nmine = {recall = 1.0, caught = 1, loops = 1, "
                                  "commit = 'abc1234'}\n")
    main(["check", str(logs), "--config", str(cfg), "--labels", str(labels)])
    out = capsys.readouterr().out.splitlines()
    assert any(all(col in ln for col in ("condition", "subject", "figure", "threshold", "verdict")) for ln in out)
    row = [ln for ln in out if "mine: loop recall" in ln]
    assert len(row) == 1 and "1 of 1 loops caught (100.0%; 95% interval 20.7%–100.0%)" in row[0] and "holds" in row[0]
    assert "≥ baseline 100% (1/1, abc1234); goal ≥ 80%, not gated" in row[0]


def test_compare_says_how_far_its_replays_are_in_a_log(tmp_path: Path, capsys) -> None:
    logs = tmp_path / "logs"
    round_log(logs / "fine.jsonl", [[{"result": fact(n)}] for n in range(1, 7)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  fine: {should_not_stop_before: 6}\n  loop: {loops: [3, 10]}\n")
    # two rules named, and the shipped one added first: 3 rules over 2 runs
    main(["compare", str(logs), "--labels", str(labels), "--rule", "round-cap", "--rule", "record",
          "--out", str(tmp_path / "out"), "--no-disk-cache", "--jobs", "1"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("imprint compare: ")]
    assert err[0] == "imprint compare: reading 1 labelled corpora"
    replayed = [re.sub(r" after \d+ s$", "", ln) for ln in err if "replayed" in ln]
    assert replayed[-1] == "imprint compare: 100% (6 of 6 rule × run pairs replayed)"
    assert err[-1].startswith("imprint compare: writing compare.md")


@given(st.integers(1, 500).flatmap(lambda total: st.tuples(st.just(total), st.lists(st.integers(1, 60)))))
def test_progress_lines_say_each_tenth_once_and_in_order(case) -> None:
    total, chunks = case
    out = io.StringIO()
    advance = progress_lines("x", "pairs", total, file=out)
    done = 0
    for n in chunks:
        if done + n > total:
            break
        advance(n)
        done += n
    if done < total:
        advance(total - done)
    lines = re.findall(r"^imprint x: (\d+)% \(([\d,]+) of ([\d,]+) pairs\)", out.getvalue(), re.M)
    shares = [int(s) for s, _, _ in lines]
    # at most a line a tenth, each past a tenth the one before had not reached, and the last at the end
    assert shares == sorted(set(shares)) and len(shares) <= 10
    assert len({s // 10 for s in shares}) == len(shares)
    assert lines[-1] == ("100", f"{total:,}", f"{total:,}")
    assert all(int(s) == 100 * int(d.replace(",", "")) // total for s, d, _ in lines)
