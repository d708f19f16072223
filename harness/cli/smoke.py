"""`imprint smoke record|replay`: record the smoke sessions against a live
server into tests/cassettes, or replay smoke cassettes offline."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from imprint_core.errors import ImprintError

from ..conventions import EXIT_OK
from ..live.servers import SERVER_KINDS
from .actions import failures_exit_1, output_folder, port


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("smoke", help="record or replay the smoke sessions against a live server",
                       description="Record or replay the smoke sessions against live servers.")
    actions = p.add_subparsers(required=True, metavar="ACTION")
    p_rec = actions.add_parser("record", help="record the smoke sessions against a server")
    p_rec.add_argument("--server", choices=list(SERVER_KINDS), required=True)
    p_rec.add_argument("--base-url", help="use a server already running there instead of starting one")
    p_rec.add_argument("--port", type=port)
    p_rec.add_argument("--out", default="tests/cassettes")
    p_rec.set_defaults(fn=record)
    p_rep = actions.add_parser("replay", help="replay smoke cassettes offline")
    p_rep.add_argument("cassettes", nargs="+")
    p_rep.set_defaults(fn=replay)


# A live server's failure, or a replay that strays from its cassette, is a failed session, not unusable input.
@failures_exit_1(ImprintError)
def record(args: argparse.Namespace) -> int:
    from ..live.smoke import record_smoke
    output_folder(Path(args.out) / args.server, key="--out", doing="create the cassette folder")
    print(json.dumps(record_smoke(args.server, args.out, base_url=args.base_url, port=args.port), indent=2))
    return EXIT_OK


@failures_exit_1(ImprintError)
def replay(args: argparse.Namespace) -> int:
    from ..live.smoke import replay_smoke
    for c in args.cassettes:
        r = replay_smoke(c)
        print(f"{c}: {r.stop_reason.value}, {r.rounds} round(s), answer {r.answer[:60]!r}")
    return EXIT_OK
