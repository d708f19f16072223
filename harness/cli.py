"""`imprint`: run scenarios, replay round logs, manage settings and more.

Every command exits 0 on success, 1 when a check fails, 2 on unusable input
(the message names the file, line and key; never a traceback)."""
from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Callable

from imprint_core.errors import ImprintError, UserInputError

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _console(stderr: bool = False):
    from rich.console import Console
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, highlight=False, width=220)  # logs and pipes: don't squeeze the table
    return console


# ---- run ----------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from .runner import run_scenario
    from .scenario import load_scenario, scenario_files
    files = scenario_files(args.paths or ["scenarios"])
    if not files:
        raise UserInputError("no scenario files (*.yaml) found", file=" ".join(args.paths or ["scenarios"]))
    scenarios, problems = [], []
    for f in files:
        try:
            scenarios.append(load_scenario(f))
        except UserInputError as exc:
            problems.append(exc.describe())
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return EXIT_INPUT
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    out_dir = Path(args.traces) / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    err = _console(stderr=True)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("[bold]imprint run"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True,
                  disable=args.json or not err.is_terminal) as progress:
        task = progress.add_task("", total=len(scenarios))
        for scn, f in zip(scenarios, files):
            progress.update(task, description=scn.name)
            runs.append(run_scenario(scn, out_dir / f"{f.stem}.jsonl", run_id=run_id))
            progress.advance(task)
    rows = [r.row() for r in runs]
    summary = {"run_id": run_id, "traces": str(out_dir), "passed": sum(r.passed for r in runs),
               "failed": sum(not r.passed for r in runs), "scenarios": rows}
    from imprint_core.settings import atomic_write_text
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_run_table(rows, summary)
    return EXIT_OK if summary["failed"] == 0 else EXIT_FAILED


def _print_run_table(rows: list[dict], summary: dict) -> None:
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=f"imprint run {summary['run_id']}", show_lines=False)
    for col, just in [("scenario", "left"), ("stop reason", "left"), ("final mode", "left"), ("rounds", "right"),
                      ("requests", "right"), ("reserved", "right"), ("charged", "right"), ("refunded", "right"),
                      ("result", "left")]:
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        verdict = "[green]pass[/]" if r["passed"] else "[red]FAIL[/] " + escape("; ".join(r["failures"]))
        table.add_row(r["scenario"], r["stop_reason"] or "-", r["final_mode"] or "-", _n(r["rounds"]),
                      _n(r["requests"]), _n(r["reserved"]), _n(r["charged"]), _n(r["refunded"]), verdict)
    out = _console()
    out.print(table)
    out.print(f"{summary['passed']} passed, {summary['failed']} failed; traces in {summary['traces']}")


def _n(v: Any) -> str:
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


# ---- replay / export-rounds ---------------------------------------------------------------
def cmd_replay(args: argparse.Namespace) -> int:
    from imprint_core.novelty import NORMALIZATIONS
    from .rounds import read_round_log, replay, round_log_files
    if args.normalization not in NORMALIZATIONS:
        raise UserInputError(f"unknown normalization {args.normalization!r}", key="--normalization",
                             expected="one of " + ", ".join(NORMALIZATIONS))
    if not 2 <= args.patience <= 20:
        raise UserInputError(f"{args.patience} is out of bounds", key="--patience", expected="2–20 rounds")
    files = round_log_files(args.paths)
    logs = [read_round_log(f) for f in files]  # all validated before any output
    results = [replay(log, patience=args.patience, normalization=args.normalization) for log in logs]
    if args.json:
        for r in results:
            print(json.dumps(r.to_dict()))
        return EXIT_OK
    for r in results:
        stop = f"stops at round {r.stop_round} ({r.stop_reason})" if r.stop_round else "never stops"
        print(f"{r.file}: {r.rounds} rounds, {stop}; progress rounds {r.progress_rounds}")
    stopped = [r.stop_round for r in results if r.stop_round]
    print(f"{len(results)} run(s): {len(stopped)} stopped by no_progress (patience {args.patience}, "
          f"normalization {args.normalization})" + (f" at rounds {sorted(stopped)}" if stopped else ""))
    return EXIT_OK


