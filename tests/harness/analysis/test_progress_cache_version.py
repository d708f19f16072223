"""The disk cache's code version covers every source that decides progress."""
from __future__ import annotations

from pathlib import Path

from harness.analysis.sweep import cache as progresscache


def test_the_code_version_changes_with_the_sweeps_judging_and_the_compiled_path(monkeypatch):
    read = Path.read_bytes
    before = progresscache.code_version.__wrapped__()
    for name in ("work.py", "compiled.pyx", "rule.py"):
        monkeypatch.setattr(Path, "read_bytes", lambda p, n=name: read(p) + (b"#" if p.name == n else b""))
        assert progresscache.code_version.__wrapped__() != before, name
    monkeypatch.setattr(Path, "read_bytes", read)
    assert progresscache.code_version.__wrapped__() == before
