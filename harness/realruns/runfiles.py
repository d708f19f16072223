"""Every kind of run file the replaying commands read, as round logs in memory.

`imprint replay`, `imprint tune` and `imprint check` (through the analysis
loader) take three kinds of file, files or folders of them alike:

- `trace`: one of our traces (`imprint-trace/1`), turned into a round log
  as `imprint export-rounds` would;
- `roundlog`: an `imprint-rounds/1` log;
- `raw`: another agent's trajectory in any format `imprint import` reads,
  converted on the fly (nothing is written).

What a file is comes from its first line where its name ends in `.jsonl`
(a JSON object with our `format` is a trace or a round log; an object
without one is a JSON-lines trajectory; anything else is read as a round
log, so that its reader names what is wrong), and from its content
otherwise. A converted run gets the path its round log would have under
`imprint import` beside the raw file (`run/x.traj.json.gz` ->
`run/x.jsonl`, a tau-bench file's runs `gpt-4o-airline/8-1.jsonl`), so labels
keyed by a round log's name or path tail find it.

A file named on the command line that is none of these is an error naming
it; one found in a folder is skipped with a warning. Broken files of a
known kind are errors either way (`UserInputError`: file, line, key).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator

from imprint_core.errors import UserInputError
from imprint_core.trace import TRACE_FORMAT

from ..conventions import iter_paths
from .importers import registry
from .importers.convert import convert, describe_shape, detect, output_paths
from .importers.rawfiles import FOLDER_SUFFIXES, Source, load, raw_suffix
from .roundlogs import ROUNDS_FORMAT, RoundLog, parse_round_log, read_round_log, trace_to_round_log

KINDS = ("trace", "roundlog", "raw")


def expected() -> str:
    """What a run file may be (the importable formats as registered now)."""
    return f"{TRACE_FORMAT}, {ROUNDS_FORMAT}, or a trajectory ({', '.join(registry.names())})"


OTLP_LINE = re.compile(rb'^\s*\{\s*"resourceSpans"\s*:')
"""How an OTLP JSON export line starts: such a line can run to megabytes,
past what is read of a first line, and is a raw trajectory all the same."""
COMPANIONS = ("summary.json", "index.jsonl")
"""Files that sit beside runs without being runs: `imprint run`'s summary
beside its traces, mini-swe-agent's outcome index beside its trajectories
(the importer reads it). In a folder they are skipped without a warning."""


@dataclass
class RunFile:
    """One run read from a file: its round log (whose `path` is the one that
    labels and run ids are matched on), the file it came from and its kind."""
    log: RoundLog
    origin: str
    kind: str
    many: bool = False      # one of several runs in its file (a tau-bench results file)

    @property
    def display(self) -> str:
        return f"{self.origin}#{Path(self.log.path).stem}" if self.many else self.origin

    @property
    def name(self) -> str:
        """The run's name for labels: a trace's scenario, else its round log's stem."""
        if self.kind == "trace":
            return str(self.log.labels.get("scenario") or Path(self.origin).stem)
        return Path(self.log.path).stem


GZ_ROUNDLOG = ".jsonl.gz"
"""A round log committed gzip-compressed (`run.jsonl.gz`): read as `run.jsonl`,
under which name its labels find it."""


def _first_line(path: Path) -> bytes:
    try:
        if path.name.lower().endswith(GZ_ROUNDLOG):
            import gzip
            try:
                with gzip.open(path, "rb") as fh:
                    return fh.readline(1 << 20)
            except (OSError, EOFError):
                return b""      # not gzip after all: read as a round log, whose reader names the problem
        with open(path, "rb") as fh:
            return fh.readline(1 << 20)
    except IsADirectoryError:
        raise UserInputError("is a directory, not a file", file=str(path)) from None
    except OSError as exc:
        raise UserInputError(f"cannot read: {exc.strerror}", file=str(path)) from None


