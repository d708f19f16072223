"""The terminal: rich consoles that do not squeeze tables into logs and pipes."""
from __future__ import annotations

import os


def console(stderr: bool = False):
    from rich.console import Console
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(stderr=stderr, highlight=False, width=220)  # logs and pipes: don't squeeze the table
    return out
