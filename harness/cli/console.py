"""The terminal: rich consoles that do not squeeze tables into logs and pipes."""
from __future__ import annotations

import contextlib


LOG_WIDTH = 100_000
"""Off a terminal (a CI log, a pipe, a file) there is no width to fit: tables
are drawn as wide as their content, whatever COLUMNS says, so that no column
is squeezed, wrapped or cut."""


def console(stderr: bool = False):
    from rich.console import Console
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal:
        out = Console(stderr=stderr, highlight=False, width=LOG_WIDTH)
    return out


@contextlib.contextmanager
def progress(command: str, description: str, *, enabled: bool = True):
    """A spinner with the elapsed time on stderr while a long step runs, as
    `imprint run` and `imprint import` show their bars: only on a terminal
    (logs, pipes and captured output get nothing), and gone when it ends."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    err = console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn(f"[bold]imprint {command}"), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=not enabled or not err.is_terminal) as bar:
        task = bar.add_task(description, total=None)
        yield lambda text: bar.update(task, description=text)   # the next step's description
