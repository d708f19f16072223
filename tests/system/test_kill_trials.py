"""kill -9 in the middle of `imprint import`, `imprint run` and `imprint
regress add`, and `regress add` twice at once.

Each trial forks the CLI (the modules already loaded, so a trial costs
milliseconds, not an interpreter's start) and the child SIGKILLs itself at
its k-th file system step (a write's fsync, a rename, a hard link, a
folder made), k = 1, 2, ...: every step of writing is a kill point, without
sleeping for a random moment. After each kill nothing under a final name is
half-written, and the next command cleans up and succeeds."""
from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from harness.cli import main, regress as regress_cli
from harness.realruns.labels import parse_labels
from harness.realruns.roundlogs import read_round_log
from imprint_core.events import RunEnd
from imprint_core.trace import read_trace

from harness.realruns.regressionstore import HEADER
from helpers import CONFIG, DAY, chat_run, mini_swe
from reportdata import fact

TRIALS = 12
STEPS = ("fsync", "replace", "rename", "link", "mkdir")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks the CLI")


def _quiet() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def forked(argv: list[str], kill_at: int | None = None) -> int:
    """Run `imprint argv` in a child; with `kill_at`, the child kills itself
    (SIGKILL) at that file system step. The child's exit status, or -9."""
    pid = os.fork()
    if pid == 0:                                     # the child: never returns into pytest
        code = 70
        try:
            _quiet()
            if kill_at is not None:
                count = [0]
                for name in STEPS:
                    real = getattr(os, name)

                    def step(*a, _real=real, **kw):
                        count[0] += 1
                        if count[0] == kill_at:
                            os.kill(os.getpid(), signal.SIGKILL)
                        return _real(*a, **kw)
                    setattr(os, name, step)
            code = main(argv)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def kill_trials(argv: list[str], check) -> int:
    """Kill at step 1, 2, ... until the command gets through; `check()` after
    each kill. Returns how many kills landed (at least TRIALS are asked for)."""
    kills = 0
    for k in range(1, 200):
        code = forked(argv, kill_at=k)
        if code != -signal.SIGKILL:
            assert code == 0, f"the command failed after {kills} kills"
            break
        kills += 1
        check()
    return kills


# ---- import ---------------------------------------------------------------------------------------------------
def test_kill_during_import_leaves_no_partial_file_under_a_final_name(tmp_path):
    raw = tmp_path / "raw"
    for sub in ("", "a", "b"):
        (raw / sub).mkdir(parents=True, exist_ok=True)
        for i in range(2):
            (raw / sub / f"t{i}.traj.json").write_text(json.dumps(mini_swe()), encoding="utf-8")
    out = tmp_path / "out"

    def check():
        for f in out.rglob("*.jsonl"):
            if not any(part.startswith(".") for part in f.relative_to(out).parts):
                read_round_log(f)           # complete, or not there at all
    kills = 0
    while kills < TRIALS:
        kills += kill_trials(["import", str(raw), "--out", str(out)], check)
        assert len([f for f in out.rglob("*.jsonl") if ".imprint-staging" not in str(f)]) == 6
    # A crash's staging folder is gone after the next import; nothing hidden is left.
    assert forked(["import", str(raw), "--out", str(out)]) == 0
    assert not [p for p in out.rglob(".*")]


# ---- run ------------------------------------------------------------------------------------------------------
SCENARIO = """\
name: s{n}
question: q
provider:
  kind: stub
  script:
    - repeat: 6
      calls: [{{tool: search, args: {{query: "topic ${{i}}"}}}}]
    - answer: done
tools:
  - name: search
    default: {{text: "document about ${{query}} with words unique to ${{query}} and scenario {n}"}}
expect:
  stop_reason: answered
"""


def test_kill_during_run_leaves_no_run_folder_without_its_end(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for n in range(3):
        (scenarios / f"s{n}.yaml").write_text(SCENARIO.format(n=n), encoding="utf-8")
    runs = tmp_path / "runs"

    def check():
        for folder in runs.iterdir() if runs.exists() else ():
            if folder.name.startswith("."):
                continue                     # a staging folder: removed by the next run
            assert (folder / "summary.json").is_file()
            for trace in folder.glob("*.jsonl"):
                parsed = read_trace(trace)
                assert not parsed.warnings and isinstance(parsed.events[-1], RunEnd)
    kills = 0
    while kills < TRIALS:
        kills += kill_trials(["run", str(scenarios), "--traces", str(runs)], check)
    check()
    # The next run removes every crash's staging folder; the complete runs are all there.
    complete = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert forked(["run", str(scenarios), "--traces", str(runs)]) == 0
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]
    assert len(list(runs.iterdir())) == len(complete) + 1


