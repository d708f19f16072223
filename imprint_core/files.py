"""Files written so that a crash never leaves half of one, and JSON Lines
read line by line."""
from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Any, Iterator

import jsonlines

from .errors import digits_exceeded, too_many_digits


def atomic_write_text(path: Path, text: str) -> None:
    """Write beside the target, fsync, then rename over it: a reader (or a
    crash) sees the old file or the new one, never half of either. A new file
    gets the mode any file would (0666 less the umask; mkstemp's 0600 would
    hide reports from other users); a replaced one keeps its mode."""
    path = Path(path)
    try:
        keep = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        keep = None
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        if keep is not None:
            os.chmod(fd, keep)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# ---- sets of files, and folders written under a temporary name ---------------------------------
STAGING = ".imprint-staging"   # <STAGING>-<tag>-<pid>-<hex>: a folder not yet complete, owned by <pid>


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # someone else's process: alive
        return True
    return True


def staging_dir(parent: Path, tag: str) -> Path:
    """A new hidden folder in `parent` for what this process writes before
    it is complete; clean_stale removes it once the process is gone."""
    parent = Path(parent)
    while True:
        d = parent / f"{STAGING}-{tag}-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue


def owner_pid(path: Path) -> int | None:
    """The pid a staging folder belongs to (None: not a staging folder)."""
    name = Path(path).name
    if not name.startswith(STAGING + "-"):
        return None
    parts = name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def clean_stale(parent: Path) -> list[Path]:
    """Remove the staging folders in `parent` whose process is gone (a crash's
    leftovers: never a complete result); returns what was removed."""
    removed = []
    try:
        entries = list(Path(parent).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for p in entries:
        pid = owner_pid(p)
        if pid is not None and pid != os.getpid() and not _alive(pid):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _writable_ancestor(folder: Path) -> None:
    """Raise the OSError that creating a file in `folder` would meet, before anything is written."""
    p = folder
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    if not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(p))
    if not os.access(p, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "folder not writable", str(p))


def write_files(root: Path, files: dict[Path, str], *, tag: str = "write") -> list[Path]:
    """Write `files` (paths relative to `root`) as one unit: all of them, or
    none (a failure restores what was there). Each is written complete in a
    staging folder under `root`, every destination is checked, then each is
    renamed into place; an existing file is kept as a hard link until all
    are in. A crash leaves the staging folder (clean_stale) and files under
    their final names that are each complete."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    clean_stale(root)
    stage = staging_dir(root, tag)
    try:
        for i, (rel, text) in enumerate(files.items()):
            fd = os.open(stage / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for rel in files:
            dest = root / rel
            if dest.is_dir():
                raise IsADirectoryError(errno.EISDIR, "a folder stands where the file goes", str(dest))
            _writable_ancestor(dest.parent)
        moved: list[tuple[Path, Path | None]] = []
        try:
            for i, rel in enumerate(files):
                dest = root / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                old = None
                if dest.exists():
                    old = stage / f"{i}.old"
                    os.link(dest, old)
                    os.chmod(stage / str(i), stat.S_IMODE(dest.stat().st_mode))  # a replaced file keeps its mode
                os.replace(stage / str(i), dest)
                moved.append((dest, old))
        except BaseException:
            for dest, old in reversed(moved):
                if old is not None:
                    os.replace(old, dest)
                else:
                    dest.unlink(missing_ok=True)
            raise
        return [root / rel for rel in files]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux's renameat2 RENAME_EXCHANGE);
    False where the system or the file system cannot."""
    import ctypes
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_cwd, exchange = -100, 2       # AT_FDCWD, RENAME_EXCHANGE
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_in(stage: Path, target: Path) -> None:
    """Put the complete folder `stage` (a staging_dir beside `target`) in
    `target`'s place, whole: a reader, or a crash at any point, sees the old
    folder or the new one, never a mix. The folders are exchanged in one
    rename where the system can (Linux), else the old one is renamed aside
    first (a crash between the two renames leaves no `target`, the old
    folder under a staging name); the old folder is then removed."""
    stage, target = Path(stage), Path(target)
    if not target.exists():
        os.rename(stage, target)
        return
    if target.is_dir() and not target.is_symlink():
        os.chmod(stage, stat.S_IMODE(target.stat().st_mode))   # the folder keeps its mode
    if not _exchange(stage, target):
        aside = staging_dir(target.parent, "old")
        os.rename(target, aside / "x")
        os.rename(stage, target)
        stage = aside
    shutil.rmtree(stage, ignore_errors=True)   # now the old folder


class UnreadableJSON(ValueError):
    """JSON the decoder took apart but Python cannot hold (a mistake in the
    input, not a crash); its text says what, as the rest of a sentence."""


class NestedTooDeep(UnreadableJSON):
    """A JSON line nested past the decoder's recursion limit."""

    def __str__(self) -> str:
        return "nested too deeply"


class NumberTooLong(UnreadableJSON):
    """An integer past Python's digit limit (int() refuses it)."""

    def __str__(self) -> str:
        return too_many_digits()


def loads_json(text: str | bytes) -> Any:
    """json.loads, with what it cannot read that is no JSON syntax error
    raised as an UnreadableJSON (a RecursionError and the digit limit's
    ValueError would otherwise pass for a crash)."""
    try:
        return json.loads(text)
    except RecursionError:  # jsonlines turns only a ValueError into an InvalidLineError
        raise NestedTooDeep() from None
    except ValueError as exc:
        if digits_exceeded(exc):
            raise NumberTooLong() from None
        raise



def json_lines(text: str | bytes) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each line of JSON Lines text that is not
    blank, read with `jsonlines`. Lines end at "\n" only, as every writer
    here writes them: `str.splitlines` would also end one at U+2028, \x1c
    and the like, which a JSON string may hold unescaped, and so misnumber
    (or break) the lines after. A line that is not JSON raises
    `jsonlines.InvalidLineError` (`.lineno`, `.line`; its `__cause__` is
    the decoder's error, or an `UnreadableJSON`); `null` is a value like any
    other."""
    no = 0

    def numbered() -> Iterator[str | bytes]:
        nonlocal no
        for no, line in enumerate(text.split(b"\n" if isinstance(text, bytes) else "\n"), start=1):
            yield line

    # The reader takes one line per value, so `no` is the line it last read.
    reader = jsonlines.Reader(numbered(), loads=loads_json)
    for value in reader.iter(allow_none=True, skip_empty=True):
        yield no, value