def classify(path: Path, *, named: bool) -> str | None:
    """`trace`, `roundlog`, `raw`, or None (a folder's file that is none of them).

    A named `.jsonl` file whose first line is not a JSON object without a
    `format` is read as a round log, so that the round-log reader names its
    problem (empty, not JSON, an unknown format)."""
    if not path.name.lower().endswith((".jsonl", GZ_ROUNDLOG)):
        return "raw" if named or raw_suffix(path.name, FOLDER_SUFFIXES) else None
    first = _first_line(path)
    try:
        header = json.loads(first.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        header = None
        if OTLP_LINE.match(first):      # an OTLP export line longer than the part read
            return "raw"
    if isinstance(header, dict):
        fmt = header.get("format")
        if fmt == TRACE_FORMAT and header.get("type") == "header":
            return "trace"
        if fmt == ROUNDS_FORMAT:
            return "roundlog"
        if "format" not in header:
            return "raw"
    return "roundlog" if named else None


def _run_file_name(name: str) -> bool:
    return name.lower().endswith((".jsonl", GZ_ROUNDLOG)) or bool(raw_suffix(name, FOLDER_SUFFIXES))


def find_inputs(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, str, bool]], list[str]]:
    """(file, kind, named) for every run file under `paths`, in a natural
    order; folders are searched recursively (hidden folders skipped). A
    missing path is an error; a folder's file of no kind a warning."""
    warnings: list[str] = []
    return list(iter_inputs(paths, warnings)), warnings


def iter_inputs(paths: Iterable[str | Path], warnings: list[str]) -> Iterator[tuple[Path, str, bool]]:
    """`find_inputs`, a file at a time (`conventions.iter_paths`), its
    warnings added to `warnings`: a corpus of 100,000 files is never a list
    of paths."""
    seen: set[str] = set()      # resolved, as text: a file named twice is read once
    for listed in iter_paths(paths, _run_file_name):
        f = listed.path
        kind = classify(f, named=listed.named) or ("roundlog" if listed.named else None)
        if kind is None:
            warnings.append(f"{f}: neither an {TRACE_FORMAT} trace nor an {ROUNDS_FORMAT} log; skipped")
            continue
        resolved = str(f.resolve())
        if resolved not in seen:
            seen.add(resolved)
            yield f, kind, listed.named


def read_raw(path: Path, *, named: bool = True, fmt: str | None = None) -> tuple[list[RoundLog], str | None]:
    """A raw trajectory file's runs, converted in memory, each with the path
    its round log would have beside the file; ([], warning) for a folder's
    file of no known format."""
    data = load(path, Source(path, fmt))
    found = fmt or detect(data)
    if found is None:
        if not named and path.name in COMPANIONS:
            return [], None
        if named:
            raise UserInputError(f"neither a trace, a round log nor a known trajectory: {describe_shape(data)}",
                                 file=str(path), line=1, key="format", expected=expected())
        return [], f"{path}: not a trace, a round log or a known trajectory ({describe_shape(data)}); skipped"
    logs = convert(found, data, path)
    return [replace(log, path=str(path.parent / rel)) for log, rel in
            zip(logs, output_paths(Path(path.name), found, logs))], None


def read_file(path: Path, kind: str, *, named: bool = True) -> tuple[list[RunFile], str | None]:
    """The runs of one file of a known kind (and a warning for a skipped one)."""
    if kind == "trace":
        return [RunFile(parse_round_log(trace_to_round_log(path), str(path)), str(path), kind)], None
    if kind == "roundlog":
        return [RunFile(read_round_log(path), str(path), kind)], None
    logs, warning = read_raw(path, named=named)
    return [RunFile(log, str(path), kind, many=len(logs) > 1) for log in logs], warning


def load_runs(paths: Iterable[str | Path]) -> tuple[list[RunFile], list[str]]:
    """Every run under `paths` (files or folders), each as a round log, and
    the warnings for the files skipped. All files are read before anything
    is returned: one broken file fails the whole call."""
    files, warnings = find_inputs(paths)
    runs: list[RunFile] = []
    for path, kind, named in files:
        got, warning = read_file(path, kind, named=named)
        runs.extend(got)
        if warning:
            warnings.append(warning)
    return runs, warnings
