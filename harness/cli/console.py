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


def progress_lines(command: str, unit: str, total: int, *, file=None, steps: int = 10):
    """Where a bar cannot show (a log, a pipe): a plain line on stderr each
    time another `1/steps` of `total` is done, `imprint compare: 30% (9,371 of
    31,236 rule × run pairs) after 41 s`. Returns `advance(n)`."""
    import sys
    import time
    start, done, shown = time.monotonic(), 0, 0

    def advance(n: int) -> None:
        nonlocal done, shown
        done += n
        reached = steps if total <= 0 else min(steps, done * steps // total)
        if reached > shown:
            shown = reached
            share = 100 if total <= 0 else min(100, 100 * done // total)
            print(f"imprint {command}: {share}% ({done:,} of {total:,} {unit}) after "
                  f"{time.monotonic() - start:.0f} s", file=file or sys.stderr, flush=True)
    return advance


def say(command: str, text: str, *, file=None) -> None:
    """A step's line on stderr, off a terminal (a terminal gets a spinner or a bar instead)."""
    import sys
    if not console(stderr=True).is_terminal:
        print(f"imprint {command}: {text}", file=file or sys.stderr, flush=True)
