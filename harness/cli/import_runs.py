"""`imprint import PATH... --out DIR [--format NAME]`: other agents' raw
trajectories as round logs (the converters live in harness.realruns.importers).
Unusable input raises UserInputError, which `imprint` prints as one line, exit 2."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..conventions import EXIT_OK
from ..realruns.importers import ENTRY_POINT_GROUP, import_paths
from ..realruns.importers.registry import builtin_names

PROGRESS_MIN_FILES = 10
"""Fewer files than this convert without a progress bar."""

HELP = "convert other agents' trajectories into imprint-rounds/1 round logs"
DESCRIPTION = (f"Convert raw trajectories ({', '.join(builtin_names())}, and the formats installed packages add "
               f"under the entry-point group {ENTRY_POINT_GROUP}; gzipped or not) into round logs under DIR. "
               "A folder keeps its layout, each raw suffix replaced by .jsonl; a file of many runs becomes a folder: "
               "a tau-bench file's <task>-<trial>.jsonl, an inspect_ai log's <sample>-<epoch>.jsonl, an OTLP "
               "file's <trace id>.jsonl. Nothing is written unless every file converts.")


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("paths", nargs="+", metavar="PATH", help="raw trajectory files or folders of them")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the round logs")
    p.add_argument("--format", metavar="NAME", default=None,
                   help=f"read every file as this format instead of detecting it ({', '.join(builtin_names())}, "
                        "or an installed package's)")
    p.set_defaults(fn=cmd_import)
    return p


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `import` to `imprint`'s subcommands; the handler is `args.fn(args)`."""
    return _configure(sub.add_parser("import", help=HELP, description=DESCRIPTION))


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
