"""`imprint`: run scenarios, replay round logs, manage settings and more.

Every command exits 0 on success, 1 when a check fails, 2 on unusable input
(the message names the file, line and key; never a traceback)."""
from __future__ import annotations

import argparse
import difflib
import os
import sys

from imprint_core.errors import ImprintError, UserInputError

from ..conventions import EXIT_INPUT, EXIT_INTERNAL, EXIT_OK
from . import (check, compare, export_otel, export_rounds, faults, import_runs, model, record, regress, replay, report,
               rules, run, schema, servers, settings, smoke, tune)

# In `imprint --help` order: the scenario library and real runs, settings,
# the local model and live servers, then the analysis of what ran.
COMMANDS = (run, import_runs, replay, export_rounds, export_otel, settings, schema, model, record, servers, smoke, report,
            tune, regress, check, faults, rules, compare)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="imprint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The command line parsed; an argument the command does not know is
    refused by that command's own parser (its usage, not `imprint`'s), with
    the nearest of its flags suggested."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
        flags = [f for a in sub._actions for f in a.option_strings if f.startswith("--")]
        unknown = [x.split("=", 1)[0] for x in extra if x.startswith("-")]
        near = [m for x in unknown for m in difflib.get_close_matches(x, flags, n=1)]
        sub.error(f"unrecognized arguments: {' '.join(extra)}"
                  + (f"; did you mean {' or '.join(dict.fromkeys(near))}?" if near else ""))
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(build_parser(), argv)
    args.argv = argv   # the command line as given (`imprint tune` writes it beside its results)
    try:
        return args.fn(args)
    except UserInputError as exc:
        print(f"error: {exc.describe()}", file=sys.stderr)
        return EXIT_INPUT
    except ImprintError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug of ours: say so in one line; IMPRINT_DEBUG=1 shows the traceback
        if os.environ.get("IMPRINT_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (set IMPRINT_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
