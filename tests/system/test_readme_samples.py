"""The README's sample output is the commands' own: each block between
`<!-- sample: NAME -->` and `<!-- /sample -->` is what its command prints
now, so its figures cannot drift from the code. After a change that moves
them, regenerate the blocks and commit them:

    IMPRINT_UPDATE_SAMPLES=1 .venv/bin/python -m pytest tests/system/test_readme_samples.py
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

SAMPLES = {
    # three stub scenarios of the library, as `make run` prints each of its scenarios (off a terminal)
    "run": ["run", "scenarios/01-answer-at-round-1.yaml", "scenarios/05-cycle-abab.yaml",
            "scenarios/21-time-budget-during-stream.yaml", "--run-id", "sample"],
}


def generate(name: str, tmp: Path) -> str:
    argv = SAMPLES[name]
    env = {**os.environ, "COLUMNS": "132", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "harness.cli", *argv, "--traces", str(tmp)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    text = (done.stderr + done.stdout).replace(str(tmp), "traces/runs")     # the progress lines come first
    text = re.sub(r"(round\(s\)), \d+\.\d+ s\)", r"\1, … s)", text)       # wall time, the one figure that varies
    shown = "imprint " + " ".join(a for a in argv if a not in ("--run-id", "sample"))
    body = "\n".join(line.rstrip() for line in text.strip("\n").splitlines())
    return f"```\n$ {shown}\n{body}\n```"


def blocks(text: str) -> dict[str, tuple[int, int, str]]:
    out = {}
    for m in re.finditer(r"<!-- sample: (\S+)[^>]*-->\n(.*?)\n<!-- /sample -->", text, re.S):
        out[m.group(1)] = (m.start(2), m.end(2), m.group(2))
    return out


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_readme_sample_is_what_the_command_prints(name: str, tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    found = blocks(text)
    assert name in found, f"README.md: no <!-- sample: {name} --> block"
    want = generate(name, tmp_path)
    start, end, have = found[name]
    if have != want and os.environ.get("IMPRINT_UPDATE_SAMPLES"):
        README.write_text(text[:start] + want + text[end:], encoding="utf-8")
        have = want
    assert have == want, ("README.md's sample is stale; regenerate it with IMPRINT_UPDATE_SAMPLES=1 "
                          "(see this test's docstring)")
