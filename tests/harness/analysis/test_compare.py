"""`imprint compare`: rules side by side on a small labelled corpus made
here, a user's rule from a file among the built-ins, the figures it reports
(recall, premature, stops before a loop, latency, loop rounds and tokens)
and the files it writes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.compare import RuleChoice, TokenReplay, compare, markdown, token_replay
from harness.analysis.sweep import Corpus, load_corpora
from harness.analysis.tune import Split
from harness.cli import main
from imprint_core.errors import UserInputError

from reportdata import fact, round_log

THREE_SAME = '''\
class ThreeSame:
    """Stop when the same calls come back n rounds in a row."""
    def __init__(self, n): self.n, self.last, self.count = n, None, 0
    def observe(self, round):
        key = [(c.tool, c.args) for c in round.calls]
        self.count = self.count + 1 if key == self.last else 1
        self.last = key
        return f"{self.n} identical rounds" if self.count >= self.n else None
    def reset(self): self.last, self.count = None, 0

def make(n=3):
    return ThreeSame(n)
'''


@pytest.fixture()
def corpus(tmp_path: Path) -> dict[str, Path]:
    logs = tmp_path / "runs"
    # a useful run: 8 rounds, each a new query and a new fact
    round_log(logs / "useful.jsonl", [[{"result": fact(n), "args": {"q": f"q{n}"}}] for n in range(1, 9)])
    # a loop: rounds 4-9 repeat round 3's call and its result
    round_log(logs / "loop.jsonl", [[{"result": fact(1), "args": {"q": "a"}}], [{"result": fact(2), "args": {"q": "b"}}]]
              + [[{"result": fact(3), "args": {"q": "c"}}]] * 7)
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  useful: {should_not_stop_before: 8}\n  loop: {loops: [4, 9]}\n")
    rule = tmp_path / "elsewhere" / "three_same.py"
    rule.parent.mkdir()
    rule.write_text(THREE_SAME)
    return {"logs": logs, "labels": labels, "rule": rule, "tmp": tmp_path}


def test_a_rule_in_a_file_is_compared_with_the_built_ins_in_one_command(corpus, capsys):
    out = corpus["tmp"] / "out"
    code = main(["compare", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]),
                 "--rule", "round-cap[max_rounds=5]", "--rule", "gemini-cli", "--rule", f"{corpus['rule']}:make",
                 "--holdout", "0", "--no-disk-cache", "--out", str(out), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    cells = {(c["rule"], c["corpus"], c["part"]): c for c in data["cells"]}
    mine = cells[(f"{corpus['rule']}:make", "mine", "all")]
    # 3 identical rounds: rounds 3, 4, 5 -> a stop at 5, inside the loop 4-9, one round after it started
    assert (mine["caught"], mine["loops"], mine["premature"], mine["useful"]) == (1, 1, 0, 1)
    assert mine["latencies"] == [1] and mine["loop_rounds_spent"] == 2 and mine["loop_rounds_total"] == 6
    cap = cells[("round-cap[max_rounds=5]", "mine", "all")]
    assert (cap["caught"], cap["premature"]) == (1, 1)          # it cuts the useful run short too
    gem = cells[("gemini-cli", "mine", "all")]
    assert gem["caught"] == 1 and gem["latencies"] == [3]       # 5 identical calls: rounds 3-7, stop at 7
    runs = {r["name"]: r for r in data["runs"]}
    assert runs["loop"]["stops"] == {"round-cap[max_rounds=5]": 5, "gemini-cli": 7, f"{corpus['rule']}:make": 5}
    for name in ("compare.md", "compare.json", "compare.png", "command.txt"):
        assert (out / name).stat().st_size > 0
    md = (out / "compare.md").read_text()
    assert "imprint compare --corpus" in md and "| round-cap[max_rounds=5] | mine | dev | 1/1 (100%) | 1/1 (100%)" in md


def test_a_stop_before_the_loop_is_counted_apart_from_a_catch(corpus):
    runs, _ = load_corpora([Corpus([str(corpus["logs"])], str(corpus["labels"]))])
    comp = compare(runs, [RuleChoice("cap2", "round-cap", {"max_rounds": 2}),
                          RuleChoice("never", "round-cap", {"max_rounds": 50})], split=Split(holdout=0.0))
    early, never = comp.cell("cap2"), comp.cell("never")
    assert (early.caught, early.early, early.premature) == (0, 1, 1)
    assert (never.caught, never.early, never.loop_rounds, never.loop_total) == (0, 0, 6, 6)
    assert never.tokens_reserve > never.tokens_prefix > 0
    assert early.tokens_reserve == early.tokens_prefix == 0     # the loop never ran
    assert "| cap2 | mine | dev | 0/1 (0%) | 1/1 (100%) | 1 |" in markdown(comp, "imprint compare")


def test_token_replay_charges_the_growing_prompt_under_reserve_and_the_new_part_under_prefix_refund(corpus):
    runs, _ = load_corpora([Corpus([str(corpus["logs"])], str(corpus["labels"]))])
    run = next(r for r in runs if r.name == "loop")
    t = token_replay(run, budget=10**9, max_output=100)
    assert isinstance(t, TokenReplay) and len(t.reserve) == len(t.prefix_refund) == 9
    # reserve: every request pays its whole prompt plus the allowance, and prompts only grow
    assert all(b > a for a, b in zip(t.reserve, t.reserve[1:])) and min(t.reserve) > 100
    # prefix-refund: after the first request, only what the previous round added plus its output
    first_output = -(-len(json.dumps({"name": "search", "arguments": {"q": "a"}})) // 3)
    assert t.prefix_refund[0] - first_output == t.reserve[0] - 100      # the same prompt, its own output
    assert max(t.prefix_refund[1:]) < t.reserve[1] - 100
    assert t.budget_end == {"reserve": None, "prefix-refund": None}
    small = token_replay(run, budget=t.reserve[0] + t.reserve[1] + 1, max_output=100)
    assert small.budget_end["reserve"] == 2 and small.budget_end["prefix-refund"] >= 2


def test_unknown_rules_and_parameters_are_clear_errors_before_anything_is_read(corpus, capsys):
    base = ["compare", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--out",
            str(corpus["tmp"] / "o")]
    assert main(base + ["--rule", "gemini"]) == 2
    assert "unknown stop rule 'gemini'" in capsys.readouterr().err
    assert main(base + ["--rule", "gemini-cli[treshold=3]"]) == 2
    assert "threshold" in capsys.readouterr().err
    assert main(base + ["--rule", "gemini-cli", "--rule", "gemini-cli"]) == 2
    # a parameter no compared rule takes is refused, not dropped
    assert main(base + ["--rule", "gemini-cli", "--rule", "round-cap", "--param", "threshold=3"]) == 2
    assert "--param threshold names no rule" in capsys.readouterr().err
    assert main(base + ["--rule", "gemini-cli", "--rule", "round-cap", "--param", "openhands.repeat_pairs=3"]) == 2
    assert not (corpus["tmp"] / "o").exists()


def test_tune_sweeps_any_rule_s_parameters_with_the_same_choice_and_split(corpus, capsys):
    out = corpus["tmp"] / "tune"
    code = main(["tune", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--rule", "round-cap",
                 "--grid", "max_rounds=3,5,20", "--holdout", "0", "--strict", "none", "--max-premature-share", "0",
                 "--no-disk-cache", "--out", str(out), "--json"])
    assert code == 0
    rec = json.loads(capsys.readouterr().out)
    # 3 and 5 stop the useful run early; 20 and the default 12 never catch the loop: the default wins the tie
    assert rec["setting"] == {"rule": "round-cap", "params": {"max_rounds": 12}, "changed": {}, "shipped": True}
    assert rec["settings"] == 4 and rec["feasible"]
    csv = (out / "settings.csv").read_text().splitlines()
    assert csv[0].startswith("rule,max_rounds,shipped,recommended") and len(csv) == 5
    assert not (out / "ceiling.md").exists()
    # a rule in a file, tuned the same way: n=3 catches the loop at round 5 without stopping the useful run
    code = main(["tune", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--rule",
                 f"{corpus['rule']}:make", "--grid", "n=2,3,9", "--holdout", "0", "--strict", "none",
                 "--no-disk-cache", "--out", str(out), "--json"])
    assert code == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["setting"]["params"] == {"n": 2} and rec["feasible"]
    assert main(["tune", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--rule", "round-cap",
                 "--out", str(out)]) == 2
    assert "needs --grid" in capsys.readouterr().err


def test_the_report_shows_a_comparison_as_a_section(corpus, capsys):
    out = corpus["tmp"] / "cmp"
    assert main(["compare", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--rule", "gemini-cli",
                 "--holdout", "0", "--no-disk-cache", "--out", str(out)]) == 0
    rep = corpus["tmp"] / "rep"
    assert main(["report", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--compare",
                 str(out / "compare.json"), "--out", str(rep)]) == 0
    page = (rep / "index.html").read_text()
    assert "Stop rules compared" in page and "gemini-cli" in page and (rep / "compare.png").exists()
    (corpus["tmp"] / "bad.json").write_text("{}")
    assert main(["report", str(corpus["logs"]), "--compare", str(corpus["tmp"] / "bad.json"), "--out", str(rep)]) == 2
    assert "cells" in capsys.readouterr().err
