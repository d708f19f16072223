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


def natural_order(path: Path) -> tuple:
    """Sort key: numbers in a path compare as numbers (`run-9` before
    `run-10`), so a folder's runs come in the order their producer numbered
    them; names that hold no numbers sort as text."""
    parts = []
    for chunk in path.as_posix().replace("-", "/").replace("_", "/").replace(".", "/").split("/"):
        parts.append((0, int(chunk), "") if chunk.isdigit() else (1, 0, chunk))
    return tuple(parts)


def expand_paths(paths: Iterable[str | Path], wanted: Callable[[str], bool], *,
                 recursive: bool = True) -> list[ListedFile]:
    """Every file that `paths` name, in the order named: a path that is not a
    folder is taken as given; a folder gives its files whose name `wanted`
    accepts, below it (`recursive`) or directly in it, hidden files and
    folders skipped, in `natural_order`. A path that does not exist is a
    `UserInputError` naming it."""
    out: list[ListedFile] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = [f for f in (p.rglob("*") if recursive else p.iterdir()) if wanted(f.name) and f.is_file()
                     and not any(part.startswith(".") for part in f.relative_to(p).parts)]
            out.extend(ListedFile(f, p) for f in sorted(found, key=natural_order))
        elif p.exists():
            out.append(ListedFile(p))
        else:
            raise UserInputError("no such file or directory", file=str(p))
    return out
