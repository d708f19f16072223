"""What the commands with sub-actions share (`imprint settings list`,
`imprint servers start`): each sub-action is a subparser of its own that
names its own function (`set_defaults(fn=...)`); `main` calls it."""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Callable

from imprint_core.errors import UserInputError

from ..conventions import EXIT_FAILED

Command = Callable[[argparse.Namespace], int]


def options_either_side(command: argparse.ArgumentParser,
                        add: Callable[[argparse.ArgumentParser], object]) -> argparse.ArgumentParser:
    """Options a command takes before its sub-action (`imprint settings --json
    list`) and after it (`imprint settings list --json`): `add` puts them on
    `command`, and on the parser returned, which the sub-actions take as a
    parent. After the action they default to nothing at all, so the
    sub-action's parser does not overwrite one given before it."""
    add(command)
    after = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    add(after)
    return after


def port(text: str) -> int:
    """`--port`: a TCP port number; argparse refuses anything else (exit 2)
    rather than the socket failing on it later."""
    value = int(text)   # argparse names a ValueError "invalid port value"
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range (0-65535)")
    return value


def failures_exit_1(*errors: type[Exception]) -> Callable[[Command], Command]:
    """For a sub-action whose work can fail for a reason that is not the
    user's input (a server that would not start, a replay that does not fit
    its cassette): one of `errors` prints one line and the command exits 1.
    A `UserInputError` is not caught here: it reaches `main`, which exits 2."""
    def wrap(fn: Command) -> Command:
        @functools.wraps(fn)
        def run(args: argparse.Namespace) -> int:
            try:
                return fn(args)
            except UserInputError:
                raise
            except errors as exc:
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_FAILED
        return run
    return wrap


def output_folder(path: str | Path, *, key: str | None, doing: str) -> Path:
    """Create the folder a sub-action writes into before its long work starts
    (a server, an install), so that a file in its place, or a folder that
    cannot be written, is refused at once by the option or variable `key`
    that named it (exit 2), not after minutes as an internal error."""
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing=doing, key=key, file=str(folder)) from None
    return folder
