"""The report over labelled runs: the stop rule's accuracy first, labels on
the timelines, distinct panel names, no empty section; and the plots that
misled (write markers, the policy pair's scales, the overshoot's maximum)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.analysis.report import plots as reportplots
from harness.analysis.report import tables as reporttables
from harness.analysis.report import timelines as reporttimelines
from harness.analysis.frames.load import load_frames
from harness.cli import main

from reportdata import gate_toml, handmade_trace, page_sections, web_runs

GATE = gate_toml(3, ["labels-web.yaml"])


@pytest.fixture()
def labelled(tmp_path: Path, monkeypatch) -> Path:
    """Round logs of one corpus, `web`: a useful run the rule stops early,
    one it lets run, a loop it misses, and a run of the same name in
    another folder."""
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    web_runs(logs, "a/lull", "b/lull", "a/loop")
    (tmp_path / "labels-web.yaml").write_text(
        "runs:\n  a/lull: {should_not_stop_before: 6}\n  b/lull: {should_not_stop_before: 6}\n"
        "  a/loop: {loops: [[9, 10]]}\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "gate.toml").write_text(GATE)
    return tmp_path


def test_labelled_round_logs_open_with_the_accuracy_section(labelled: Path, capsys) -> None:
    assert main(["report", "logs", "--out", "out"]) == 0
    assert "3 labelled" in capsys.readouterr().out
    page = (labelled / "out" / "index.html").read_text()
    sections = page_sections(page)
    assert sections[0][0] == "Release gate"            # the gate's verdict opens the page, then the accuracy
    title, body = sections[1]
    assert title == "Stop rule accuracy"
    assert "<td>web</td>" in body and "1 of 2 useful runs" in body and "0 of 1 (0%)" in body
    assert "replayed at patience 3" in body
    # each failing run is named with what went wrong and links to its file
    links = dict(re.findall(r'<li><a href="([^"]+)">web: ([^<]+)</a>', body))
    assert sorted(links.values()) == ["a/loop", "a/lull"]
    for href in links:
        assert (labelled / "out" / href).resolve().is_file()
    assert "replayed no_progress stop at round 4, labelled useful until round 6" in body
    assert '<img src="accuracy-timelines.png"' in body and (labelled / "out" / "accuracy-timelines.png").exists()


def test_no_section_is_left_empty(labelled: Path) -> None:
    assert main(["report", "logs", "--out", "out"]) == 0
    page = (labelled / "out" / "index.html").read_text()
    for title, body in page_sections(page):
        assert re.search(r"<(img|table|ul|p)\b", body), f"section {title!r} is empty"
    assert "Stop reasons" not in page                          # nothing to show without traces: left out
    assert "No traces of our runs among the inputs" in page    # and said why
    summary = (labelled / "out" / "summary.md").read_text().splitlines()
    assert not [line for line in summary if line.strip() in (">", "")  and line.startswith(">")]
    headings = [i for i, line in enumerate(summary) if line.startswith("## ")]
    for i, j in zip(headings, headings[1:] + [len(summary)]):
        assert any(line.strip() for line in summary[i + 1:j]), summary[i]


def test_labels_and_distinct_names_on_the_timelines(labelled: Path, monkeypatch) -> None:
    frames = load_frames([labelled / "logs"], patience=3)
    runs = frames.runs.to_dict("records")
    titles = reporttimelines.panel_titles(runs)
    assert len(set(titles)) == len(titles) and {"a/lull", "b/lull"} <= set(titles)
    drawn = {}
    monkeypatch.setattr(reportplots, "save", lambda fig, path: drawn.setdefault(path.name, fig) and path)

    class Label:
        loops, should_not_stop_before = ((9, 10),), 6
    loop = next(r for r in runs if r["run"].endswith("loop"))
    reporttimelines.plot_novelty(frames, labelled, [loop], labels={loop["run"]: Label()})
    ax = drawn["novelty-timeline.png"].axes[0]
    spans = [p.get_x() for p in ax.patches if p.get_facecolor()[:3] == pytest.approx((0xc0 / 255, 0x39 / 255, 0x2b / 255))]
    assert 8.5 in [round(x, 2) for x in spans]                  # the loop 9-10, shaded from 8.5
    assert any(line.get_xdata()[0] == 6.5 for line in ax.lines)  # useful until round 6
    assert "label: a loop" in [t.get_text() for t in drawn["novelty-timeline.png"].legends[0].get_texts()]


def test_write_markers_do_not_merge() -> None:
    assert reporttimelines.write_groups([1, 2, 3, 4, 6, 7, 9], ["write", "write", "write", "read", "write", "write", "ask"]) \
        == [(1, 3), (6, 7)]


def test_the_overshoot_plot_shows_the_tables_maximum(tmp_path: Path, monkeypatch) -> None:
    handmade_trace(tmp_path / "t" / "late.jsonl", provider="stub", provider_kind="stub", ratios=[1.0], overrun=0.04)
    frames = load_frames([tmp_path / "t"])
    assert reporttables.overshoot_table(frames)["largest (s)"].iloc[0] == 0.04
    drawn = {}
    monkeypatch.setattr(reportplots, "save", lambda fig, path: drawn.setdefault(path.name, fig) and path)
    reportplots.plot_overshoot(frames, tmp_path, {"stub": "#777"})
    texts = [t.get_text() for t in drawn["overshoot.png"].axes[0].texts]
    assert any(t.startswith("max 0.04 s") for t in texts), texts


def test_the_policy_pair_keeps_each_scale_and_counts_requests_whole(tmp_path: Path, monkeypatch) -> None:
    from reportdata import scenario_traces
    scenario_traces(tmp_path / "t")
    frames = load_frames([tmp_path / "t"])
    drawn = {}
    monkeypatch.setattr(reportplots, "save", lambda fig, path: drawn.setdefault(path.name, fig) and path)
    reportplots.plot_policies(frames, tmp_path)
    axes = drawn["policy-compare.png"].axes
    for ax in axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        top = ax.get_ylim()[1]
        curves = max(max(line.get_ydata(), default=0) for line in ax.lines if len(line.get_xdata()) > 1)
        assert curves >= top / 3        # the curves fill the panel: a far budget does not flatten them
