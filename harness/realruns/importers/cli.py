"""`imprint import PATH... --out DIR [--format NAME]`, ready to wire in.

`add_import_command(subparsers)` adds the command to `imprint`'s parser
(its handler raises `UserInputError`, which `harness.cli.main` prints as one
line and exits 2); `main_import(argv)` runs it standalone with the same exits.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from imprint_core.errors import UserInputError

from .convert import import_paths
from .source import FORMATS

EXIT_OK, EXIT_INPUT = 0, 2
PROGRESS_MIN_FILES = 10
"""Fewer files than this convert without a progress bar."""

HELP = "convert other agents' trajectories into imprint-rounds/1 round logs"
DESCRIPTION = (f"Convert raw trajectories ({', '.join(FORMATS)}; gzipped or not) into round logs under DIR. "
               "A folder keeps its layout, each raw suffix replaced by .jsonl; a tau-bench file becomes a folder "
               "of <task>-<trial>.jsonl. Nothing is written unless every file converts.")


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("paths", nargs="+", metavar="PATH", help="raw trajectory files or folders of them")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the round logs")
    p.add_argument("--format", metavar="NAME", default=None,
                   help=f"read every file as this format instead of detecting it ({', '.join(FORMATS)})")
    p.set_defaults(fn=cmd_import)
    return p


def add_import_command(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `import` to a parser's subcommands; the handler is `args.fn(args)`."""
    return _configure(subparsers.add_parser("import", help=HELP, description=DESCRIPTION))


def cmd_import(args: argparse.Namespace) -> int:
    """Convert `args.paths` into `args.out`; a progress bar on stderr (a
    terminal) once there are `PROGRESS_MIN_FILES` files or more."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    err = Console(stderr=True, highlight=False)
    bar = Progress(TextColumn("[bold]imprint import"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.description}"), console=err, transient=True)
    task = None

    def progress(done: int, total: int, path: str) -> None:
        nonlocal task
        if total < PROGRESS_MIN_FILES or not err.is_terminal:
            return
        if task is None:
            bar.start()
            task = bar.add_task("", total=total)
        bar.update(task, completed=done, description=Path(path).name)

    try:
        written = import_paths(args.paths, args.out, fmt=args.format, progress=progress)
    finally:
        if task is not None:
            bar.stop()
    print(f"wrote {len(written)} round logs to {args.out}")
    return EXIT_OK


def main_import(argv: list[str] | None = None) -> int:
    """Run `import` standalone: 0 when done, 2 (one line on stderr) on unusable input."""
    parser = _configure(argparse.ArgumentParser(prog="imprint import", description=DESCRIPTION))
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.fn(args)
    except UserInputError as exc:
        print(f"error: {exc.describe()}", file=sys.stderr)
        return EXIT_INPUT
