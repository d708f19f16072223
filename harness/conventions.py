"""What every part of the harness agrees on: where the repository is, and
what an exit status means.

Every `imprint` command exits 0 on success, 1 when a check fails, 2 on
unusable input (the message names the file, line and key; never a
traceback) and 3 on an internal error."""
from __future__ import annotations

from pathlib import Path

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
