"""`imprint compare` and `imprint tune` without --out write where git does
not look (reports/run/, ignored by the checkout's .gitignore), never over
the committed reports/compare/ and reports/tune/."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main

from reportdata import fact, round_log

REPO = Path(__file__).resolve().parents[3]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_no_out_leaves_the_checkout_clean(tmp_path: Path, monkeypatch, capsys, command) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    data = tmp_path / "data"        # the corpus, outside the checkout
    round_log(data / "useful.jsonl", [[{"result": fact(n), "args": {"q": str(n)}}] for n in range(1, 8)])
    round_log(data / "loop.jsonl", [[{"result": fact(1)}]] * 9)
    labels = tmp_path / "labels-mine.yaml"
    labels.write_text("runs:\n  useful: {should_not_stop_before: 7}\n  loop: {loops: [2, 9]}\n")
    repo = tmp_path / "checkout"    # the repository's own .gitignore and committed reports
    for rel in (".gitignore", f"reports/{command}/command.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, repo / rel)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    monkeypatch.chdir(repo)
    argv = {"compare": ["compare", "--corpus", str(data), "--labels", str(labels), "--rule", "gemini-cli",
                        "--holdout", "0", "--no-disk-cache"],
            "tune": ["tune", "--corpus", str(data), "--labels", str(labels), "--patience", "3,4", "--jobs", "1",
                     "--no-disk-cache", "--strict", "none"]}[command]
    assert main(argv) == 0, capsys.readouterr().err
    assert (repo / "reports" / "run" / command / "command.txt").is_file()
    assert (repo / f"reports/{command}/command.txt").read_text() == (REPO / f"reports/{command}/command.txt").read_text()
    assert _git(repo, "status", "--porcelain") == ""
