"""Detect a raw file's format, convert it, and write round logs.

The formats register (registry.py): `MODULES` lists the built-in ones, an
entry point in `imprint.importers` adds one from a user's package.

`import_paths` converts everything first and writes only when every file
converted: an error leaves the output folder as it was. The logs are
written as one unit (`imprint_core.files.write_files`): all of them or none.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

from ..roundlogs import KINDS, ROUNDS_FORMAT, STATUSES, RoundLog

from imprint_core.errors import UserInputError
from imprint_core.files import write_files

from ...conventions import expand_paths

from . import chat, inspect, intercode, minisweagent, otel, react, webshop, whoandwhen
from .rawfiles import FILE_SUFFIXES, FOLDER_SUFFIXES, Archive, Source, TextLog, load, output_stem, raw_suffix
from .registry import declared, find, names, register_builtin
from .registry import detect as detect

MODULES = (inspect, otel, minisweagent, whoandwhen, intercode, chat, webshop, react)
"""The modules of the built-in formats; their `FORMATS`, in this order, are
the order detection tries them (a more specific shape before a looser one:
mini-swe-agent's `messages` and `info` before openai-chat's `messages`).
A format of a user's package registers by entry point (registry.py)."""

register_builtin(declared(MODULES))

Progress = Callable[[int, int, str], None]


def describe_shape(data: Any) -> str:
    """What parsed data looks like, for a message saying it is no known format."""
    if isinstance(data, Archive):
        return "a zip archive"
    if isinstance(data, TextLog):
        first = next((line.strip() for line in data.text.splitlines() if line.strip()), "")
        return f"a text file starting {first[:60]!r}"
    if isinstance(data, dict):
        keys = ", ".join(sorted(map(str, data))[:8]) or "none"
        return f"a JSON object with keys {keys}"
    if isinstance(data, list):
        if not data:
            return "an empty list"
        first = data[0]
        inner = f"objects with keys {', '.join(sorted(map(str, first))[:8])}" if isinstance(first, dict) \
            else type(first).__name__ + " values"
        return f"a list of {inner}"
    return f"a JSON {type(data).__name__}"


def _check_format(fmt: str | None) -> None:
    if fmt is not None and find(fmt) is None:
        raise UserInputError(f"unknown format {fmt!r}", key="--format", expected="one of " + ", ".join(names()))


def convert(fmt: str, data: Any, path: str | Path) -> list[RoundLog]:
    """The round logs of parsed data in format `fmt` (a registered name)."""
    found = find(fmt)
    assert found is not None, fmt
    return found.convert(data, path)


def _detect_or_fail(data: Any, path: str | Path) -> str:
    fmt = detect(data)
    if fmt is None:
        Source(path).fail(f"not a known trajectory format: {describe_shape(data)}", line=1, key="(top level)")
    return fmt


def detect_format(path: str | Path) -> str:
    """The format of a raw file (one of `registry.names()`); a file of none of them fails naming it."""
    return _detect_or_fail(load(path), path)


def import_file(path: str | Path, fmt: str | None = None) -> list[RoundLog]:
    """One round log per trajectory in the file (a tau-bench file holds many)."""
    _check_format(fmt)
    data = load(path, Source(path, fmt))
    return convert(fmt or _detect_or_fail(data, path), data, path)


def render_round_log(log: RoundLog) -> str:
    """The `imprint-rounds/1` text of a log (what `harness.realruns.roundlogs.read_round_log` reads)."""
    lines = [json.dumps({"format": ROUNDS_FORMAT, "source": log.source, "labels": log.labels}, ensure_ascii=False)]
    for n, rnd in enumerate(log.rounds, start=1):
        calls = []
        for c in rnd.calls:
            if c.kind not in KINDS or c.status not in STATUSES:      # a bug of ours, never the input's
                raise ValueError(f"{log.path}: round {n}: kind {c.kind!r} / status {c.status!r}")
            call = {"tool": c.tool, "args": c.args, "kind": c.kind, "status": c.status, "result": c.result}
            if c.segments is not None:
                call["segments"] = c.segments
            if c.request is not None:
                call["request"] = c.request
            calls.append(call)
        lines.append(json.dumps({"round": n, "calls": calls}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def raw_files(paths: Iterable[str | Path]) -> list[tuple[Path, Path]]:
    """(file, path relative to what was named) for every file to import: a
    named file itself; in a named folder, every file below it ending in one
    of `FOLDER_SUFFIXES` (hidden files and folders skipped), in `natural_order`."""
    return [(f.path, f.relative) for f in expand_paths(paths, lambda name: bool(raw_suffix(name, FOLDER_SUFFIXES)))]


def output_paths(rel: Path, fmt: str, logs: list[RoundLog]) -> list[Path]:
    """Where a file's logs go, relative to the output folder: the raw suffix
    replaced by `.jsonl` (`run/x.traj.json.gz` -> `run/x.jsonl`), or for a
    file of many runs a folder named after it (`gpt-4o-airline/8-1.jsonl`,
    an inspect_ai log's `research/loop-1.jsonl`, an OTLP file's
    `spans/<trace id>.jsonl`)."""
    stem = output_stem(rel.name)
    if find(fmt).many_runs:
        return [rel.parent / stem / log.name for log in logs]
    return [rel.parent / f"{stem}.jsonl" for _ in logs]


def import_paths(paths: Iterable[str | Path], out_dir: str | Path, fmt: str | None = None,
                 progress: Progress | None = None) -> list[Path]:
    """Convert files and folders into `out_dir`; returns the written paths.
    Nothing is written unless every file converts."""
    _check_format(fmt)
    paths = list(paths)
    files = raw_files(paths)
    if not files:
        raise UserInputError("no trajectory files found", file=" ".join(map(str, paths)),
                             expected="files ending in " + ", ".join(FILE_SUFFIXES))
    out_dir = Path(out_dir)
    planned: dict[Path, tuple[str, Path]] = {}
    for done, (f, rel) in enumerate(files, start=1):
        data = load(f, Source(f, fmt))
        file_fmt = fmt or _detect_or_fail(data, f)
        logs = convert(file_fmt, data, f)
        for log, target in zip(logs, output_paths(rel, file_fmt, logs)):
            if target in planned:
                raise UserInputError(f"two inputs would both be written to {out_dir / target} "
                                     f"(the other is {planned[target][1]})", file=str(f),
                                     expected="inputs with distinct names")
            planned[target] = (render_round_log(log), f)
        if progress:
            progress(done, len(files), str(f))
    try:   # all of them or none: a folder that cannot be written leaves no partial set behind
        return write_files(out_dir, {target: text for target, (text, _) in planned.items()}, tag="import")
    except OSError as exc:
        raise UserInputError.from_os_error(exc, doing="write the round logs", key="--out",
                                           expected="a folder that can be written", file=str(out_dir)) from None
