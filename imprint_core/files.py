"""Files written so that a crash never leaves half of one."""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


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
