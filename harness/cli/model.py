"""`imprint model`: build or locate the local model folder (torch and
transformers are imported only to build it)."""
from __future__ import annotations

import argparse
import sys

from ..conventions import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("model", help="build or locate the local SmolLM2 model folder")
    m.add_argument("action", choices=["build", "path"])
    m.add_argument("--force", action="store_true", help="rebuild even if the folder looks complete")
    m.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..live import model_folder
    if args.action == "path":
        print(model_folder.model_dir())
        return EXIT_OK
    path = model_folder.build_model_dir(force=args.force, progress=lambda m: print(m, file=sys.stderr))
    print(path)
    return EXIT_OK
