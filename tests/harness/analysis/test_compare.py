"""`imprint compare`: rules side by side on a small labelled corpus made
here, a user's rule from a file among the built-ins, the figures it reports
(recall, premature, stops before a loop, latency, loop rounds and tokens)
and the files it writes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.compare import SHIPPED, RuleChoice, TokenReplay, compare, markdown, token_replay
from harness.analysis.stats import rate
from harness.analysis.sweep.progress import Corpus, load_corpora
from harness.analysis.tune.search import Split
from harness.cli import main
from imprint_core.errors import UserInputError

from reportdata import fact, round_log

RECORD = RuleChoice("record", "record", {})

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
    # the shipped rule is always compared, first, as the baseline of the paired tests
    # (repeat-aware: the same call and result six times after the first stop it at round 9, inside the loop)
    assert runs["loop"]["stops"] == {"repeat-aware": 9, "round-cap[max_rounds=5]": 5, "gemini-cli": 7,
                                     f"{corpus['rule']}:make": 5}
    assert data["shipped"] == SHIPPED == "repeat-aware" and data["rules"][0]["label"] == SHIPPED
    for name in ("compare.md", "compare.json", "compare.png", "command.txt"):
        assert (out / name).stat().st_size > 0
    md = (out / "compare.md").read_text()
    assert "imprint compare --corpus" in md
    # per corpus and part: the loop caught and the useful run cut short, each a rate with its Wilson interval
    line = next(x for x in md.splitlines() if x.startswith("| round-cap[max_rounds=5] | mine | dev |"))
    assert "| 1/1 (100.0%, 20.7%–100.0%) |" in line and "| 1/1 (100%) |" in line


def test_a_stop_before_the_loop_is_counted_apart_from_a_catch(corpus):
    runs, _ = load_corpora([Corpus([str(corpus["logs"])], str(corpus["labels"]))])
    comp = compare(runs, [RuleChoice("cap2", "round-cap", {"max_rounds": 2}),
                          RuleChoice("never", "round-cap", {"max_rounds": 50})], split=Split(holdout=0.0))
    early, never = comp.cell("cap2"), comp.cell("never")
    assert (early.caught, early.early, early.premature) == (0, 1, 1)
    assert (never.caught, never.early, never.loop_rounds, never.loop_total) == (0, 0, 6, 6)
    assert never.tokens_reserve > never.tokens_prefix > 0
    assert early.tokens_reserve == early.tokens_prefix == 0     # the loop never ran
    line = next(x for x in markdown(comp, "imprint compare").splitlines() if x.startswith("| cap2 | mine | dev |"))
    # loops caught only by cap2 : only by the shipped rule (which catches it at round 9)
    assert "| 0/1 (0.0%, 0.0%–79.3%) | 0:1 p=1 | 1/1 (100%) | 1 |" in line


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


def test_token_replay_settles_through_the_core_s_ledger(corpus, monkeypatch):
    """Every replayed request is charged by TokenLedger's one settlement (the
    loop's), so a reply longer than the output allowance is charged the
    allowance, as a live request cut at it would be."""
    from imprint_core.budget import TokenLedger
    runs, _ = load_corpora([Corpus([str(corpus["logs"])], str(corpus["labels"]))])
    run = next(r for r in runs if r.name == "loop")
    charged: list[tuple[str, int]] = []
    settle = TokenLedger._charge

    def spy(self, *args, **kwargs):
        rec = settle(self, *args, **kwargs)
        charged.append((self.policy, rec.charged))
        return rec
    monkeypatch.setattr(TokenLedger, "_charge", spy)
    t = token_replay(run, budget=10**9, max_output=1)
    assert [c for p, c in charged if p == "reserve"] == t.reserve
    assert [c for p, c in charged if p == "prefix-refund"] == t.prefix_refund
    # a one-token allowance: the new prompt past what was processed, plus one token of output at most
    assert t.prefix_refund[0] == t.reserve[0] and all(c <= r for c, r in zip(t.prefix_refund, t.reserve))


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


# ---- outcomes as labels: harm, savings, paired tests, the decision ------------------------------------------
@pytest.fixture()
def outcomes(tmp_path: Path) -> dict[str, Path]:
    """Runs judged by their recorded outcome alone (no label): per task, a
    successful run of 8 rounds and a failed one of 10; plus one run whose
    source recorded nothing, which is left out."""
    logs = tmp_path / "runs"
    for t in range(6):
        round_log(logs / f"ok{t}.jsonl", [[{"result": fact(10 * t + n), "args": {"q": f"q{n}"}}] for n in range(8)],
                  {"task_id": f"t{t}", "outcome": {"value": "success", "field": "reward", "raw": 1}})
        round_log(logs / f"bad{t}.jsonl", [[{"result": fact(10 * t + n), "args": {"q": f"q{n}"}}] for n in range(10)],
                  {"task_id": f"t{t}", "reward": 0.0})
    round_log(logs / "silent.jsonl", [[{"result": fact(99)}]] * 3, {"task_id": "t9"})
    labels = tmp_path / "labels-fam.yaml"
    labels.write_text("runs: {}\n")
    return {"logs": logs, "labels": labels, "tmp": tmp_path}


def test_a_successful_run_cut_short_is_harm_and_a_failed_run_s_rest_is_saved(outcomes):
    runs, warnings = load_corpora([Corpus([str(outcomes["logs"])], str(outcomes["labels"]))], outcomes=True)
    assert len(runs) == 12 and {r.outcome.value for r in runs} == {"success", "failure"}
    assert {r.outcome.field for r in runs} == {"reward"}        # explicit, and the legacy field, alike
    # paired with the record's rule, which never stops these runs (--against; the shipped rule is the default)
    comp = compare(runs, [RuleChoice("cap5", "round-cap", {"max_rounds": 5})], split=Split(holdout=0.0), against=RECORD)
    cap, shipped = comp.cell("cap5"), comp.cell("record")
    assert comp.shipped == "record" and [c.label for c in comp.rules] == ["record", "cap5"]
    # 6 successful runs of 8 rounds stopped at 5: all harmed; 6 failed runs of 10: 5 of 10 rounds saved each
    assert (cap.harm, cap.harm_of, cap.successes, cap.failures) == (6, 6, 6, 6)
    assert cap.saving() == pytest.approx(0.5) and cap.failed_rounds == 60 and cap.saved_rounds == 30
    assert 0 < cap.saving("prefix-refund") < cap.saving("reserve") < 1     # later rounds cost more under reserve
    assert (shipped.harm, shipped.saving()) == (0, 0.0) and not shipped.paired
    p = cap.paired
    assert (p["harm_only_candidate"], p["harm_only_shipped"]) == (6, 0)
    assert p["harm_mcnemar_p"] == pytest.approx(2 * 0.5 ** 6)
    assert p["harm_rate_diff"] == pytest.approx(1.0) and p["harm_rate_diff_upper95"] == pytest.approx(1.0)
    assert p["saving_rounds_diff"] == pytest.approx(0.5) and p["saving_rounds_diff_ci95_low"] == pytest.approx(0.5)
    d = comp.to_dict()
    runs_out = {r["name"]: r for r in d["runs"]}
    assert runs_out["ok0"]["outcome"] == "success" and runs_out["bad0"]["outcome"] == "failure"
    assert "silent" not in runs_out
    cell = next(c for c in d["cells"] if (c["rule"], c["corpus"], c["part"]) == ("cap5", "all", "all"))
    assert cell["harm_rate_ci95_low"] == pytest.approx(rate(6, 6).interval[0])
    assert cell["vs_shipped"]["harm_mcnemar_p"] == pytest.approx(0.03125)


def test_decide_rejects_harm_and_names_each_condition_with_its_figures(outcomes):
    from harness.analysis.decision import decide
    runs, _ = load_corpora([Corpus([str(outcomes["logs"])], str(outcomes["labels"]))], outcomes=True)
    comp = compare(runs, [RuleChoice("cap5", "round-cap", {"max_rounds": 5}),
                          RuleChoice("cap50", "round-cap", {"max_rounds": 50})], split=Split(holdout=0.0),
                   against=RECORD)
    harsh = decide(comp, "cap5", {"round-cap": 0.01, "record": 1.0}, part="all")
    names = {c.name: c for c in harsh.conditions}
    assert not harsh.passed and not names["harm not worse"].holds and names["benefit better"].holds
    assert names["cost"].holds and "0.01" in names["cost"].detail
    assert "cap5 does not replace record: harm not worse failed" in harsh.verdict
    idle = decide(comp, "cap50", {"round-cap": 5.0, "record": 1.0}, part="all")
    names = {c.name: c for c in idle.conditions}
    assert names["harm not worse"].holds and not names["benefit better"].holds and not names["cost"].holds
    assert not decide(comp, "cap50", None, part="all").passed
    with pytest.raises(UserInputError):
        decide(comp, "record", {}, part="all")


def test_compare_decide_prints_the_verdict_and_exits_1_when_it_fails(outcomes, capsys):
    costs = outcomes["tmp"] / "rules.json"
    costs.write_text(json.dumps({"per_round": {"ms_per_round": {"record": 1.0, "round-cap": 0.001}}}))
    code = main(["compare", "--corpus", str(outcomes["logs"]), "--labels", str(outcomes["labels"]), "--rule",
                 "round-cap[max_rounds=5]", "--holdout", "0.5", "--no-disk-cache", "--out", str(outcomes["tmp"] / "o"),
                 "--decide", "round-cap[max_rounds=5]", "--costs", str(costs), "--against", "record"])
    out = capsys.readouterr().out
    assert code == 1 and "verdict: round-cap[max_rounds=5] does not replace record" in out
    assert "[FAILS] harm not worse" in out and "[holds] cost" in out
    md = (outcomes["tmp"] / "o" / "compare.md").read_text()
    assert "## Decision" in md and "**round-cap[max_rounds=5] does not replace record" in md


# ---- the terminal table (issue 44, item 10) ----------------------------------------------------------------
def test_the_terminal_table_is_one_pooled_row_a_rule_with_its_units_said(corpus, capsys):
    base = ["compare", "--corpus", str(corpus["logs"]), "--labels", str(corpus["labels"]), "--rule", "gemini-cli",
            "--rule", "round-cap[max_rounds=5]", "--holdout", "0", "--no-disk-cache", "--out", str(corpus["tmp"] / "o")]
    assert main(base) == 0
    out = capsys.readouterr().out
    body = [line for line in out.splitlines() if line.startswith("│")]
    # one row a rule (the shipped one first, gemini-cli, round-cap), no corpus or part column, pooled
    assert [line.split("│")[1].strip() for line in body if line.split("│")[1].strip()][:3] == \
        [SHIPPED, "gemini-cli", "round-cap[max_rounds=5]"]
    assert "pooled over every corpus" in out and "mine" not in "".join(body)
    # units in the headers and a legend line: rounds, and the two token figures' policies
    flat = " ".join(out.split())
    assert "(rounds)" in flat and "reserve / prefix-refund" in flat
    assert "latency: rounds" in flat and "10 to 100 times apart" in flat and "--detail" in flat
    # --detail: every corpus and part, the pooled rows first
    assert main([*base, "--detail"]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    corpora = [r[2].strip() for r in rows if len(r) > 3 and r[2].strip() in ("all", "mine")]
    assert corpora and corpora[0] == "all" and corpora.index("mine") > max(i for i, c in enumerate(corpora) if c == "all")
