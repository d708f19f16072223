"""`imprint report`: the page, the summary and the plots, from every provider present."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.analysis.frames.load import load_frames
from harness.analysis.report.page import write_report
from harness.analysis.report.inputs import policy_pairs, select_runs
from harness.analysis.report.tables import estimate_stats

from reportdata import fact, handmade_trace, round_log, scenario_traces

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    scenario_traces(d / "runs")
    handmade_trace(d / "local" / "l.jsonl", provider="local", provider_kind="local", ratios=[1.0, 1.0, 1.01, 0.99],
                   scenario="local-run")
    handmade_trace(d / "cassettes" / "llamacpp" / "r.jsonl", provider="remote", provider_kind="remote",
                   ratios=[1.3, 1.1, 0.9, 1.2], overrun=4.0, header_extra={"server": "llamacpp"}, scenario="recorded")
    round_log(d / "logs" / "3-1.jsonl", [[{"result": fact(1)}]] * 6)
    return d


def test_page_summary_and_every_plot(inputs: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report"
    assert main(["report", str(inputs), "--out", str(out)]) == 0
    assert "3 trace" not in capsys.readouterr().out  # 6 traces, three providers
    page = (out / "index.html").read_text(encoding="utf-8")
    images = re.findall(r'<img src="([^"]+)"', page)
    # compare.png: the rules compared on the labelled runs among these inputs, computed by the report itself
    assert sorted(images) == sorted(["compare.png", "estimates-scatter.png", "estimates-ratio.png", "policy-compare.png",
                                     "budget-per-round.png", "novelty-timeline.png", "stops.png", "overshoot.png"])
    for name in images:
        assert (out / name).read_bytes()[:8] == PNG, name
    assert "<script" not in page and "http://" not in page and "https://" not in page  # self-contained
    for provider in ("stub", "local", "remote:llamacpp"):
        assert provider in page
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## Estimated against measured prompt tokens" in summary
    assert "| provider | requests | median | p95 |" in summary
    for name in images:
        assert f"]({name})" in summary


def test_estimate_table_per_provider(inputs: Path) -> None:
    stats = estimate_stats(load_frames([inputs])).set_index("provider")
    assert stats.loc["local", "median"] == 1.0 and stats.loc["local", "requests"] == 4
    assert stats.loc["remote:llamacpp", "under-counts"] == "25.0%"
    assert stats.loc["remote:llamacpp", "worst under-count"].startswith("0.900 (900 est. / 1000 meas.")
    assert stats.loc["remote:llamacpp", "worst over-count"].startswith("1.300")


def test_policy_pair_is_the_same_script_under_both_policies(inputs: Path) -> None:
    pairs = policy_pairs(load_frames([inputs]))
    assert len(pairs) == 1
    a, b, how = pairs[0]
    assert (a["name"], b["name"], how) == ("policy-reserve", "policy-prefix-refund", "the same scenario")
    assert a["charged"] == a["reserved"] and b["charged"] < b["reserved"]


def test_selection_spreads_stop_reasons(inputs: Path) -> None:
    frames = load_frames([inputs])
    budget = select_runs(frames, 6, purpose="budget")
    assert {r["stop_reason"] for r in budget} >= {"token_budget", "time_budget", "no_progress", "answered"}
    novelty = select_runs(frames, 6, purpose="novelty")
    assert novelty[0]["name"] == "stagnant-writes"          # a no-progress stop with writes first
    assert any(r["source"] == "roundlog" for r in novelty)
    assert [r["name"] for r in select_runs(frames, 6, ["overrun"], "novelty")] == ["overrun"]


def test_missing_data_gives_notes_not_broken_images(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    round_log(d / "a.jsonl", [[{"result": fact(1)}], [{"result": fact(1)}]])
    out = tmp_path / "r"
    (out).mkdir()
    (out / "estimates-scatter.png").write_bytes(b"stale")
    write_report(load_frames([d]), out)
    page = (out / "index.html").read_text(encoding="utf-8")
    assert not (out / "estimates-scatter.png").exists()
    assert "No traces of our runs among the inputs, only round logs" in page    # the trace sections, left out
    assert "Estimated against measured prompt tokens" not in page
    for name in re.findall(r'<img src="([^"]+)"', page):
        assert (out / name).exists()


def test_help_and_unusable_input(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["report", "--help"])
    assert ex.value.code == 0 and "imprint report" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
