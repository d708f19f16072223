"""What every part of the harness agrees on: where the repository is, what
an exit status means, and which files a list of paths names.

Every `imprint` command exits 0 on success, 1 when a check fails, 2 on
unusable input (the message names the file, line and key; never a
traceback) and 3 on an internal error."""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from imprint_core.errors import UserInputError
from imprint_core.files import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout this package was installed from: in a second clone sharing one
install it is the other clone, and in a non-editable install it is
site-packages, so no command reads or writes its files through it. Default
inputs and outputs go through `workdir()`, cassettes through the checkout of
their scenario file."""


def workdir() -> Path:
    """Where a command's default paths (corpora, labels, gate config, reports)
    are read and written: the current folder, as `regress` and `check` have
    always done, so that every command of one checkout sees the same files."""
    return Path.cwd()


EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def write_output(path: str | Path, text: str, *, key: str, example: str) -> Path:
    """A command's output file written atomically (its folders made). A
    folder standing where the file goes, or a folder that cannot hold it, is
    the user's mistake, named with the option `key`, never a crash."""
    path = Path(path)
    if path.is_dir():
        raise UserInputError("is a folder, not a file to write", file=str(path), key=key,
                             expected=f"the path of a file, e.g. {example}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing="write the output", key=key, file=str(path),
                                           expected=f"the path of a file that can be written, e.g. {example}") from None
    return path


LOCK_WAIT_SEC = 120.0
"""How long a writer waits for another one to finish with the same files."""


@contextlib.contextmanager
def locked(target: Path, *, command: str, what: str, key: str | None = None, expected: str,
           wait: float = LOCK_WAIT_SEC) -> Iterator[None]:
    """Hold `target`'s lock (one `command` at a time reads, checks and
    replaces its files). The lock file lives in the temporary folder, named
    by the target's real path, so that the repository gets no litter; a
    lock that cannot be had names the target."""
    from filelock import FileLock, Timeout
    digest = hashlib.blake2b(str(Path(target).resolve()).encode(), digest_size=8).hexdigest()
    lock_path = Path(tempfile.gettempdir()) / "imprint-locks" / f"{command.replace(' ', '-')}-{digest}.lock"
    try:
        if not lock_path.parent.is_dir():
            lock_path.parent.mkdir(exist_ok=True)
            with contextlib.suppress(OSError):
                os.chmod(lock_path.parent, 0o1777)   # every user's locks, like the temporary folder itself
        lock = FileLock(str(lock_path), timeout=wait, mode=0o666)
        lock.acquire()
    except Timeout:
        raise UserInputError(f"another `imprint {command}` has held the {what}'s lock for {wait:g} s",
                             file=str(target), expected=f"one `imprint {command}` at a time") from None
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing=f"lock the {what}", key=key, expected=expected,
                                           file=str(target)) from None
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True)
class ListedFile:
    """A file that a list of paths names: named itself, or found in a named folder."""
    path: Path
    folder: Path | None = None
    """The named folder it was found in; None for a file named itself."""

    @property
    def named(self) -> bool:
        return self.folder is None

    @property
    def relative(self) -> Path:
        """Its path below the named folder; a named file's is its name."""
        return Path(self.path.name) if self.folder is None else self.path.relative_to(self.folder)


def natural_order(path: Path | str) -> str:
    """Sort key: numbers in a path compare as numbers (`run-9` before
    `run-10`), so a folder's runs come in the order their producer numbered
    them; names that hold no numbers sort as text. The path is cut into
    chunks at `/ - _ .`; a chunk of digits sorts as its number, before any
    text. The key is one string (a chunk's kind, a number's digit count and
    digits, or the text, each chunk ended by NUL), ordered as the tuple of
    the chunks would be: at 100,000 files a tuple a file held some 150 MB
    while they were sorted."""
    text = path.as_posix() if isinstance(path, Path) else path.replace(os.sep, "/")
    parts = []
    for chunk in text.replace("-", "/").replace("_", "/").replace(".", "/").split("/"):
        if chunk.isdigit():
            digits = str(int(chunk)).lstrip("0")      # as int() reads it: leading zeros and all
            parts.append(f"\x01{len(digits):08d}{digits}\x00")
        else:
            parts.append(f"\x02{chunk}\x00")
    return "".join(parts)


def expand_paths(paths: Iterable[str | Path], wanted: Callable[[str], bool], *,
                 recursive: bool = True) -> list[ListedFile]:
    """Every file that `paths` name, in the order named: a path that is not a
    folder is taken as given; a folder gives its files whose name `wanted`
    accepts, below it (`recursive`) or directly in it, hidden files and
    folders skipped, in `natural_order`. A path that does not exist is a
    `UserInputError` naming it."""
    return list(iter_paths(paths, wanted, recursive=recursive))


def iter_paths(paths: Iterable[str | Path], wanted: Callable[[str], bool], *,
               recursive: bool = True) -> Iterator[ListedFile]:
    """`expand_paths`, a file at a time: a folder's files are listed and
    sorted as text, and each becomes a `Path` only when it is reached (a
    `Path` a file, at 100,000 files, held some 120 MB)."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found: list[str] = []
            for top, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if recursive else []
                found += [f for f in (os.path.join(top, name) for name in files
                                      if not name.startswith(".") and wanted(name)) if os.path.isfile(f)]
            found.sort(key=natural_order)
            for f in found:
                yield ListedFile(Path(f), p)
        elif p.exists():
            yield ListedFile(p)
        else:
            raise UserInputError("no such file or directory", file=str(p))
