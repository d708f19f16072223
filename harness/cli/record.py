"""`imprint record`: remote scenarios against a live server into cassettes."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..conventions import EXIT_FAILED, EXIT_OK
from ..live.servers import SERVER_KINDS


def add_parser(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "record", help="record scenarios against a live server into vcrpy cassettes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run `provider: remote` scenarios against a live OpenAI-compatible server while vcrpy "
                    "records,\nthen write the cassette and our trace beside it (both moved into place only "
                    "when the\nsession completed). Replays in tests and `imprint run` need no server.",
        epilog="Cassettes go to the scenario's `provider.cassette`, else traces/cassettes/<server>/<stem>.yaml;\n"
               "the trace to <stem>.trace.jsonl beside it. The servers run from their own venv in the user\n"
               "cache: set it up once with `imprint servers setup` (llama.cpp builds from source,\n"
               "about 15 minutes on 2 cores). With --pin, each scenario's `expect` is rewritten to what its\n"
               "recording did; without it, a session that differs from `expect` is reported as FAIL.\n\n"
               "examples:\n"
               "  imprint record scenarios/*-remote-transformers-*.yaml --server transformers\n"
               "  imprint record scenarios/50-remote-llamacpp-research-stream.yaml --server llamacpp \\\n"
               "      --url http://127.0.0.1:8011/v1")
    rec.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario files with `provider: remote`")
    rec.add_argument("--server", required=True, choices=list(SERVER_KINDS),
                     help="which server to start (and which server's cassette folder to write)")
    rec.add_argument("--url", help="use a server already running at this base URL (e.g. http://127.0.0.1:8010/v1) "
                                   "instead of starting one")
    rec.add_argument("--pin", action="store_true",
                     help="rewrite each scenario's expect block to what its recording did (stop reason, final "
                          "mode, rounds, requests, tokens, event counts), then replay the new cassette offline")
    rec.set_defaults(fn=run)


def _shown(path: Path) -> str:
    """A path as short as it reads clearly: relative to the current folder when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run(args: argparse.Namespace) -> int:
    from ..scenarios import load_scenario, scenario_files
    from ..scenarios.providers import cassette_path
    from ..scenarios.record import pin_expect, record, recorded_expect
    from ..scenarios.runner import run_scenario
    scenarios = [load_scenario(f) for f in scenario_files(args.scenarios)]
    failed = 0
    for scn in scenarios:
        done = record(scn, server=args.server, base_url=args.url)
        if getattr(args, "pin", False) and done.error is None and scn.source:
            pin_expect(Path(scn.source), recorded_expect(cassette_path(scn).with_suffix(".trace.jsonl")))
            scn = load_scenario(scn.source)
            done = run_scenario(scn)  # the replay of the new cassette must meet what was pinned
            print(f"{scn.source}: expect pinned to the recording; offline replay "
                  f"{'passes' if done.passed else 'FAILS'}", file=sys.stderr)
        r = done.result
        verdict = "pass" if done.passed else "FAIL " + "; ".join([str(f) for f in done.failures] +
                                                              ([done.error] if done.error else []))
        print(f"{scn.name}: {r.stop_reason.value if r else '-'} / {r.final_mode.value if r else '-'}, "
              f"{r.rounds if r else '-'} rounds, {r.research_requests if r else '-'} requests -> "
              f"{_shown(cassette_path(scn))}: {verdict}")
        failed += not done.passed
    return EXIT_FAILED if failed else EXIT_OK
