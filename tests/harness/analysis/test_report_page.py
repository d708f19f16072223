"""The report as a page to show a team (issue 44, item 9): it opens with the
gate's verdict and the run it judged, compares the rules on its own runs
(pooled, one row a rule, before each corpus), keeps its tables inside the
page, counts a recorded session and its replay once, lists a regression
under the run it came from once, pairs the policies on one scenario only,
and links only what a reader can open."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.compare import DEFAULT_RULES, dodge
from harness.analysis.frames.load import load_frames
from harness.analysis.report.inputs import policy_pairs
from harness.analysis.report.sections import _link_to
from harness.analysis.report.tables import runs_table
from harness.analysis.gate.overruns import token_overrun_row
from harness.cli import main

from reportdata import RAIN, fact, gate_toml, page_sections, round_log, run_inline, web_runs

GATE = gate_toml(3, ["labels-web.yaml", "regressions.yaml"])


@pytest.fixture()
def labelled(tmp_path: Path, monkeypatch) -> Path:
    """One corpus, `web`: a useful run the rule stops early (lull), a loop it
    misses, a run it gets right; and `lull` stored again as a regression."""
    monkeypatch.chdir(tmp_path)
    web_runs(tmp_path / "logs", "lull", "fine", "loop")
    (tmp_path / "labels-web.yaml").write_text(
        "runs:\n  logs/lull: {should_not_stop_before: 6}\n  logs/fine: {should_not_stop_before: 6}\n"
        "  logs/loop: {loops: [[9, 10]]}\n")
    (tmp_path / "regressions").mkdir()
    shutil.copy(tmp_path / "logs" / "lull.jsonl", tmp_path / "regressions" / "lull.jsonl")
    (tmp_path / "regressions.yaml").write_text(
        "runs:\n  regressions/lull: {should_not_stop_before: 6, source: logs/lull.jsonl}\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "gate.toml").write_text(GATE)
    return tmp_path


def test_the_page_opens_with_the_gate_s_verdict_and_the_judged_run(labelled: Path) -> None:
    assert main(["report", "logs", "regressions", "--out", "out"]) == 0
    page = (labelled / "out" / "index.html").read_text()
    title, body = page_sections(page)[0]
    assert title == "Release gate"
    banner = re.search(r'<p class="verdict (pass|fail)">(.*?)</p>', body).groups()
    assert banner[0] == "fail" and "Gate FAILS" in banner[1] and "condition 1" in banner[1]
    assert "Judged run: none (only the TRACES given)" in banner[1]
    # its table holds every line `imprint check` prints, with the verdict of each
    assert "<td>FAILS</td>" in body and "<td>condition</td>" not in body
    # which stop rule ships, and where its decision is recorded
    assert "The stop rule shipped (the default of <code>chat.research_stop_rule</code>) is <code>repeat-aware</code>" \
        in body and "0102-amendment-repeat-aware.md" in body
    summary = (labelled / "out" / "summary.md").read_text()
    assert summary.index("## Release gate") < summary.index("## Stop rule accuracy")
    assert "**Gate FAILS" in summary


def test_the_rules_are_compared_on_the_report_s_own_runs_pooled_first(labelled: Path) -> None:
    assert main(["report", "logs", "--out", "out"]) == 0
    page = (labelled / "out" / "index.html").read_text()
    body = dict(page_sections(page))["Stop rules compared"]
    assert "Computed by this report at" in body and "--corpus logs --labels labels-web.yaml" in body
    assert "reports/compare" not in body
    captions = re.findall(r"<caption>(.*?)</caption>", body)
    assert captions[0].startswith("pooled over every corpus") and captions[1].startswith("per corpus")
    pooled = body.split("</table>", 1)[0]
    assert pooled.count("<tr>") == len(DEFAULT_RULES)               # one row a rule (the header is styled)
    assert (labelled / "out" / "compare.png").exists()


def test_a_stored_comparison_says_where_and_when_it_came_from(labelled: Path) -> None:
    assert main(["compare", "--corpus", "logs", "--labels", "labels-web.yaml", "--holdout", "0",
                 "--no-disk-cache", "--out", "cmp"]) == 0
    assert main(["report", "logs", "--compare", "cmp/compare.json", "--out", "out"]) == 0
    body = dict(page_sections((labelled / "out" / "index.html").read_text()))["Stop rules compared"]
    assert "not this report&#x27;s runs: read from cmp/compare.json, written 20" in body


def test_a_regression_is_listed_once_under_the_run_it_came_from(labelled: Path) -> None:
    assert main(["report", "logs", "regressions", "--out", "out"]) == 0
    body = dict(page_sections((labelled / "out" / "index.html").read_text()))["Stop rule accuracy"]
    items = re.findall(r"<li>(.*?)</li>", body)
    assert len([i for i in items if "lull" in i]) == 1
    assert "also the regression regressions/lull" in body
    assert "<td>regressions</td>" in body            # its corpus is still judged on its own


def test_tables_wrap_inside_the_page(labelled: Path) -> None:
    assert main(["report", "logs", "--out", "out"]) == 0
    page = (labelled / "out" / "index.html").read_text()
    assert page.count("<table") == page.count('<div class="table-wrap"><table')
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "nowrap" not in css and "overflow-x:auto" in css.split(".table-wrap{", 1)[1].split("}", 1)[0]


def test_a_recorded_session_and_its_replay_count_once(tmp_path: Path) -> None:
    reqs = pd.DataFrame([{"run": run, "scenario": "remote-x", "provider": "remote:llamacpp", "id": 1,
                          "role": "coordinator", "attempt": 0, "round": 1, "reserved": 231, "charged": 288}
                         for run in ("llamacpp/remote-x.trace", "run-1/remote-x")])
    row = token_overrun_row(reqs)
    assert row["value"] == 1 and "1 request(s) in 1 run(s)" in row["figure"]
    d = tmp_path / "t"
    run_inline(RAIN.format(name="policy-reserve", policy="reserve"), "policy-reserve", d / "cassettes")
    run_inline(RAIN.format(name="policy-reserve", policy="reserve"), "policy-reserve", d / "run")
    assert len(runs_table(load_frames([d]))) == 1


def test_the_policies_are_paired_on_one_scenario_only(tmp_path: Path) -> None:
    d = tmp_path / "t"
    run_inline(RAIN.format(name="remote-reserve-policy", policy="reserve"), "remote-reserve-policy", d)
    run_inline(RAIN.format(name="server-error", policy="prefix-refund"), "server-error", d)
    assert policy_pairs(load_frames([d])) == []            # the same question, another scenario: no pair
    run_inline(RAIN.format(name="remote-prefix-refund", policy="prefix-refund"), "remote-prefix-refund", d)
    (a, b, how), = policy_pairs(load_frames([d]))
    assert (a["name"], b["name"], how) == ("remote-reserve-policy", "remote-prefix-refund", "the same scenario")


def test_links_say_a_gz_is_a_download_and_a_committed_report_skips_ignored_runs(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("/runs/\n/reports/run/\n")
    round_log(tmp_path / "runs" / "r1" / "a.jsonl", [[{"result": fact(1)}]])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.traj.json.gz").write_bytes(b"")
    committed, scratch = tmp_path / "reports" / "latest", tmp_path / "reports" / "run"
    ignored = _link_to(tmp_path / "runs" / "r1" / "a.jsonl", committed, True)
    assert ignored.href is None and "ignored by git: not linked from a committed report" in ignored.note
    assert _link_to(tmp_path / "runs" / "r1" / "a.jsonl", scratch, False).href == "../../runs/r1/a.jsonl"
    gz = _link_to(tmp_path / "data" / "b.jsonl", committed, True)     # a raw trajectory converted in memory
    assert gz.href == "../../data/b.traj.json.gz" and "↓ .gz: a download" in gz.note


def test_markers_that_would_coincide_are_spread_apart() -> None:
    offsets = dodge([(0.0, 0.0), (0.5, 0.0), (0.0, 0.4), (50.0, 80.0), None])
    placed = [(x + dx, y + dy) for (x, y), (dx, dy) in zip([(0, 0), (0.5, 0), (0, 0.4), (50, 80)], offsets)]
    assert offsets[3] == (0.0, 0.0) and offsets[4] == (0.0, 0.0)    # alone: in its place
    near = placed[:3]
    assert min(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5 for i, a in enumerate(near) for b in near[i + 1:]) > 4


def test_the_compare_plot_draws_each_point_where_errorbar_would_in_two_collections() -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PathCollection
    from harness.analysis.compare import _draw_points, _legend_handle
    points = [((10.0, 40.0, 5.0, 18.0, 30.0, 55.0), "o", "red"), ((60.0, 2.0, 60.0, 70.0, 0.0, 9.0), "^", "blue")]
    fig, (ref, ours) = plt.subplots(1, 2)
    for (x, y, x0, x1, y0, y1), m, c in points:
        ref.errorbar([x], [y], xerr=[[x - x0], [x1 - x]], yerr=[[y - y0], [y1 - y]], fmt=m, color=c, capsize=2)
    _draw_points(ours, points)
    bars, marks = ours.collections
    assert isinstance(bars, LineCollection) and isinstance(marks, PathCollection) and not ours.lines
    want_bars = [s.tolist() for col in ref.collections for s in col.get_segments()]
    assert [s.tolist() for s in bars.get_segments()] == want_bars
    caps = [xy for line in ref.lines if line.get_marker() in ("|", "_") for xy in line.get_xydata().tolist()]
    centres = [line.get_xydata().tolist()[0] for line in ref.lines if line.get_marker() in ("o", "^")]
    assert marks.get_offsets().tolist() == caps + centres          # caps first, the markers drawn above them
    assert marks.get_zorder() > bars.get_zorder()
    faces = marks.get_facecolors()
    assert (faces[:len(caps), 3] == 0).all() and (faces[len(caps):, 3] > 0).all()   # caps unfilled, markers filled
    handle = _legend_handle("o", "red")
    assert handle.has_xerr and handle.has_yerr and handle.lines[0].get_marker() == "o"
    plt.close(fig)
