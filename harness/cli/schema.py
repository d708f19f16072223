"""`imprint schema`: the JSON schema of scenario files, written or checked."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..conventions import EXIT_FAILED, EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    sc = sub.add_parser("schema", help="write (or --check) the JSON schema of scenario files")
    sc.add_argument("--output", default="scenarios/schema.json")
    sc.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    sc.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from imprint_core.files import atomic_write_text
    from ..scenarios import json_schema_text
    path = Path(args.output)
    text = json_schema_text()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is out of date; run `imprint schema` to regenerate it", file=sys.stderr)
            return EXIT_FAILED
        print(f"{path} is current")
        return EXIT_OK
    atomic_write_text(path, text)
    print(f"wrote {path}")
    return EXIT_OK
