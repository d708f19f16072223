"""imprint_core.files.write_files: a set of files written as one unit."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from imprint_core import files as files_mod
from imprint_core.files import STAGING, clean_stale, owner_pid, staging_dir, write_files


def state(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_failure_on_the_way_in_restores_what_was_there(tmp_path, monkeypatch, fail_at):
    (tmp_path / "a.txt").write_text("old a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("old b")
    before = state(tmp_path)
    real, calls = os.replace, [0]

    def replace(src, dst):
        calls[0] += 1
        if calls[0] == fail_at:
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst)
    monkeypatch.setattr(files_mod.os, "replace", replace)
    with pytest.raises(OSError):
        write_files(tmp_path, {Path("a.txt"): "new a", Path("sub/b.txt"): "new b", Path("c/d.txt"): "new d"})
    monkeypatch.setattr(files_mod.os, "replace", real)
    assert state(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGING)]


def test_every_destination_is_checked_before_the_first_rename(tmp_path):
    (tmp_path / "blocked").write_text("a file where a folder goes")
    with pytest.raises(NotADirectoryError):
        write_files(tmp_path, {Path("a.txt"): "a", Path("blocked/b.txt"): "b"})
    assert state(tmp_path) == {"blocked": "a file where a folder goes"}
    with pytest.raises(IsADirectoryError):
        (tmp_path / "adir").mkdir()
        write_files(tmp_path, {Path("a.txt"): "a", Path("adir"): "b"})
    assert not (tmp_path / "a.txt").exists()


def test_all_are_written_and_a_replaced_file_keeps_its_mode(tmp_path):
    (tmp_path / "a.txt").write_text("old")
    os.chmod(tmp_path / "a.txt", 0o640)
    written = write_files(tmp_path, {Path("a.txt"): "new", Path("x/y/z.txt"): "z"})
    assert written == [tmp_path / "a.txt", tmp_path / "x/y/z.txt"]
    assert state(tmp_path) == {"a.txt": "new", "x/y/z.txt": "z"}
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640


def test_only_the_staging_folders_of_gone_processes_are_cleaned(tmp_path):
    mine = staging_dir(tmp_path, "t")
    assert owner_pid(mine) == os.getpid()
    gone = tmp_path / f"{STAGING}-t-999999999-abcdef"
    gone.mkdir()
    other = tmp_path / "not-staging-123"
    other.mkdir()
    assert clean_stale(tmp_path) == [gone]
    assert mine.exists() and other.exists() and owner_pid(other) is None


# ---- swap_in: a folder replaced whole ---------------------------------------------------------------
@pytest.mark.parametrize("exchange", [True, False], ids=["one-exchange", "two-renames"])
def test_swap_in_replaces_a_folder_whole_and_keeps_its_mode(tmp_path, monkeypatch, exchange):
    from imprint_core.files import swap_in
    if not exchange:       # a system without renameat2's exchange: the old folder is renamed aside first
        monkeypatch.setattr(files_mod, "_exchange", lambda a, b: False)
    target = tmp_path / "report"
    target.mkdir()
    (target / "old.png").write_text("old")
    target.chmod(0o750)
    stage = staging_dir(tmp_path, "report")
    (stage / "new.png").write_text("new")
    swap_in(stage, target)
    assert state(target) == {"new.png": "new"} and (target.stat().st_mode & 0o777) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]        # the old folder and the stage gone
    fresh = staging_dir(tmp_path, "report")
    (fresh / "a").write_text("a")
    swap_in(fresh, tmp_path / "new-folder")                                  # nothing there yet: a rename
    assert state(tmp_path / "new-folder") == {"a": "a"}
