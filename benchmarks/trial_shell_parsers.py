"""Issue 43's trial: the hand shell tokenizer (`shellsyntax.py`) against
`bashlex` and the standard `shlex`, on every shell command of the
mini-swe-agent corpus (the 156 trajectories; the split's dev part is reported
beside the whole). A script, not a test; bashlex (GPLv3+) comes from the
`trial` extra (`pip install -e '.[trial]'`), not from the package or `make test`:

    python benchmarks/trial_shell_parsers.py [--corpus ../shared/data/raw/mini-swe-agent]
        [--verdicts benchmarks/trial_shell_parsers_verdicts.toml] [--out reports/bench/shell_parsers.json]
        [--dump-disagreements FILE]

Each parser only cuts a command line into simple commands (words, `>`
targets, here-document bodies); the read/write rules are `callkinds`'s for
all three (its `split_command` and `shell_words` swapped in turn), so a
disagreement is the parser's. A command a parser cannot parse gets no simple
commands: a read unless it is a submit (the marker is found without parsing).

The disagreements were read by hand; the verdicts file holds, per command
(by its SHA-256), which kind is right and why. The report counts, over the
judged commands, how many each parser classified right; the agreements are
right or wrong for all alike, so they change no comparison.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections import Counter
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bashlex  # noqa: E402

from harness.analysis.sweep.progress import task_of  # noqa: E402
from harness.analysis.sweep.stops import Split  # noqa: E402
from harness.realruns.importers import callkinds  # noqa: E402
from harness.realruns.importers.callkinds import SHELL_TOOLS, tool_words  # noqa: E402
from harness.realruns.importers.shellsyntax import Segment  # noqa: E402
from harness.realruns.runfiles import load_runs  # noqa: E402
from imprint_core.files import atomic_write_text  # noqa: E402

PARSERS = ("hand", "bashlex", "bashlex-unquoted", "shlex")
"""`bashlex-unquoted`: bashlex after a quoted here-document delimiter
(`<<'EOF'`) is rewritten unquoted, which bashlex 0.18 cannot end
(idank/bashlex#99, open); the rewrite changes no word a rule reads."""

QUOTED_DELIMITER = re.compile(r"""<<(-?)[ \t]*(['"])([^'"\n]+)\2""")


def Simple(words: list[str]) -> Segment:
    """One simple command as the swapped-in parsers give it: shellsyntax's
    `Segment` with its words already unquoted in place of its text
    (`shell_words` passes them through)."""
    return Segment(words)  # type: ignore[arg-type]


class Unparsed(Exception):
    pass


# ---- bashlex ---------------------------------------------------------------------------------------------
OUTPUT_REDIRECTS = {">", ">>", ">|", "&>", "&>>"}


def bashlex_split(cmd: str, *, unquote_delimiters: bool = False) -> list[Segment]:
    if unquote_delimiters:
        cmd = QUOTED_DELIMITER.sub(r"<<\1\3", cmd)
    try:
        trees = bashlex.parse(cmd)
    except Exception as exc:          # ParsingError, NotImplementedError and worse on odd input
        raise Unparsed(f"{type(exc).__name__}: {exc}") from None
    out: list[Segment] = []

    class Visitor(bashlex.ast.nodevisitor):
        def visitcommand(self, node, parts):
            seg = Simple([p.word for p in parts if p.kind in ("word", "assignment")])
            for r in (p for p in parts if p.kind == "redirect"):
                if r.type in OUTPUT_REDIRECTS and not isinstance(r.output, int):
                    seg.redirects.append(r.output.word)
                elif r.type in ("<<", "<<-") and r.heredoc is not None:
                    lines = r.heredoc.value.split("\n")[:-1]     # the value ends with the delimiter's line
                    seg.heredocs.append("\n".join(ln.lstrip("\t") if r.type == "<<-" else ln for ln in lines))
            out.append(seg)

    for t in trees:
        Visitor().visit(t)
    return out


# ---- shlex (no here-documents, no subshell bodies: what the standard library gives) ---------------------


def shlex_split(cmd: str) -> list[Segment]:
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace = " \t\r"            # a newline ends a command, as `;` does
    lex.commenters = "#"
    lex.wordchars += "~-./*?=:+%@^,[]{}$`\\"
    try:
        toks = list(lex)
    except ValueError as exc:
        raise Unparsed(f"ValueError: {exc}") from None
    out, cur = [], Simple([])
    i = 0
    while i < len(toks):
        t = toks[i]
        if t and set(t) <= set(";&|\n()"):    # `;`, `&&`, `||`, `|`, `(`, newline: the command ends (not `''`)
            out.append(cur)
            cur = Simple([])
        elif t in OUTPUT_REDIRECTS or t in (">&", "<"):
            nxt = toks[i + 1] if i + 1 < len(toks) else ""
            if cur.text and cur.text[-1].isdigit():
                cur.text.pop()                 # the `2` of `2>`
            if t in OUTPUT_REDIRECTS:
                cur.redirects.append(nxt)
            i += 1
        else:
            cur.text.append(t)
        i += 1
    out.append(cur)
    return [s for s in out if s.text or s.redirects]


# ---- one path per parser, the rules callkinds's -----------------------------------------------------------
@contextmanager
def parser(name: str, failures: list[str]):
    if name == "hand":
        yield
        return
    split = {"bashlex": bashlex_split, "shlex": shlex_split,
             "bashlex-unquoted": lambda c: bashlex_split(c, unquote_delimiters=True)}[name]

    def swapped(cmd: str) -> list[Segment]:
        try:
            return split(cmd)
        except Unparsed as exc:
            failures.append(str(exc))
            return []
    with mock.patch.object(callkinds, "split_command", swapped), \
            mock.patch.object(callkinds, "shell_words", lambda words: words):
        yield


def classify_all(commands: list[str], name: str) -> tuple[list[tuple[str, tuple[str, ...]]], list[bool], float,
                                                         list[str]]:
    """(kind, programs) per command, whether its parse failed (a nested `bash
    -c` failing counts for its command), seconds, and the parser's messages."""
    out, failed, fails = [], [], []
    with parser(name, fails):
        t0 = time.perf_counter()
        for c in commands:
            before = len(fails)
            f = callkinds.shell_facts(c)
            out.append((f.kind, f.programs))
            failed.append(len(fails) > before)
        secs = time.perf_counter() - t0
    return out, failed, secs, fails


def corpus_commands(corpus: str) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Each run's split part, and (command, run file, split part) of every shell call the importer keeps."""
    runs, _ = load_runs([corpus])
    split = Split()
    out, parts = [], []
    for r in runs:
        part = split.part(task_of(r))
        parts.append(part)
        for rd in r.log.rounds:
            for c in rd.calls:
                if "_".join(tool_words(c.tool)) in SHELL_TOOLS and isinstance(c.args.get("command"), str):
                    out.append((c.args["command"], r.display, part))
    return parts, out


def digest(cmd: str) -> str:
    return hashlib.sha256(cmd.encode()).hexdigest()[:16]


SAMPLE, SEED = 50, 43
"""How many of the commands only plain bashlex gets another kind for are
judged (too many to read all), and the seed that picks them."""


def dump_to_judge(path: Path, commands, rows, results, failed) -> None:
    """The distinct commands to judge, as JSON: every one where bashlex-unquoted
    or shlex gives another kind than the hand path ("all"), and a seeded sample
    of those only plain bashlex does ("sample"); each with whether bash itself
    parses it (`bash -n`: a line bash rejects runs nothing)."""
    seen: dict[str, dict] = {}
    for i, c in enumerate(commands):
        kinds = {n: results[n][i][0] for n in PARSERS}
        if len(set(kinds.values())) > 1 and digest(c) not in seen:
            seen[digest(c)] = {"sha": digest(c), "kinds": kinds, "failed": [n for n in PARSERS if failed[n][i]],
                               "run": rows[i][1], "command": c}
    core = [d for d in seen.values() if d["kinds"]["hand"] != d["kinds"]["bashlex-unquoted"]
            or d["kinds"]["hand"] != d["kinds"]["shlex"]]
    rest = [d for d in seen.values() if d not in core]
    picked = [dict(d, group="all") for d in core] + \
        [dict(d, group="sample") for d in random.Random(SEED).sample(rest, min(SAMPLE, len(rest)))]
    for d in picked:
        d["bash_parses"] = subprocess.run(["bash", "-n", "-c", d["command"]], capture_output=True).returncode == 0
    path.write_text(json.dumps(picked, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(ROOT / "../shared/data/raw/mini-swe-agent"))
    ap.add_argument("--verdicts", default=str(ROOT / "benchmarks/trial_shell_parsers_verdicts.toml"))
    ap.add_argument("--out", default=str(ROOT / "reports/bench/shell_parsers.json"))
    ap.add_argument("--dump-disagreements", metavar="FILE", help="write the kind disagreements (for judging)")
    args = ap.parse_args()

    parts, rows = corpus_commands(args.corpus)
    commands = [c for c, _, _ in rows]
    results, failed, secs, messages = {}, {}, {}, {}
    for _ in range(2):                              # the second pass is timed warm, the first warms caches
        for name in PARSERS:
            results[name], failed[name], secs[name], messages[name] = classify_all(commands, name)

    verdicts = {}
    vpath = Path(args.verdicts)
    if vpath.exists():
        verdicts = {v["sha"]: v for v in tomllib.loads(vpath.read_text())["verdict"]}

    report: dict = {"corpus": "mini-swe-agent (raw trajectories)", "runs": len(parts),
                    "runs_in_dev": parts.count("dev"),
                    "commands": len(commands), "distinct_commands": len(set(commands)),
                    "bashlex_version": version("bashlex")}
    for other in PARSERS[1:]:
        for scope in ("all", "dev"):
            idx = [i for i, (_, _, part) in enumerate(rows) if scope == "all" or part == "dev"]
            dis = [i for i in idx if results["hand"][i][0] != results[other][i][0]]
            judged = [i for i in dis if digest(commands[i]) in verdicts]
            right = {"hand": 0, other: 0, "neither": 0}
            for i in judged:
                v = verdicts[digest(commands[i])]["right"]
                right["hand" if results["hand"][i][0] == v else other if results[other][i][0] == v else "neither"] += 1
            report[f"{other}_vs_hand_{scope}"] = {
                "commands": len(idx), "kind_agree": len(idx) - len(dis), "kind_disagree": len(dis),
                "kind_disagree_where_it_parsed": sum(not failed[other][i] for i in dis),
                "programs_disagree": sum(sorted(results["hand"][i][1]) != sorted(results[other][i][1]) for i in idx),
                "parse_failures": sum(failed[other][i] for i in idx),
                "judged": len(judged), "judged_distinct": len({commands[i] for i in judged}),
                "judged_right": right,
            }
    for other in PARSERS[1:]:
        counts = Counter(f.split(" (position")[0].split(" at line")[0][:70] for f in messages[other])
        report[f"{other}_failure_messages"] = dict(counts.most_common(8))
    if args.dump_disagreements:
        dump_to_judge(Path(args.dump_disagreements), commands, rows, results, failed)
    report["microseconds_per_command"] = {n: round(secs[n] / len(commands) * 1e6, 1) for n in PARSERS}
    report["time_ratio_to_hand"] = {n: round(secs[n] / secs["hand"], 2) for n in PARSERS}
    atomic_write_text(Path(args.out), json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
