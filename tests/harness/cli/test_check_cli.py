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
    assert body[0].startswith("  - round logs and raw trajectories replayed by rule repeat-aware at patience 3, "
                              "shipped novelty config")
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


# ---- JUnit XML for a CI dashboard (issue 44, item 12) ---------------------------------------------------------
def test_junit_xml_has_a_case_per_gate_line_failures_and_skips(inputs, tmp_path: Path, capsys) -> None:
    import json
    import xml.etree.ElementTree as ET
    target = tmp_path / "out" / "gate.xml"
    target.parent.mkdir()
    target.write_text("old")                          # replaced whole, never appended to
    assert main(["check", *inputs, "--json", "--junit-xml", str(target)]) == 1
    verdict = json.loads(capsys.readouterr().out)
    root = ET.parse(target).getroot()
    cases = root.findall("./testsuite/testcase")
    lines = [(c["number"], row) for c in verdict["conditions"] for row in c["rows"]]
    assert len(cases) == len(lines) + 1               # every gate line, and the judged run
    by = {(c.get("classname"), c.get("name")): c for c in cases}
    for number, row in lines:
        case = next(v for (cls, name), v in by.items() if cls.startswith(f"{number}. ") and name == str(row["subject"]))
        kind = None if row["passed"] else "skipped" if row["passed"] is None else "failure"
        assert [e.tag for e in case if e.tag in ("failure", "skipped")] == ([kind] if kind else [])
    assert int(root.get("failures")) == sum(r["passed"] is False for _, r in lines) >= 1
    assert int(root.get("skipped")) == sum(r["passed"] is None for _, r in lines) >= 1
    assert int(root.get("tests")) == len(cases)
    assert ("imprint check", "judged run") in by
    assert [p.name for p in target.parent.iterdir()] == ["gate.xml"]      # no temporary file left beside it


def test_junit_xml_into_a_missing_folder_is_a_user_error(inputs, tmp_path: Path, capsys) -> None:
    assert main(["check", *inputs, "--junit-xml", str(tmp_path / "no" / "such" / "gate.xml")]) == 2
    err = capsys.readouterr().err
    assert "--junit-xml" in err and "Traceback" not in err
