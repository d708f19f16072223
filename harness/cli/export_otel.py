"""`imprint export-otel TRACE... -o FILE`: our traces as OpenTelemetry spans
(OTLP JSON, GenAI conventions), for the trace viewer a team already uses."""
from __future__ import annotations

import argparse
import sys

from ..conventions import EXIT_OK

HELP = "write our traces as OpenTelemetry spans (OTLP JSON, GenAI conventions)"
DESCRIPTION = ("Write each trace as one OpenTelemetry trace in OTLP JSON, one export request a line (the layout of "
               "OTLP JSON file exporters, which OTLP backends and viewers load): one span per model request with its "
               "reserved, charged, measured and cached tokens, one per tool call with its arguments and result, the "
               "stop and each round's end as events. `imprint import --format otel FILE` reads it back. Nothing is "
               "written unless every trace reads.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("export-otel", help=HELP, description=DESCRIPTION)
    ex.add_argument("traces", nargs="+", metavar="TRACE", help="imprint-trace/1 files")
    ex.add_argument("-o", "--output", required=True, metavar="FILE",
                    help="the OTLP JSON file to write (atomically), e.g. run.otlp.jsonl")
    ex.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..realruns.otelexport import export_otel
    out, n = export_otel(args.traces, args.output)
    print(f"wrote {n} trace(s) to {out}", file=sys.stderr)
    return EXIT_OK
