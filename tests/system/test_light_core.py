"""A light core (issue 43, item 5): `pip install imprint-testbed` without
extras is what `imprint_core` imports, the testbed's packages (pandas,
matplotlib, dask, vcrpy, rich, ...) are the `harness` extra, and a scripted
research loop runs with the core alone."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HEAVY = {"pandas", "matplotlib", "dask", "vcrpy", "rich"}
OPTIONAL = {"torch", "transformers", "llguidance", "tokenizers", "jinja2", "gguf"}
"""Imported by the core only lazily, where a provider needs them: the local
model (the `local` extra) and a remote server's template counted exactly."""


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _core_imports() -> set[str]:
    """Top-level modules the core's sources import, anywhere in them."""
    found: set[str] = set()
    for path in (ROOT / "imprint_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"imprint_core", "__future__"}


def test_the_core_s_dependencies_are_what_it_imports():
    dists = packages_distributions()
    needed = {_name(d) for m in _core_imports() - OPTIONAL for d in dists.get(m, [m])}
    assert {_name(r) for r in PROJECT["dependencies"]} == needed


def test_the_harness_extra_holds_the_testbed_s_packages_and_the_core_none_of_them():
    core = {_name(r) for r in PROJECT["dependencies"]}
    harness = {_name(r) for r in PROJECT["optional-dependencies"]["harness"]}
    assert HEAVY <= harness and not harness & core
    extras = re.search(r"pip install .*-e '\.\[([^\]]*)\]'", (ROOT / "Makefile").read_text())
    assert extras and "harness" in extras.group(1).split(",")


def test_a_scripted_research_loop_runs_with_the_core_alone():
    """tests/system/core_alone.py refuses to import the harness and its extra's packages."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "system" / "core_alone.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"stop_reason": "no_progress", "final_mode": "synthesized", "rounds": 4,
                   "answer": "Finished in 1889; 330 m tall.", "loaded": []}


def test_installing_the_core_pulls_none_of_the_testbed_s_packages(tmp_path):
    """What `pip install .` would install into an empty environment, resolved
    against the package index (skipped where the index cannot be reached).
    Slow: a minute or two, most of it pip fetching metadata."""
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), str(ROOT)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and re.search(r"(?i)connection|network|unreachable|timed out|name resolution",
                                          proc.stderr):
        pytest.skip(f"the package index cannot be reached: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    installed = {_name(i["metadata"]["name"]) for i in json.loads(report.read_text())["install"]}
    assert "numpy" in installed and "httpx" in installed
    assert not installed & (HEAVY | {"vcrpy", "distributed", "scipy", "pydantic", "pyyaml"}), installed
