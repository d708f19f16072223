"""A format added by a package outside harness/ (issue 43, item 4): the
fixture `tests/fixtures/importer_plugin/` is an installed distribution (a
dist-info with an entry point in `imprint.importers`) beside its package;
on the path, its format is detected and imported by `imprint import`, with
no change to harness/."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imprint_core.errors import UserInputError
from harness.realruns.importers import registry
from harness.realruns.importers.convert import detect, import_file

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "tests" / "fixtures" / "importer_plugin"
STEPS = [{"tool": "search", "args": {"q": "tides"}, "result": "high tide at 6"},
         {"tool": "search", "args": {"q": "tides"}, "result": ""}]


@pytest.fixture
def plugin_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    registry.reload()
    yield
    monkeypatch.undo()
    registry.reload()


def _run_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "task-1.json"
    path.write_text(json.dumps({"demo_agent": "demo", "steps": STEPS}))
    return path


def test_imprint_import_detects_and_converts_a_format_an_installed_package_adds(tmp_path):
    run = _run_file(tmp_path / "runs")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(run.parent), "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in (out / "task-1.jsonl").read_text().splitlines()]
    assert lines[0]["labels"]["source_format"] == "demo-agent" and len(lines) == 3
    assert [c["status"] for line in lines[1:] for c in line["calls"]] == ["ok", "empty"]
    # named with --format too, and listed among the formats a wrong file is told about
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(run), "--out", str(tmp_path / "o2"),
                           "--format", "demo-agent"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"neither": 1}')
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "import", str(bad), "--out", str(tmp_path / "o3")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "demo-agent" in proc.stderr


def test_an_entry_point_format_is_tried_after_the_built_in_ones(plugin_on_path, tmp_path):
    assert registry.names()[-1] == "demo-agent" and registry.builtin_names() == registry.names()[:-1]
    run = _run_file(tmp_path)
    assert detect(json.loads(run.read_text())) == "demo-agent"
    [log] = import_file(run)
    assert log.labels["agent"] == "demo" and len(log.rounds) == 2
    # a file of a built-in format is still that format
    assert detect([{"role": "user", "content": "hi"}]) == "openai-chat"


def test_without_the_package_the_format_is_unknown(tmp_path):
    registry.reload()
    assert "demo-agent" not in registry.names()
    with pytest.raises(UserInputError, match="unknown format 'demo-agent'"):
        import_file(_run_file(tmp_path), fmt="demo-agent")


def _distribution(root: Path, value: str) -> None:
    info = root / "broken_format-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-format\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[imprint.importers]\nbroken = {value}\n")


@pytest.mark.parametrize("value, message", [("no_such_module_xyz:FORMAT", "cannot be loaded"),
                                            ("json:dumps", "is no importable format")])
def test_a_broken_entry_point_is_an_error_naming_it(monkeypatch, tmp_path, value, message):
    _distribution(tmp_path, value)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reload()
    try:
        with pytest.raises(UserInputError, match=message) as info:
            registry.names()
        assert "'broken'" in info.value.message and info.value.key == "imprint.importers"
    finally:
        monkeypatch.undo()
        registry.reload()
