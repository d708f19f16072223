"""Test modules import each other and the shared helpers by their file's name
(`from helpers import doc`, `from test_importers import mini_swe`), as pytest's
default import mode names them: a folder without `__init__.py` is put on
sys.path and the module is imported by its basename. pytest does that only
for the folders of the files it collects, so a run of one file could not
import a module of another folder; this puts tests/ and every folder holding
tests on sys.path first, so one file sees what the whole suite sees.

That is also why every test file's basename is unique across tests/, and why
these folders have no `__init__.py`: tests/harness/ is then no package and
cannot hide the real `harness`.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _test_folders() -> list[Path]:
    by_name: dict[str, list[Path]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(path)
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    if clashes:
        raise RuntimeError("test files must have unique basenames (they are imported by name): "
                           + "; ".join(", ".join(str(p.relative_to(TESTS)) for p in sorted(paths))
                                       for paths in clashes.values()))
    return sorted({p.parent for paths in by_name.values() for p in paths} | {TESTS})


for _folder in reversed(_test_folders()):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
