"""`imprint replay` says each rule's stop in the rule's own words, prints
progress rounds only for a rule that judges progress, and `--rounds` shows
round by round the rule's state and why it stopped or went on, for any rule,
`any[rules=...]` included (issue 44 item 8)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

from reportdata import fact, round_log

PLAIN_RULE = '''\
class Third:
    """Stops at the third round, whatever it holds."""
    def __init__(self): self.n = 0
    def observe(self, round):
        self.n += 1
        return "three rounds are enough" if self.n >= 3 else None
    def reset(self): self.n = 0

def make():
    return Third()
'''


@pytest.fixture
def looping(tmp_path: Path) -> Path:
    """Two rounds of new facts, then the same search with the same result five times."""
    rounds = [[{"result": fact(1), "args": {"q": "a"}}], [{"result": fact(2), "args": {"q": "b"}}]]
    rounds += [[{"result": fact(3), "args": {"q": "same"}}] for _ in range(5)]
    return round_log(tmp_path / "loop.jsonl", rounds)


def replay(capsys, *args: str) -> list[str]:
    assert main(["replay", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_stop_is_said_in_the_rule_s_own_words_without_progress_it_does_not_track(looping, capsys) -> None:
    out = replay(capsys, str(looping), "--rule", "gemini-cli", "--param", "threshold=3")
    assert out[0] == f"{looping}: 7 rounds, stops at round 5: the same tool call 3 times in a row (search)"
    assert "progress rounds" not in out[0] and "no_progress" not in "\n".join(out)
    assert out[-1] == "1 run(s): 1 stopped by gemini-cli, threshold=3 at rounds [5]"
    out = replay(capsys, str(looping), "--rule", "record", "--patience", "2")   # it judges progress: shown
    assert out[0] == (f"{looping}: 7 rounds, stops at round 5: 2 consecutive rounds without new evidence; "
                      "progress rounds [1, 2, 3]")


def test_rounds_shows_the_state_and_why_the_rule_stopped_or_went_on(looping, capsys) -> None:
    out = replay(capsys, str(looping), "--rule", "gemini-cli", "--param", "threshold=3", "--rounds")
    rows = [line for line in out if line.startswith("  round ")]
    assert len(rows) == 7 and "  rule gemini-cli (threshold=3): 7 round(s)" in out
    assert rows[0] == "  round 1 | calls 1 read: search | state repeats=1 | goes on"
    assert rows[3] == "  round 4 | calls 1 read: search | state repeats=2 | goes on"
    assert rows[4] == ("  round 5 | calls 1 read: search | state repeats=3 | "
                       "STOPS: the same tool call 3 times in a row (search)")
    assert rows[5].endswith("(after the stop) would stop: the same tool call 4 times in a row (search)")
    out = replay(capsys, str(looping), "--rule", "record", "--patience", "2", "--rounds")
    rows = [line for line in out if line.startswith("  round ")]
    assert "progress=True" in rows[2] and rows[2].endswith("goes on: new evidence (patience counter reset)")
    assert rows[3].endswith("goes on: 1 of 2 rounds without new evidence")
    assert rows[4].endswith("STOPS: 2 consecutive rounds without new evidence")


def test_rounds_names_each_member_of_any_written_inline(looping, capsys) -> None:
    out = replay(capsys, str(looping), "--rule", "any[rules=gemini-cli,round-cap,gemini-cli.threshold=3]",
                 "--param", "round-cap.max_rounds=4", "--rounds")
    assert out[0] == f"{looping}: 7 rounds, stops at round 4: round-cap: round cap of 4 reached"
    rows = [line for line in out if line.startswith("  round ")]
    assert rows[1] == ("  round 2 | calls 1 read: search | state gemini-cli: repeats=1; round-cap: rounds=2 | "
                       "gemini-cli: goes on; round-cap: goes on")
    assert rows[3].endswith("STOPS: round-cap: round cap of 4 reached")
    assert rows[4].endswith("would stop: gemini-cli: the same tool call 3 times in a row (search); "
                            "round-cap: round cap of 4 reached")


def test_rounds_works_for_a_rule_file_without_notes_and_in_json(looping, tmp_path: Path, capsys) -> None:
    (tmp_path / "third.py").write_text(PLAIN_RULE)
    out = replay(capsys, str(looping), "--rule", f"{tmp_path / 'third.py'}:make", "--rounds")
    assert out[0] == f"{looping}: 7 rounds, stops at round 3: three rounds are enough"
    assert "  round 2 | calls 1 read: search | state - | goes on" in out
    line = replay(capsys, str(looping), "--rule", "gemini-cli", "--rounds", "--json")
    per_round = json.loads(line[0])["per_round"]
    assert [r["state"]["repeats"] for r in per_round] == [1, 1, 1, 2, 3, 4, 5]
    assert per_round[5]["stop"] is None and per_round[6]["stop"] == "the same tool call 5 times in a row (search)"
    assert per_round[6]["why"] == "STOPS: the same tool call 5 times in a row (search)"    # threshold 5, the default
    record = json.loads(replay(capsys, str(looping), "--rule", "record", "--rounds", "--json")[0])["per_round"]
    assert record[0]["state"]["verdicts"]["0"]["status"] == "ok"         # the record's verdicts, field by field
    # the shipped rule (repeat-aware, no --rule): each member's state and why, the record's verdicts among them
    shipped = json.loads(replay(capsys, str(looping), "--rounds", "--json")[0])["per_round"]
    assert shipped[0]["state"]["record"]["verdicts"]["0"]["status"] == "ok"
    assert shipped[-1]["state"]["outcome-repeat"]["calls"] == "action"
