"""`imprint check`'s text form: labels shown as written, notes grouped by
condition and corpus, and a clear error outside a checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

from reportdata import fact, gate_toml, handmade_trace, round_log

CONFIG = gate_toml(3)


@pytest.fixture()
def inputs(tmp_path: Path, monkeypatch) -> list[str]:
    monkeypatch.setenv("COLUMNS", "400")      # one line per table row, whatever the terminal
    d = tmp_path / "in"
    exact = {"mode": "auto", "used": "tokenizer", "exact": True}
    handmade_trace(d / "tok.jsonl", provider="remote", provider_kind="remote", ratios=[1.0] * 5,
                   header_extra={"server": "llamacpp"}, scenario="tok", counting=exact)
    handmade_trace(d / "base.jsonl", provider="remote", provider_kind="remote", ratios=[0.5, 3.0, 12.0],
                   header_extra={"server": "llamacpp"}, scenario="base",
                   counting={"mode": "byte", "used": "byte", "exact": False})
    round_log(d / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    round_log(d / "lull.jsonl", [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}], [{"result": fact(3)}]])
    (tmp_path / "labels-web.yaml").write_text("runs:\n  loop: {loops: [9, 10]}\n  lull: {should_not_stop_before: 6}\n")
    (tmp_path / "gate.toml").write_text(CONFIG)
    return [str(d), "--config", str(tmp_path / "gate.toml"), "--labels", str(tmp_path / "labels-web.yaml")]


def test_the_text_table_keeps_bracketed_mode_names(inputs, capsys) -> None:
    main(["check", *inputs])
    out = capsys.readouterr().out
    assert "remote:llamacpp [tokenizer, exact]: median" in out
    assert "remote:llamacpp [baseline: chat.token_counting = byte]" in out
    assert "remote:llamacpp : median" not in out


def test_notes_are_grouped_by_condition_and_corpus(inputs, capsys) -> None:
    assert main(["check", *inputs]) == 1
    lines = capsys.readouterr().out.splitlines()
    heading = lines.index("condition 1 (premature no-progress stops on labelled useful runs; recall of labelled loops):")
    body = lines[heading + 1:lines.index("condition 2 (estimate / measured prompt tokens per provider and counting mode):")]
    assert body[0].startswith("  - round logs and raw trajectories replayed by the record's rule at patience 3")
    web = body.index("  web:")
    assert body[web + 1:] and all(line.startswith("    - ") for line in body[web + 1:] if line)
    assert any("in/lull: replayed no_progress stop at round" in line for line in body[web + 1:])
    assert not any(line.lstrip().startswith("1. ") for line in lines)      # no numbered list of notes


@pytest.mark.parametrize("command", [["check"], ["regress", "list"]])
def test_outside_a_checkout_says_where_it_looked(tmp_path: Path, monkeypatch, capsys, command) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"no gate config at {tmp_path.resolve() / 'reports' / 'gate.toml'}" in err
    assert "run imprint from the root of a checkout" in err and "--config FILE" in err and "Traceback" not in err
