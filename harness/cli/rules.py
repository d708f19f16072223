"""`imprint rules`: every stop rule that can be named, with its parameters,
their defaults and where the rule comes from."""
from __future__ import annotations

import argparse
import json

from ..conventions import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the stop rules: built-ins and entry points, their parameters and sources",
                       description="List every stop rule `--rule` and chat.research_stop_rule can name: the "
                                   "built-ins and those that installed packages declare in the entry-point group "
                                   "imprint.stop_rules, with each parameter's default and the rule's source. A rule "
                                   "in a file is named FILE.py:FACTORY; give one to see its parameters too.")
    p.add_argument("specs", nargs="*", metavar="RULE", help="show these rules only (names or FILE.py:FACTORY)")
    p.add_argument("--json", action="store_true", help="one JSON object per rule")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from imprint_core.stoprules import available, resolve
    infos = [resolve(s) for s in args.specs] if args.specs else available()
    if args.json:
        for info in infos:
            print(json.dumps(info.to_dict(), ensure_ascii=False))
        return EXIT_OK
    from .console import console
    from rich.table import Table
    from rich.markup import escape
    table = Table(title="stop rules", show_lines=True)
    for col in ("rule", "parameters (defaults)", "what it does", "source"):
        table.add_column(col, overflow="fold")
    for info in infos:
        params = "\n".join(f"{k} = {v!r}" for k, v in info.params.items() if k != "novelty") or "(none)"
        table.add_row(escape(info.name), escape(params), escape(info.summary),
                      escape(f"{info.source} [{info.origin}]"))
    console().print(table)
    return EXIT_OK
