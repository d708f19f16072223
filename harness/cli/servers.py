"""`imprint servers setup|start|status`: set up, start or inspect the two
OpenAI-compatible servers used to record (their own venv in the user cache)."""
from __future__ import annotations

import argparse
import contextlib
import os

from ..conventions import EXIT_OK
from ..live.servers import SERVER_KINDS, ServerError
from .actions import failures_exit_1, output_folder, port


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("servers", help="set up, start or inspect the servers used to record",
                       description="Set up and start the OpenAI-compatible servers used to record.")
    actions = p.add_subparsers(required=True, metavar="ACTION")
    p_setup = actions.add_parser("setup", help="create the servers' venv and install the servers (idempotent)")
    # argparse tests an empty `nargs="*"` list against `choices` as one value and refuses it: check each kind instead
    p_setup.add_argument("kinds", nargs="*", type=_kind, default=[], metavar="KIND",
                         help=f"{' or '.join(SERVER_KINDS)} (default: both)")
    p_setup.add_argument("--force", action="store_true", help="reinstall even if set up")
    p_setup.set_defaults(fn=setup)
    p_start = actions.add_parser("start", help="start a server and keep it running until Ctrl-C")
    p_start.add_argument("kind", choices=list(SERVER_KINDS))
    p_start.add_argument("--port", type=port, default=None)
    p_start.set_defaults(fn=start)
    actions.add_parser("status", help="what is set up").set_defaults(fn=status)


def _kind(text: str) -> str:
    if text not in SERVER_KINDS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(SERVER_KINDS)})")
    return text


@failures_exit_1(ServerError)
def setup(args: argparse.Namespace) -> int:
    from ..live import servers
    kinds = tuple(args.kinds) or SERVER_KINDS
    output_folder(servers.venv_dir().parent, key=servers.VENV_ENV if os.environ.get(servers.VENV_ENV) else None,
                  doing="create the servers' folder")
    if "transformers" in kinds:
        from ..live.model_folder import build_model_dir
        build_model_dir()
    servers.setup_servers(kinds, force=args.force)
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    from ..live import servers
    python = servers.venv_python()
    print(f"venv: {servers.venv_dir()} ({'exists' if python.exists() else 'missing'})")
    for kind in SERVER_KINDS:
        print(f"{kind}: {'set up' if python.exists() and servers.is_set_up(kind) else 'not set up'} "
              f"({', '.join(f'{d}=={v}' for d, v in servers.requirements(kind).items())})")
    return EXIT_OK


@failures_exit_1(ServerError)
def start(args: argparse.Namespace) -> int:
    from ..live import servers
    port = args.port or servers.DEFAULT_PORTS[args.kind]
    with servers.server(args.kind, port, progress=print) as running:
        print(f"{running.kind} serving model {running.model!r} at {running.base_url}; Ctrl-C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            running.process.wait()
    return EXIT_OK
