"""`imprint check`: the record's three invalidation conditions as a gate."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.analysis.gate.config import load_config, parse_config
from imprint_core.errors import UserInputError
from imprint_core.settings import SPECS

from reportdata import fact, handmade_trace, round_log

ROOT = Path(__file__).resolve().parents[3]

CONFIG = """\
[premature_stops]
patience = 4
max_premature = 0

[divergence]
min_requests = 3
median_min = 0.9
median_max = 1.5
p95_max = 2.0
max_undercount_share = 0.05
exclude = ["stub"]

[overruns]
max_count = 0
max_overrun_sec = 5.0
"""


def _check(args: list[str], capsys) -> tuple[int, dict]:
    code = main(["check", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture()
def setup(tmp_path: Path) -> dict[str, Path]:
    cfg = tmp_path / "gate.toml"
    cfg.write_text(CONFIG)
    labels = tmp_path / "labels.yaml"
    labels.write_text("runs:\n  lull: {should_not_stop_before: 6}\n")
    good = tmp_path / "good"
    handmade_trace(good / "remote.jsonl", provider="remote", provider_kind="remote", ratios=[1.1, 1.2, 1.05, 1.3],
                   header_extra={"server": "llamacpp"}, scenario="fine")
    # a useful run with a 3-round lull: patience 4 lets it go on
    lull = [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}], [{"result": fact(3)}]]
    round_log(good / "lull.jsonl", lull)
    return {"cfg": cfg, "labels": labels, "good": good, "tmp": tmp_path}


def test_all_conditions_hold(setup, capsys) -> None:
    code, out = _check([str(setup["good"]), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    assert code == 0 and out["passed"]
    c1, c2, c3 = out["conditions"]
    assert c1["rows"][0]["subject"] == "labels: premature stops"
    assert c1["rows"][0]["figure"] == "0 of 1 useful runs (0.0%; 95% interval 0.0%–79.3%)"
    assert [r["subject"] for r in c2["rows"]] == ["remote:llamacpp: median", "remote:llamacpp: p95",
                                                   "remote:llamacpp: under-counts",
                                                   "token charges past the reservation"]
    assert c3["rows"][0]["value"] == 0


def test_fails_on_overrun_and_undercount(setup, capsys) -> None:
    bad = setup["tmp"] / "bad"
    handmade_trace(bad / "remote.jsonl", provider="remote", provider_kind="remote", ratios=[0.7, 0.8, 0.9, 1.0],
                   header_extra={"server": "vllm"}, overrun=9.5, scenario="slow")
    code, out = _check([str(bad), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    assert code == 1 and not out["passed"]
    c1, c2, c3 = out["conditions"]
    assert not c1["passed"] and c1["no_data"]          # no labelled useful run among these inputs
    under = {r["subject"]: r for r in c2["rows"]}["remote:vllm: under-counts"]
    assert under["value"] == 0.75 and under["passed"] is False
    assert {r["subject"]: r for r in c2["rows"]}["remote:vllm: median"]["passed"] is False
    assert not c3["passed"] and c3["rows"][0]["value"] == 1 and c3["rows"][1]["value"] == 9.5
    # the human-readable form names each condition, its figure and its threshold
    assert main(["check", str(bad), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])]) == 1
    text = capsys.readouterr().out
    assert "9.5 s" in text and "≤ 5 s" in text and "75.0% of 4" in text and "FAILS" in text



def test_a_replay_beside_its_recording_is_counted_once(setup, capsys) -> None:
    # `make run` replays every cassette into traces/runs/ while the recording's
    # own trace stays in traces/cassettes/: the same measurements, twice.
    both = setup["tmp"] / "both"
    for where in ("cassettes", "runs/20261130-0000"):
        handmade_trace(both / where / "remote.jsonl", provider="remote", provider_kind="remote",
                       ratios=[0.8, 1.1, 1.2, 1.3], header_extra={"server": "vllm"}, scenario="recorded")
    handmade_trace(both / "other.jsonl", provider="remote", provider_kind="remote", ratios=[0.8, 1.1, 1.2, 1.3],
                   header_extra={"server": "vllm"}, scenario="another")  # another session: counted
    code, out = _check([str(both), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    under = {r["subject"]: r for r in out["conditions"][1]["rows"]}["remote:vllm: under-counts"]
    assert under["figure"] == "25.0% of 8" and under["value"] == 0.25

def test_condition_2_judges_the_counting_mode_the_budget_used(setup, capsys) -> None:
    """An exact (tokenizer) mode is held to [divergence.exact]; a
    byte baseline recorded on purpose is listed with its figures, unjudged;
    a run with the default mode that counted approximately is judged by the
    provider's band."""
    d = setup["tmp"] / "modes"
    exact = {"mode": "auto", "used": "tokenizer", "exact": True}
    handmade_trace(d / "tok.jsonl", provider="remote", provider_kind="remote", ratios=[1.0] * 5,
                   header_extra={"server": "llamacpp"}, scenario="tok", counting=exact)
    handmade_trace(d / "base.jsonl", provider="remote", provider_kind="remote", ratios=[0.5, 3.0, 12.0],
                   header_extra={"server": "llamacpp"}, scenario="base",
                   counting={"mode": "byte", "used": "byte", "exact": False})
    code, out = _check([str(d), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    rows = {r["subject"]: r for r in out["conditions"][1]["rows"]}
    assert out["conditions"][1]["passed"]
    assert rows["remote:llamacpp [tokenizer, exact]: median"]["threshold"] == "0.98–1.02"
    assert rows["remote:llamacpp [tokenizer, exact]: under-counts"]["threshold"] == "≤ 0%"
    base = rows["remote:llamacpp [baseline: chat.token_counting = byte]"]
    assert base["passed"] is None and "median 3.000" in base["figure"]
    # One under-count among exact counts fails: the exact band allows none.
    handmade_trace(d / "tok2.jsonl", provider="remote", provider_kind="remote", ratios=[0.99] + [1.0] * 4,
                   header_extra={"server": "llamacpp"}, scenario="tok2", counting=exact)
    code, out = _check([str(d), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    rows = {r["subject"]: r for r in out["conditions"][1]["rows"]}
    assert not out["conditions"][1]["passed"] and rows["remote:llamacpp [tokenizer, exact]: under-counts"][
        "passed"] is False
    # The default mode falling back to the calibrated estimate is held to the provider's band.
    handmade_trace(d / "cal.jsonl", provider="remote", provider_kind="remote", ratios=[1.1, 1.2, 1.6, 1.05],
                   header_extra={"server": "llamacpp"}, scenario="cal",
                   counting={"mode": "auto", "used": "calibrated", "exact": False})
    code, out = _check([str(d), "--config", str(setup["cfg"]), "--labels", str(setup["labels"])], capsys)
    rows = {r["subject"]: r for r in out["conditions"][1]["rows"]}
    assert rows["remote:llamacpp [calibrated]: median"]["threshold"] == "0.9–1.5"


def test_premature_stop_on_a_labelled_useful_run(setup, capsys) -> None:
    cfg = setup["tmp"] / "p2.toml"
    cfg.write_text(CONFIG.replace("patience = 4", "patience = 2"))
    code, out = _check([str(setup["good"]), "--config", str(cfg), "--labels", str(setup["labels"])], capsys)
    assert code == 1
    c1 = out["conditions"][0]
    assert c1["rows"][0]["value"] == 1 and "replayed no_progress stop at round 3" in c1["details"][0]


def test_deliberate_overruns_are_listed_not_counted(setup, capsys) -> None:
    slow = setup["tmp"] / "slow"
    handmade_trace(slow / "r.jsonl", provider="remote", provider_kind="remote", ratios=[1.1] * 4, overrun=3.0,
                   header_extra={"server": "x"}, scenario="on-purpose")
    cfg = setup["tmp"] / "d.toml"
    cfg.write_text(CONFIG.replace("max_count = 0", 'deliberate = ["on-purpose"]\nmax_count = 0'))
    code, out = _check([str(slow), str(setup["good"]), "--config", str(cfg), "--labels", str(setup["labels"])], capsys)
    assert code == 0, out
    c3 = out["conditions"][2]
    assert c3["rows"][0]["value"] == 0 and c3["rows"][1]["value"] == 3.0 and "deliberate" in c3["details"][0]


@pytest.mark.parametrize("text, where", [
    ("[divergence]\nmedian_mn = 1.0\n", ":2: divergence.median_mn"),
    ("[premature_stops]\n\npatience = 30\n", ":3: premature_stops.patience"),
    ("[premature_stops]\nnormalization = 'fancy'\n", ":2: premature_stops.normalization"),
    ("[overruns]\nmax_count = -1\n", ":2: overruns.max_count"),
    ("[overruns]\nmax_count = true\n", ":2: overruns.max_count"),
    ("[gates]\nx = 1\n", ":1: gates"),
    ("[divergence]\nmedian_min = 2.0\nmedian_max = 1.0\n", ":2: divergence.median_min"),
    ('[divergence.providers."local*"]\nmedian = 1.0\n', ":2: divergence.providers.local*.median"),
    ("[divergence]\nmedian_min = = 1\n", ":2"),
    ("[overruns]\n\nmax_count = " + "9" * 5000 + "\n", ":3: overruns.max_count: not valid TOML: an integer of more than"),
])
def test_malformed_config_exits_2_with_file_line_key(setup, text: str, where: str, capsys) -> None:
    with pytest.raises(UserInputError) as err:
        parse_config(text, "gate.toml")
    assert err.value.describe().startswith("gate.toml" + where), err.value.describe()
    cfg = setup["tmp"] / "bad.toml"
    cfg.write_text(text)
    assert main(["check", str(setup["good"]), "--config", str(cfg)]) == 2
    err_out = capsys.readouterr().err
    assert f"{cfg}{where}" in err_out and "Traceback" not in err_out


def test_unusable_inputs_exit_2(setup, capsys) -> None:
    assert main(["check", str(setup["tmp"] / "missing"), "--config", str(setup["cfg"])]) == 2
    empty = setup["tmp"] / "empty"
    empty.mkdir()
    assert main(["check", str(empty), "--config", str(setup["cfg"])]) == 2
    labels = setup["tmp"] / "bad-labels.yaml"
    labels.write_text("runs:\n  x: {loops: [2, 1]}\n")
    assert main(["check", str(setup["good"]), "--config", str(setup["cfg"]), "--labels", str(labels)]) == 2
    assert f"{labels}:2: runs.x.loops" in capsys.readouterr().err


def test_committed_config_is_valid() -> None:
    cfg = load_config(ROOT / "reports" / "gate.toml")
    # the gate replays real runs at the shipped patience
    assert cfg.premature_stops["patience"] == SPECS["chat.research_no_progress_rounds"].default == 9
    assert cfg.thresholds_for("local")["median_max"] < cfg.thresholds_for("remote:llamacpp")["median_max"]
    for f in cfg.inputs["labels"]:
        assert (ROOT / f).is_file(), f


def test_condition_1_judges_every_source_and_its_loop_recall(setup, capsys) -> None:
    # a second source: a looping run and a useful one (the lull again, 1 of 2 premature at patience 3)
    logs = setup["tmp"] / "logs"
    lull = [[{"result": fact(1)}]] * 4 + [[{"result": fact(2)}], [{"result": fact(3)}]]
    round_log(logs / "lull.jsonl", lull)
    round_log(logs / "lull2.jsonl", lull)
    round_log(logs / "fine.jsonl", [[{"result": fact(n)}] for n in range(10, 16)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    strict = setup["tmp"] / "labels-strict.yaml"
    strict.write_text("runs:\n  lull: {should_not_stop_before: 6}\n")
    other = setup["tmp"] / "labels-other.yaml"
    other.write_text("runs:\n  lull2: {should_not_stop_before: 6}\n  fine: {should_not_stop_before: 6}\n"
                     "  loop: {loops: [3, 4]}\n")
    cfg = setup["tmp"] / "c.toml"
    cfg.write_text(CONFIG.replace("patience = 4\n", 'patience = 3\nstrict = ["strict"]\nmax_premature_share = 0.5\n'
                                                    "loop_recall_goal = 0.8\nloop_slack = 0\n")
                   + "\n[loop_recall_baseline]\nother = {recall = 1.0, caught = 1, loops = 1, commit = 'abc1234'}\n")
    code, out = _check([str(logs), "--config", str(cfg), "--labels", str(strict), "--labels", str(other)], capsys)
    c1 = out["conditions"][0]
    rows = {r["subject"]: r for r in c1["rows"]}
    assert list(rows) == ["other: premature stops", "other: loop recall", "strict: premature stops"]
    assert rows["other: premature stops"]["figure"] == "1 of 2 useful runs (50.0%; 95% interval 9.5%–90.5%)" and rows["other: premature stops"]["passed"]
    assert rows["strict: premature stops"]["figure"] == "1 of 1 useful runs (100.0%; 95% interval 20.7%–100.0%)"
    assert rows["strict: premature stops"]["threshold"] == "≤ 0 (strict)" and not rows["strict: premature stops"]["passed"]
    # patience 3 stops the loop at round 5: one round past it, and the slack is 0
    assert rows["other: loop recall"]["figure"] == "0 of 1 loops caught (0.0%; 95% interval 0.0%–79.3%)"
    assert rows["other: loop recall"]["threshold"] == "≥ baseline 100% (1/1, abc1234); goal ≥ 80%, not gated"
    assert not rows["other: loop recall"]["passed"]
    assert code == 1 and not c1["passed"]
    assert any("other: logs/loop: loop(s) 3-4 not caught (replayed stop: round 5)" in d for d in c1["details"])
    # a slack of one round catches it; the human-readable form names the corpus and its figures
    cfg.write_text(cfg.read_text().replace("loop_slack = 0", "loop_slack = 1"))
    _, out = _check([str(logs), "--config", str(cfg), "--labels", str(strict), "--labels", str(other)], capsys)
    assert {r["subject"]: r for r in out["conditions"][0]["rows"]}["other: loop recall"]["passed"]
    assert main(["check", str(logs), "--config", str(cfg), "--labels", str(strict), "--labels", str(other)]) == 1
    text = capsys.readouterr().out
    assert "strict: premature stops" in text and "1 of 1 useful runs (100.0%; 95% interval 20.7%–100.0%)" in text and "FAILS" in text


def test_the_gate_replays_with_any_novelty_field(setup, capsys) -> None:
    cfg = setup["tmp"] / "n.toml"
    # near-duplicates at half the text: every fact after the first is a near-copy of it, so the lull's run
    # stops at round 5 (premature)
    cfg.write_text(CONFIG + "\n[premature_stops.novelty]\nnear_duplicate = 'containment'\n"
                   "near_duplicate_threshold = 0.5\n")
    code, out = _check([str(setup["good"]), "--config", str(cfg), "--labels", str(setup["labels"])], capsys)
    assert code == 1 and out["conditions"][0]["rows"][0]["figure"] == "1 of 1 useful runs (100.0%; 95% interval 20.7%–100.0%)"
    assert "near_duplicate_threshold=0.5" in out["conditions"][0]["details"][-1]
    for text, where in [("[premature_stops.novelty]\nno_such_field = 4\n", ":2: premature_stops.novelty.no_such_field"),
                        ("[premature_stops.novelty]\ncontainment_threshold = 3.0\n",
                         ":2: premature_stops.novelty.containment_threshold"),
                        ("[premature_stops]\nnovelty = {normalization = 'none'}\n", ":2: premature_stops.novelty")]:
        with pytest.raises(UserInputError) as err:
            parse_config(text, "gate.toml")
        assert err.value.describe().startswith("gate.toml" + where), err.value.describe()


def test_committed_config_judges_every_labelled_corpus() -> None:
    cfg = load_config(ROOT / "reports" / "gate.toml")
    ps = cfg.premature_stops
    assert (ps["max_premature_share"], ps["loop_recall_goal"]) == (0.10, 0.8) and "tau-bench" in ps["strict"]
    # the replay settings are the shipped defaults, read from the settings, not restated
    assert (ps["patience"], ps["rule"]) == (SPECS["chat.research_no_progress_rounds"].default,
                                            SPECS["chat.research_stop_rule"].default)
    # every baseline was pinned for the shipped rule
    assert {b.get("rule") for b in cfg.loop_recall_baseline.values()} == {SPECS["chat.research_stop_rule"].default}
    assert not cfg.warnings
    assert set(cfg.loop_recall_baseline) >= {"tau-bench", "mini-swe-agent", "who-and-when"}
    assert {Path(f).name for f in cfg.inputs["labels"]} >= {"labels-tau-bench.yaml", "labels-mini-swe-agent.yaml",
                                                              "labels-who-and-when.yaml"}


def _logs(tmp: Path) -> Path:
    logs = tmp / "logs"
    round_log(logs / "fine.jsonl", [[{"result": fact(n)}] for n in range(10, 16)])
    round_log(logs / "loop.jsonl", [[{"result": fact(5)}], [{"result": fact(6)}]] + [[{"result": fact(5)}]] * 8)
    return logs


def test_loop_recall_gates_only_against_its_pinned_baseline(setup, capsys) -> None:
    """The goal is shown and never gates; a recall below the pinned baseline
    fails, one at it holds; no baseline: shown, not gated."""
    logs, other = _logs(setup["tmp"]), setup["tmp"] / "labels-other.yaml"
    other.write_text("runs:\n  fine: {should_not_stop_before: 6}\n  loop: {loops: [3, 4]}\n")
    cfg = setup["tmp"] / "b.toml"
    for baseline, ok in ((None, True), (0.0, True), (1.0, False)):
        table = "" if baseline is None else f"\n[loop_recall_baseline]\nother = {{recall = {baseline}}}\n"
        cfg.write_text(CONFIG.replace("patience = 4\n", "patience = 3\nloop_slack = 0\n") + table)
        _, out = _check([str(logs), "--config", str(cfg), "--labels", str(other)], capsys)
        row = {r["subject"]: r for r in out["conditions"][0]["rows"]}["other: loop recall"]
        assert row["value"] == 0.0 and row["goal"] == 0.8 and row["goal_met"] is False
        assert row["passed"] is ok, (baseline, row)
        assert ("no baseline pinned" in row["threshold"]) is (baseline is None)


def test_a_pinned_replay_setting_that_differs_from_the_shipped_default_warns() -> None:
    shipped = SPECS["chat.research_no_progress_rounds"].default
    cfg = parse_config("[premature_stops]\npatience = 4\nrule = 'gemini-cli'\n", "g.toml")
    assert len(cfg.warnings) == 2 and "g.toml:2: premature_stops.patience = 4" in cfg.warnings[0]
    assert "chat.research_stop_rule" in cfg.warnings[1]
    assert not parse_config(f"[premature_stops]\npatience = {shipped}\n", "g.toml").warnings
    for text, where in [("[loop_recall_baseline]\nx = 3\n", ":2: loop_recall_baseline.x"),
                        ("[loop_recall_baseline]\nx = {recall = 2.0}\n", ":2: loop_recall_baseline.x.recall"),
                        ("[loop_recall_baseline]\nx = {caught = 1}\n", ":2: loop_recall_baseline.x.recall"),
                        ("[loop_recall_baseline.x]\nrecall = 0.5\nwho = 1\n", ":3: loop_recall_baseline.x.who")]:
        with pytest.raises(UserInputError) as err:
            parse_config(text, "gate.toml")
        assert err.value.describe().startswith("gate.toml" + where), err.value.describe()


def test_check_judges_another_rule_with_rule_and_param(setup, capsys) -> None:
    logs, other = _logs(setup["tmp"]), setup["tmp"] / "labels-other.yaml"
    other.write_text("runs:\n  fine: {should_not_stop_before: 6}\n")
    code, out = _check([str(logs), "--config", str(setup["cfg"]), "--labels", str(other), "--rule", "round-cap",
                        "--param", "max_rounds=2"], capsys)
    assert code == 1 and "rule round-cap, max_rounds=2" in out["conditions"][0]["details"][-1]
    assert out["conditions"][0]["rows"][0]["figure"].startswith("1 of 1 useful runs")
    assert main(["check", str(logs), "--config", str(setup["cfg"]), "--labels", str(other), "--rule", "round-cap",
                 "--param", "max_round=2", "--json"]) == 2


def test_a_baseline_pinned_on_other_labels_says_to_re_measure(setup, capsys) -> None:
    logs, other = _logs(setup["tmp"]), setup["tmp"] / "labels-other.yaml"
    other.write_text("runs:\n  loop: {loops: [3, 4]}\n")
    cfg = setup["tmp"] / "m.toml"
    cfg.write_text(CONFIG + "\n[loop_recall_baseline]\nother = {recall = 0.0, caught = 0, loops = 3}\n")
    _, out = _check([str(logs), "--config", str(cfg), "--labels", str(other)], capsys)
    assert any("3 labelled loops then, 1 now" in d for d in out["conditions"][0]["details"])


def test_token_overruns_are_judged_on_the_shipped_counting_mode_and_listed_for_baselines(tmp_path, capsys) -> None:
    from harness.analysis.gate.conditions import divergence
    from harness.analysis.frames.load import Frames
    import pandas as pd
    rows = [{"run": "a", "provider": "remote:x", "role": "coordinator", "id": 1, "round": 1, "reserved": 100.0,
             "charged": 130.0, "counting_mode": "auto"},
            {"run": "b", "provider": "remote:x", "role": "coordinator", "id": 1, "round": 1, "reserved": 100.0,
             "charged": 150.0, "counting_mode": "byte"},
            {"run": "c", "provider": "stub", "role": "coordinator", "id": 1, "round": 1, "reserved": 100.0,
             "charged": 500.0, "counting_mode": "auto"}]
    from harness.analysis.frames.columns import REQUEST_COLUMNS, RUN_COLUMNS
    frames = Frames(requests=pd.DataFrame(rows, columns=REQUEST_COLUMNS), tool_calls=pd.DataFrame(),
                    rounds=pd.DataFrame(), runs=pd.DataFrame(columns=RUN_COLUMNS), files=[], warnings=[])
    cfg = parse_config("[divergence]\nexclude = ['stub']\n", "g.toml")
    c = divergence(frames, cfg)
    judged = next(r for r in c.rows if r["subject"] == "token charges past the reservation")
    assert judged["value"] == 1 and not judged["passed"] and not c.passed
    base = next(r for r in c.rows if r["subject"].endswith("[baselines]"))
    assert base["passed"] is None and "largest 50 tokens" in base["figure"]
    assert any("a: request 1" in d and "30 past it" in d for d in c.details)
    ok = divergence(frames, parse_config("[divergence]\nexclude = ['stub']\nmax_overruns = 1\n", "g.toml"))
    assert next(r for r in ok.rows if r["subject"] == "token charges past the reservation")["passed"]
