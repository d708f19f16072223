"""`imprint model build|path`: build or locate the local model folder (torch
and transformers are imported only to build it)."""
from __future__ import annotations

import argparse
import sys

from ..conventions import EXIT_OK
from .actions import options_either_side


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="rebuild even if the folder looks complete")


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("model", help="build or locate the local SmolLM2 model folder")
    force = options_either_side(m, _force)
    actions = m.add_subparsers(required=True, metavar="ACTION")
    actions.add_parser("build", parents=[force], help="build the folder in the user cache (kept when complete)"
                       ).set_defaults(fn=build)
    actions.add_parser("path", help="print where the folder is").set_defaults(fn=path)


def build(args: argparse.Namespace) -> int:
    from ..live import model_folder
    print(model_folder.build_model_dir(force=args.force, progress=lambda m: print(m, file=sys.stderr)))
    return EXIT_OK


def path(args: argparse.Namespace) -> int:
    from ..live import model_folder
    print(model_folder.model_dir())
    return EXIT_OK