def cmd_export_rounds(args: argparse.Namespace) -> int:
    from .rounds import export_round_log, trace_to_round_log
    if args.output:
        print(f"wrote {export_round_log(args.trace, args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(trace_to_round_log(args.trace))
    return EXIT_OK


# ---- settings ----------------------------------------------------------------------------
def cmd_settings(args: argparse.Namespace) -> int:
    from imprint_core.settings import SPECS, Settings
    s = Settings(args.config)
    if args.action == "list":
        rows = s.list()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            from rich.table import Table
            t = Table(title=f"settings ({s.path})")
            for c in ("key", "value", "source", "default", "bounds", "description"):
                t.add_column(c)
            for r in rows:
                t.add_row(r["key"], f"{r['value']:,}", r["source"], f"{r['default']:,}",
                          f"{r['min']:,}–{r['max']:,} {r['unit']}", r["description"])
            _console().print(t)
        return EXIT_OK
    if args.action in ("get", "set") and not args.key:
        raise UserInputError(f"`settings {args.action}` needs a KEY", expected="one of " + ", ".join(SPECS))
    if args.action == "get":
        d = s.describe(args.key)
        print(json.dumps(d) if args.json else d["value"])
    elif args.action == "set":
        if args.value is None:
            raise UserInputError("`settings set` needs a VALUE", key=args.key)
        value = s.set(args.key, args.value)
        print(json.dumps({"key": args.key, "value": value, "file": str(s.path)}) if args.json
              else f"{args.key} = {value} (saved to {s.path})")
    elif args.action == "reset":
        s.reset(args.key)
        what = args.key or "all settings"
        print(json.dumps({"reset": args.key or "all", "file": str(s.path)}) if args.json
              else f"reset {what} to the default")
    return EXIT_OK


# ---- schema ----------------------------------------------------------------------------------
def cmd_schema(args: argparse.Namespace) -> int:
    from imprint_core.settings import atomic_write_text
    from .scenario import json_schema_text
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


# ---- model / record (their modules load heavy dependencies lazily) --------------------------
def cmd_model(args: argparse.Namespace) -> int:
    from . import models
    if args.action == "path":
        print(models.model_dir())
        return EXIT_OK
    path = models.build_model_dir(force=args.force, progress=lambda m: print(m, file=sys.stderr))
    print(path)
    return EXIT_OK


def cmd_record(args: argparse.Namespace) -> int:
    from .remote_scenarios import cli_record
    return cli_record(args)


def _later(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        module = __import__(f"harness.{name}", fromlist=["cli"])
        return module.cli(args)
    return run


# ---- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="imprint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="run scenario files on the virtual clock and check their expectations",
                       description="Run scenarios (default: all of scenarios/), write one JSONL trace each under "
                                   "traces/runs/<run-id>/, print a table; exit 1 if any expectation fails.")
    r.add_argument("paths", nargs="*", metavar="PATH", help="scenario files or directories (default: scenarios)")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    r.add_argument("--traces", default="traces/runs", help="where run folders go (default: traces/runs)")
    r.set_defaults(fn=cmd_run)

    rp = sub.add_parser("replay", help="replay round logs through the novelty and patience rule",
                        description="Print, per round log, the round where the no-progress rule stops "
                                    "(or that it never stops) and the rounds judged as progress.")
    rp.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    rp.add_argument("--patience", type=int, default=4, help="consecutive rounds without new evidence (2–20)")
    rp.add_argument("--normalization", default="default", help="none, basic or default")
    rp.add_argument("--json", action="store_true", help="one JSON object per line")
    rp.set_defaults(fn=cmd_replay)

    ex = sub.add_parser("export-rounds", help="turn one of our traces into an imprint-rounds/1 log")
    ex.add_argument("trace", metavar="TRACE.jsonl")
    ex.add_argument("-o", "--output", help="write here (atomically) instead of standard output")
    ex.set_defaults(fn=cmd_export_rounds)

    st = sub.add_parser("settings", help="list, get, set or reset the research settings",
                        description="Settings live in a TOML file (IMPRINT_CONFIG, or the user config dir); "
                                    "IMPRINT_CHAT_* environment variables override it.")
    st.add_argument("action", choices=["list", "get", "set", "reset"])
    st.add_argument("key", nargs="?")
    st.add_argument("value", nargs="?")
    st.add_argument("--config", help="the config file (default: $IMPRINT_CONFIG or the user config dir)")
    st.add_argument("--json", action="store_true")
    st.set_defaults(fn=cmd_settings)

    sc = sub.add_parser("schema", help="write (or --check) the JSON schema of scenario files")
    sc.add_argument("--output", default="scenarios/schema.json")
    sc.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    sc.set_defaults(fn=cmd_schema)

    m = sub.add_parser("model", help="build or locate the local SmolLM2 model folder")
    m.add_argument("action", choices=["build", "path"])
    m.add_argument("--force", action="store_true", help="rebuild even if the folder looks complete")
    m.set_defaults(fn=cmd_model)

    rec = sub.add_parser(
        "record", help="record scenarios against a live server into vcrpy cassettes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run `provider: remote` scenarios against a live OpenAI-compatible server while vcrpy "
                    "records,\nthen write the cassette and our trace beside it (both moved into place only "
                    "when the\nsession completed). Replays in tests and `imprint run` need no server.",
        epilog="Cassettes go to the scenario's `provider.cassette`, else traces/cassettes/<server>/<stem>.yaml;\n"
               "the trace to <stem>.trace.jsonl beside it. The servers run from their own venv in the user\n"
               "cache: set it up once with `python -m harness.servers setup` (llama.cpp builds from source,\n"
               "about 15 minutes on 2 cores). With --pin, each scenario's `expect` is rewritten to what its\n"
               "recording did; without it, a session that differs from `expect` is reported as FAIL.\n\n"
               "examples:\n"
               "  imprint record scenarios/*-remote-transformers-*.yaml --server transformers\n"
               "  imprint record scenarios/50-remote-llamacpp-research-stream.yaml --server llamacpp \\\n"
               "      --url http://127.0.0.1:8011/v1")
    rec.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario files with `provider: remote`")
    rec.add_argument("--server", required=True, choices=["transformers", "llamacpp"],
                     help="which server to start (and which server's cassette folder to write)")
    rec.add_argument("--url", help="use a server already running at this base URL (e.g. http://127.0.0.1:8010/v1) "
                                   "instead of starting one")
    rec.add_argument("--pin", action="store_true",
                     help="rewrite each scenario's expect block to what its recording did (stop reason, final "
                          "mode, rounds, requests, tokens, event counts), then replay the new cassette offline")
    rec.set_defaults(fn=cmd_record)

    for name, helptext in [("report", "write the HTML/Markdown report with plots from traces"),
                           ("tune", "sweep patience and normalization over labelled runs"),
                           ("check", "the release gate: the record's invalidation conditions")]:
        c = sub.add_parser(name, help=helptext, add_help=False)
        c.add_argument("rest", nargs=argparse.REMAINDER)
        c.set_defaults(fn=_later(LATER[name]))
    return p


# Commands that parse their own arguments (`harness.<module>.cli(args)` with `args.rest`).
LATER = {"report": "report", "tune": "tune", "check": "gate"}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in LATER:  # all of the rest is theirs, leading options and --help included
        args = argparse.Namespace(command=argv[0], rest=argv[1:], fn=_later(LATER[argv[0]]))
    else:
        args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
