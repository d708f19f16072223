"""`imprint report`: the HTML page, Markdown summary and plots from traces."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from imprint_core.errors import UserInputError

from ..conventions import EXIT_OK
from .console import progress
from .inputs import DEFAULT_GATE_CONFIG, default_inputs, gate_config, gate_inputs, incomplete_runs, judged_run


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write the HTML/Markdown report with plots from traces",
        description="Write index.html (images beside it), summary.md and PNG plots from traces and round logs: "
                    "for labelled runs first the stop rule's accuracy (premature stops and loops caught per corpus, "
                    "with the runs it got wrong), then estimates against measurements per provider, reserve against "
                    "prefix-refund, budget use per round, novelty timelines, stop reasons and final modes, deadline "
                    "overshoot.",
        epilog=f"Without TRACES: the gate config's [inputs] as `imprint check` reads them (traces/ without "
               f"traces/runs/, the newest complete run under traces/runs/ or the one --run names, the configured "
               f"round logs), or, with no gate config, traces/ and that run; the page names the run it judged. "
               f"Labelled runs are judged as the gate judges them: "
               f"round logs and raw trajectories replayed with the config's stop rule, against the labels files "
               f"(--labels, default: the config's inputs.labels).")
    p.add_argument("paths", nargs="*", metavar="TRACES", help="traces and round logs (files or directories)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; its plots are replaced)")
    p.add_argument("--run", metavar="DIR", help="the run of `imprint run` to report on (default: the newest complete "
                                               "one under traces/runs/; with TRACES: none)")
    p.add_argument("--labels", action="append", metavar="FILE",
                   help="labels file (repeatable; default: the gate config's inputs.labels)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help=f"the gate config whose stop rule and labels judge labelled runs (default "
                        f"{DEFAULT_GATE_CONFIG} where it exists)")
    p.add_argument("--select", action="append", default=[], metavar="RUN",
                   help="a run (scenario name, file stem or run id) for the per-run plots; repeatable "
                        "(default: a spread of stop reasons, writes, errors, asks and providers)")
    p.add_argument("--compare", default=None, metavar="FILE",
                   help="the \"Stop rules compared\" section: by default computed from the labelled runs the report "
                        "judges (every built-in rule, as `imprint compare` over their corpora); FILE: an `imprint "
                        "compare` compare.json to show instead, labelled with its file and date; `none`: no such "
                        "section")
    p.add_argument("--max-runs", type=int, default=6, metavar="N", help="panels in the per-run plots (default 6)")
    p.add_argument("--title", default="Imprint research-loop report")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.frames.load import load_frames
    from ..analysis.report.page import write_report
    if args.max_runs < 1:
        raise UserInputError(f"{args.max_runs} panels", key="--max-runs", expected="1 or more")
    cfg = gate_config(args.config or DEFAULT_GATE_CONFIG) if args.config or Path(DEFAULT_GATE_CONFIG).exists() else None
    paths, notes = list(args.paths), []
    inputs = cfg.inputs if cfg else {"latest_run": True, "runs_dir": "traces/runs"}
    run, run_words, run_ok = judged_run(args.run, inputs, given_paths=bool(paths))
    if paths and run:
        paths.append(run.path)
    if not paths:
        paths, notes = gate_inputs(cfg.inputs, run.path if run else None) if cfg else \
            (default_inputs(["traces"], False, "traces/runs") + ([run.path] if run else []), [])
        if cfg is None:   # gate_inputs names the incomplete runs itself
            notes += [f"incomplete run {p} (interrupted before its summary.json); skipped"
                      for p in incomplete_runs("traces/runs")]
        if not paths:
            raise UserInputError("no traces found", file="traces", expected="traces (run `imprint run` first)")
    from ..analysis.gate.conditions import judged_runs, novelty_config
    from ..realruns.labels import LOOP_SLACK, load_labels
    from ..realruns.noveltyconfigs import describe
    label_files = args.labels if args.labels is not None else cfg.inputs["labels"] if cfg else []
    with progress("report", "reading and replaying the inputs") as step:
        if cfg is None:
            frames, slack, rule = load_frames(paths), LOOP_SLACK, ""
        else:
            ps = cfg.premature_stops
            frames = load_frames(paths, patience=ps["patience"], novelty=novelty_config(cfg),
                                 user_turns=ps["user_turns"], rule=ps["rule"], rule_params=ps["rule_params"])
            slack = ps["loop_slack"]
            rule = (f"Round logs and raw trajectories are replayed at patience {ps['patience']}, "
                    f"{describe(novelty_config(cfg))}, user turns {ps['user_turns']} ({cfg.path}); traces are "
                    f"judged by the stop they recorded.")
        if frames.runs.empty:
            raise UserInputError("no traces or round logs found", file=" ".join(str(p) for p in paths))
        judged = judged_runs(frames, load_labels(label_files), slack) if label_files else []
        gate = None
        if cfg is not None:
            from ..analysis.gate.conditions import judge_frames
            from ..analysis.report.sections import GateVerdict
            step("judging the gate")
            gate = GateVerdict(judge_frames(frames, cfg, load_labels(label_files), expect_all=not args.paths),
                               run_words, run_ok, str(cfg.path))
        comparison = _comparison(args, judged, paths, slack, step)
        step("drawing the plots")
        written = write_report(frames, args.out, title=args.title, select=args.select, max_runs=args.max_runs,
                               judged=judged, rule=rule, comparison=comparison, gate=gate,
                               notes=[] if gate else [f"Judged run: {run_words}."])
    for w in notes + list(frames.warnings):
        print(f"warning: {w}", file=sys.stderr)
    n_traces = int((frames.runs["source"] == "trace").sum())
    n_logs = int((frames.runs["source"] == "roundlog").sum())
    print(f"wrote {written['index.html']} ({len(written) - 2} plot(s), {n_traces} trace(s), {n_logs} round log(s), "
          f"{len(judged)} labelled; providers: {', '.join(frames.providers) or 'none'})")
    print(f"judged run: {run_words}")
    return EXIT_OK


def _comparison(args: argparse.Namespace, judged, paths, slack: int, step):
    """What the "Stop rules compared" section shows: `--compare FILE`'s
    figures, or (by default) a callable that computes them from the judged
    runs' corpora into the report's folder; None for no such section."""
    if args.compare == "none" or not judged and not args.compare:
        return None
    if args.compare:
        stored = Path(args.compare)
        if not stored.is_file():
            raise UserInputError("no such file", file=str(stored), key="--compare",
                                 expected="the compare.json that `imprint compare` wrote")
        return stored
    import time

    from ..analysis.compare import DEFAULT_RULES, RuleChoice
    from ..analysis.report.compare import comparison_of
    from .ruleargs import rules_of
    choices = [RuleChoice(label, spec, params) for label, spec, params in
               rules_of(argparse.Namespace(rules=None, params=None, param=None), list(DEFAULT_RULES))]

    def compute(out: Path):
        step("replaying the labelled runs through every built-in rule")
        data, image = comparison_of(judged, paths, out, choices, slack=slack)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        return data, image, (f"Computed by this report at {when} from the labelled runs it judges (their corpora: "
                             f"{', '.join(data.get('corpora') or [])}), as `{data.get('command')}` would.")
    return compute
