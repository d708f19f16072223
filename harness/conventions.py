"""What every part of the harness agrees on: where the repository is, and
what an exit status means.

Every `imprint` command exits 0 on success, 1 when a check fails, 2 on
unusable input (the message names the file, line and key; never a
traceback) and 3 on an internal error."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
