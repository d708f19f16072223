"""The layering contract: `harness` uses `imprint_core`, never the other way
round, the core stays light at import time, and the harness sub-packages
form layers without cycles (pyproject.toml, `[tool.importlinter]`)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pandas", "matplotlib", "vcr", "torch", "transformers")
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with `cwd`'s packages and pyproject.toml (it puts the
    working directory first on sys.path)."""
    pytest.importorskip("importlinter", reason="import-linter is in the `test` extra")
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True)


def test_the_contract_holds() -> None:
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_contract_fails_when_the_core_imports_the_harness(tmp_path: Path) -> None:
    for name in ("imprint_core", "harness"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    assert _lint(tmp_path).returncode == 0  # the copy alone passes
    budget = tmp_path / "imprint_core" / "budget.py"
    budget.write_text(budget.read_text(encoding="utf-8") + "\nfrom harness.conventions import REPO_ROOT\n",
                      encoding="utf-8")
    proc = _lint(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "imprint_core never imports harness BROKEN" in proc.stdout
    assert "imprint_core.budget -> harness.conventions" in proc.stdout


def test_importing_the_core_imports_no_heavy_package() -> None:
    """Function-level imports are allowed (the local provider imports torch
    and transformers when it loads a model); module-level ones are not."""
    code = ("import importlib, pkgutil, sys, imprint_core\n"
            "for m in pkgutil.walk_packages(imprint_core.__path__, 'imprint_core.'):\n"
            "    importlib.import_module(m.name)\n"
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_contract_fails_on_an_import_circle_between_sibling_modules(tmp_path: Path) -> None:
    for name in ("imprint_core", "harness"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    stops = tmp_path / "harness" / "analysis" / "sweep" / "stops.py"   # compare imports sweep.stops: back again is a circle
    stops.write_text(stops.read_text(encoding="utf-8") + "\nfrom .. import compare  # noqa\n", encoding="utf-8")
    proc = _lint(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no import circle between sibling modules anywhere in imprint_core or harness BROKEN" in proc.stdout


def test_atomic_write_text_is_imported_from_files_only() -> None:
    """One home for the atomic write: nothing reaches it through a module that merely imports it."""
    import re
    wrong = [f"{p.relative_to(ROOT)}: {line.strip()}"
             for folder in ("imprint_core", "harness", "benchmarks", "tests")
             for p in sorted((ROOT / folder).rglob("*.py"))
             for line in p.read_text(encoding="utf-8").splitlines()
             if re.search(r"import .*\batomic_write_text\b", line) and not re.search(r"from (imprint_core|\.)?\.?files import", line)]
    assert wrong == []