# ---- regress add ----------------------------------------------------------------------------------------------
@pytest.fixture()
def labels_repo(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(regress_cli, "today", lambda: DAY)
    (tmp_path / "gate.toml").write_text(CONFIG.replace('labels = ["labels.yaml", "regressions.yaml"]',
                                                       'labels = ["regressions.yaml"]'))
    (tmp_path / "regressions.yaml").write_text(HEADER)
    return tmp_path


def add_argv(run: Path, name: str) -> list[str]:
    return ["regress", "add", str(run), "--useful-until", "2", "--name", name, "--store", "traces/regressions",
            "--labels", "regressions.yaml", "--config", "gate.toml"]


def stored_and_labelled(repo: Path) -> tuple[set[str], set[str]]:
    store = repo / "traces" / "regressions"
    logs = {p.stem for p in store.glob("*.jsonl")} if store.is_dir() else set()
    labels = parse_labels((repo / "regressions.yaml").read_text(), "regressions.yaml")
    return logs, {k.split("/", 1)[1] for k in labels.runs}


def test_kill_during_regress_add_leaves_no_label_without_its_run(labels_repo):
    """Each add is killed once, at a step that moves along with the trials,
    then run again: the killed one's leftovers (an orphan round log, a
    staging folder) never block it."""
    runs = [chat_run(labels_repo / "raw" / f"r{i}.json", [fact(i), fact(i + 100)]) for i in range(TRIALS)]
    kills = 0
    for i, run in enumerate(runs):
        kills += forked(add_argv(run, f"reg{i}"), kill_at=1 + i % 9) == -signal.SIGKILL
        logs, labelled = stored_and_labelled(labels_repo)
        assert labelled <= logs                      # a label always has its round log
        for p in (labels_repo / "traces" / "regressions").glob("*.jsonl"):
            read_round_log(p)
        assert forked(add_argv(run, f"reg{i}")) == 0 or f"reg{i}" in labelled
    assert kills >= 10
    logs, labelled = stored_and_labelled(labels_repo)
    assert labelled == {f"reg{i}" for i in range(TRIALS)} and logs == labelled


def test_concurrent_regress_adds_lose_no_label(labels_repo):
    pairs = 10
    runs = [chat_run(labels_repo / "raw" / f"c{i}.json", [fact(i), fact(i + 200)]) for i in range(2 * pairs)]
    for p in range(pairs):
        children = []
        for run, name in ((runs[2 * p], f"a{p}"), (runs[2 * p + 1], f"b{p}")):
            pid = os.fork()
            if pid == 0:
                code = 70
                try:
                    _quiet()
                    code = main(add_argv(run, name))
                finally:
                    os._exit(code)
            children.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
        assert codes == [0, 0]
    logs, labelled = stored_and_labelled(labels_repo)
    assert labelled == logs == {f"{s}{p}" for p in range(pairs) for s in "ab"}


# ---- what the gate and the report read -------------------------------------------------------------------------
def test_the_newest_run_is_the_newest_complete_one_and_incomplete_ones_are_named(tmp_path):
    from harness.cli.inputs import default_inputs, gate_inputs, incomplete_runs, latest_run_dir
    from imprint_core.files import STAGING, clean_stale
    runs = tmp_path / "runs"
    done, old_crash = runs / "20260101-000000-aaaa", runs / "20260301-000000-cccc"
    crash = runs / f"{STAGING}-20260201-000000-bbbb-999999999-abcdef"   # a process that cannot exist
    for d in (done, old_crash, crash):
        d.mkdir(parents=True)
        (d / "s.jsonl").write_text("{}\n")
    (done / "summary.json").write_text("{}\n")
    assert latest_run_dir(runs) == done
    assert incomplete_runs(runs) == sorted([crash, old_crash])
    paths, notes = gate_inputs({"traces": [], "latest_run": True, "runs_dir": str(runs), "round_logs": []})
    assert paths == [done] and len(notes) == 2 and all("incomplete run" in n for n in notes)
    assert default_inputs([], True, str(runs)) == [done]
    assert clean_stale(runs) == [crash] and not crash.exists() and old_crash.exists()


# ---- report ---------------------------------------------------------------------------------------------------
REPORT_STEPS = STEPS + ("unlink", "rmdir")
STRIDE = 3
"""Every third step is a kill point (and the last three: the swap), to keep the trials to some 15."""


def png_stub(stamp: bytes) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + stamp * 16 + b"IEND\xaeB`\x82"


def stub_plots(stamp: bytes, tick=lambda: None) -> None:
    """Plots as small PNGs marked with `stamp` (drawing is not what is on
    trial: the order of writes is), each written in two halves with `tick()`
    after each."""
    import matplotlib.figure

    def savefig(self, path, **kw):
        png = png_stub(stamp)
        with open(path, "wb") as fh:
            fh.write(png[:20])
            fh.flush()
            tick()                                      # a plot cut in the middle
            fh.write(png[20:])
        tick()
    matplotlib.figure.Figure.savefig = savefig


def forked_report(argv: list[str], kill_at: int | None = None) -> int:
    """`imprint argv` in a child with stub plots; with `kill_at`, the child
    SIGKILLs itself at that step (a file system step, a plot's middle or
    end, right after the folders are exchanged); without, a success exits
    with 100 + the number of steps it took."""
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            _quiet()
            from imprint_core import files
            count = [0]

            def tick() -> None:
                count[0] += 1
                if count[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

            stub_plots(b"new", tick)
            for name in REPORT_STEPS:
                real = getattr(os, name)

                def step(*a, _real=real, **kw):
                    tick()
                    return _real(*a, **kw)
                setattr(os, name, step)
            if hasattr(files, "_exchange"):
                real_exchange = files._exchange

                def exchange(*a):
                    done = real_exchange(*a)
                    tick()                              # swapped, the old folder not removed yet
                    return done
                files._exchange = exchange
            code = main(argv)
            if code == 0 and kill_at is None:
                code = 100 + min(count[0], 150)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def _undated(files: dict[str, bytes]) -> dict[str, bytes]:
    import re
    return {k: re.sub(rb"generated [0-9-]+ [0-9:]+ UTC", b"generated -", v) for k, v in files.items()}


def test_a_report_killed_anywhere_is_the_old_report_or_the_new_one_whole(tmp_path, monkeypatch):
    """`report` deleted the old plots, then wrote each PNG under its final
    name: killed, it left an index.html pointing at missing or cut PNGs
    (issue 45, item 16). Killed at steps all through its writing now, the
    folder holds the old report or the new one, each complete, and a file of
    the user's in it is kept."""
    import matplotlib.figure
    from reportdata import handmade_trace
    monkeypatch.chdir(tmp_path)         # no gate config: no labelled runs to judge, only the writes on trial
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", matplotlib.figure.Figure.savefig)   # restored after
    old_in, new_in = tmp_path / "old-in", tmp_path / "new-in"
    handmade_trace(old_in / "l.jsonl", provider="local", provider_kind="local", ratios=[1.0, 1.1], scenario="a")
    handmade_trace(old_in / "r.jsonl", provider="remote", provider_kind="remote", ratios=[1.3, 0.9], overrun=4.0,
                   header_extra={"server": "llamacpp"}, scenario="b")
    handmade_trace(new_in / "l.jsonl", provider="local", provider_kind="local", ratios=[1.0, 1.2, 0.9], scenario="c")
    out, ref = tmp_path / "reports" / "out", tmp_path / "ref"
    # The old report and the new one's reference, made here: the children fork from a warm process.
    stub_plots(b"old")
    assert main(["report", str(old_in), "--out", str(out), "--compare", "none"]) == 0
    (out / "screenshot.png").write_bytes(b"the user's")
    (out / "compare.png").write_bytes(png_stub(b"old"))     # an earlier report's plot that this one does not draw
    old = _files(out)
    stub_plots(b"new")
    assert main(["report", str(new_in), "--out", str(ref), "--compare", "none"]) == 0
    new = _undated({**_files(ref), "screenshot.png": b"the user's"})
    assert len([k for k in new if k.endswith(".png")]) >= 3 and "compare.png" not in new
    assert old["index.html"] != _files(ref)["index.html"]
    pristine = shutil.copytree(out, tmp_path / "pristine")
    argv = ["report", str(new_in), "--out", str(out), "--compare", "none"]
    steps = forked_report(argv) - 100
    shutil.rmtree(out)
    assert 10 < steps < 150, steps
    seen = {"old": 0, "new": 0}
    for k in sorted(set(range(1, steps + 1, STRIDE)) | {steps - 2, steps - 1, steps}):
        shutil.copytree(pristine, out)
        assert forked_report(argv, kill_at=k) == -signal.SIGKILL
        now = _files(out)
        if now == old:
            seen["old"] += 1
        else:
            assert _undated(now) == new, f"killed at step {k} of {steps}: neither the old report nor the new one"
            seen["new"] += 1
        shutil.rmtree(out)
    assert seen["old"] and seen["new"], seen
    # The next report removes what the killed ones left beside the folder.
    shutil.copytree(pristine, out)
    assert forked_report(argv) >= 100
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"] and _undated(_files(out)) == new
