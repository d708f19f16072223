"""SIGKILL at random moments: traces stay readable (at most an incomplete
last line, which the reader reports), the settings file is never corrupted,
and a re-run starts cleanly."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import tomlkit

from imprint_core.trace import read_trace

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 20

LONG = """\
name: long-{n}
question: q
provider:
  kind: stub
  script:
    - repeat: 40
      calls: [{{tool: search, args: {{query: "topic ${{i}}"}}}}, {{tool: save, args: {{note: "n${{i}}"}}}}]
    - answer: done
tools:
  - name: search
    default: {{text: "document about ${{query}} with words that are unique to ${{query}} and call ${{n}}"}}
  - name: save
    kind: write
    default: {{text: "saved ${{note}}"}}
expect:
  stop_reason: answered
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _wait_until(predicate, limit: float = 20.0) -> None:
    end = time.monotonic() + limit
    while not predicate() and time.monotonic() < end:
        time.sleep(0.002)  # polling a real subprocess; nothing here waits on a budget


def test_sigkill_during_run_leaves_readable_traces(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for n in range(8):
        (scenarios / f"long-{n}.yaml").write_text(LONG.format(n=n), encoding="utf-8")
    rng = random.Random(20261130)
    truncated_seen = interrupted = 0
    for trial in range(TRIALS):
        runs = tmp_path / f"runs-{trial}"
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(scenarios), "--traces", str(runs)],
                                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
        target_files, target_bytes = rng.randint(1, 8), rng.randint(0, 60_000)

        def reached() -> bool:
            files = sorted(runs.glob("*/*.jsonl"))
            return len(files) >= target_files and files[-1].stat().st_size >= target_bytes if files else False
        _wait_until(lambda: reached() or proc.poll() is not None)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for trace in runs.glob("*/*.jsonl"):
            parsed = read_trace(trace)  # raises on anything but an incomplete last line
            assert len(parsed.warnings) <= 1
            truncated_seen += len(parsed.warnings)
            assert parsed.header.format == "imprint-trace/1"
        interrupted += not list(runs.glob("*/summary.json"))
        for summary in runs.glob("*/summary.json"):
            assert summary.read_text().rstrip().endswith("}")
        # A run folder under its final name is complete: no temporary file in it, and its summary.json is there.
        finals = [d for d in runs.glob("*") if not d.name.startswith(".")]
        assert not [t for d in finals for t in d.glob(".*.tmp")], "no temporary file may survive in a finished run"
        assert all((d / "summary.json").is_file() for d in finals)
    assert interrupted >= TRIALS // 2, f"only {interrupted} of {TRIALS} kills landed mid-run"
    # A clean re-run after all that.
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenarios), "--traces",
                           str(tmp_path / "rerun")], env=_env(), capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "8 passed, 0 failed" in proc.stdout


SETTER = """
import sys
from imprint_core.settings import Settings
s = Settings(sys.argv[1])
i = 0
while True:
    i += 1
    s.set("chat.research_no_progress_rounds", 2 + i % 19)
    s.set("chat.research_timeout_sec", 10 + i % 3000)
"""


def test_sigkill_during_settings_writes_never_corrupts(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("# keep me\n[chat]\nmax_tool_iters = 12\nresearch_no_progress_rounds = 4\n", encoding="utf-8")
    rng = random.Random(7)
    for _ in range(TRIALS):
        before = cfg.stat().st_mtime_ns
        proc = subprocess.Popen([sys.executable, "-c", SETTER, str(cfg)], env=_env())
        _wait_until(lambda: cfg.stat().st_mtime_ns != before)
        end = time.monotonic() + rng.uniform(0.0, 0.15)
        _wait_until(lambda: time.monotonic() >= end)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        doc = tomlkit.parse(cfg.read_text(encoding="utf-8"))
        assert 2 <= doc["chat"]["research_no_progress_rounds"] <= 20
        assert doc["chat"]["max_tool_iters"] == 12
        assert cfg.read_text(encoding="utf-8").startswith("# keep me\n")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "config.toml"]
    # A killed writer can leave its own temp file behind, never a damaged config.
    assert all(n.startswith(".config.toml.") and n.endswith(".tmp") for n in leftovers)
