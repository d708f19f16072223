"""`imprint report`: the HTML page, Markdown summary and plots from traces."""
from __future__ import annotations

import argparse
import sys

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from .inputs import default_inputs, incomplete_runs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write the HTML/Markdown report with plots from traces",
        description="Write index.html (images beside it), summary.md and PNG plots from traces and round logs: "
                    "estimates against measurements per provider, reserve against prefix-refund, budget use per "
                    "round, novelty timelines, stop reasons and final modes, deadline overshoot.",
        epilog="Without TRACES: traces/ (committed local and recorded-server traces, without traces/runs/) and "
               "the newest run folder under traces/runs/.")
    p.add_argument("paths", nargs="*", metavar="TRACES", help="traces and round logs (files or directories)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; its plots are replaced)")
    p.add_argument("--select", action="append", default=[], metavar="RUN",
                   help="a run (scenario name, file stem or run id) for the per-run plots; repeatable "
                        "(default: a spread of stop reasons, writes, errors, asks and providers)")
    p.add_argument("--max-runs", type=int, default=6, metavar="N", help="panels in the per-run plots (default 6)")
    p.add_argument("--title", default="Imprint research-loop report")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.frames import load_frames
    from ..analysis.report import write_report
    if args.max_runs < 1:
        raise UserInputError(f"{args.max_runs} panels", key="--max-runs", expected="1 or more")
    paths = args.paths
    if not paths:
        paths = default_inputs(["traces"], True, "traces/runs")
        for p in incomplete_runs("traces/runs"):
            print(f"note: incomplete run {p} (interrupted before its summary.json); skipped", file=sys.stderr)
        if not paths:
            raise UserInputError("no traces found", file="traces", expected="traces (run `imprint run` first)")
    frames = load_frames(paths)
    if frames.runs.empty:
        raise UserInputError("no traces or round logs found", file=" ".join(str(p) for p in paths))
    for w in frames.warnings:
        print(f"warning: {w}", file=sys.stderr)
    written = write_report(frames, args.out, title=args.title, select=args.select, max_runs=args.max_runs)
    n_traces = int((frames.runs["source"] == "trace").sum())
    print(f"wrote {written['index.html']} ({len(written) - 2} plot(s), {n_traces} trace(s), "
          f"providers: {', '.join(frames.providers) or 'none'})")
    return EXIT_OK
