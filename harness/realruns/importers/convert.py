"""Detect a raw file's format, convert it, and write round logs.

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

from .chat import import_openai_chat, import_tau_bench
from .inspect import import_inspect
from .intercode import import_intercode, is_intercode
from .minisweagent import import_mini_swe_agent
from .otel import import_otel
from .rawfiles import FILE_SUFFIXES, FOLDER_SUFFIXES, FORMATS, OTLP_KEY, Archive, Source, TextLog, load, \
    output_stem, raw_suffix
from .react import import_fireact, import_reflexion, is_fireact, is_reflexion
from .webshop import import_webshop_notebook, is_webshop_notebook
from .whoandwhen import import_who_and_when

CONVERTERS: dict[str, Callable[[Any, str | Path], list[RoundLog]]] = {
    "inspect": import_inspect,
    "otel": import_otel,
    "mini-swe-agent": import_mini_swe_agent,
    "who-and-when": import_who_and_when,
    "tau-bench": import_tau_bench,
    "openai-chat": import_openai_chat,
    "react-webshop": import_webshop_notebook,
    "fireact": import_fireact,
    "reflexion": import_reflexion,
    "intercode": import_intercode,
}
MULTI_RUN_FORMATS = frozenset({"tau-bench", "inspect", "otel", "react-webshop", "fireact", "reflexion", "intercode"})
"""Formats whose one file holds many runs: `OUT/<file stem>/<run>.jsonl`."""

Progress = Callable[[int, int, str], None]


def detect(data: Any) -> str | None:
    """The format of parsed data, by shape (None: none of them):

    - a zip archive (`rawfiles.Archive`), or an object with an `eval` object and
      `samples`, `status` or `version`: inspect (an inspect_ai log);
    - an object with `resourceSpans`, or a list of them (JSON lines): otel (OTLP JSON);
    - an object with `trajectory_format: mini-swe-agent-*`, or `messages` and `info`: mini-swe-agent;
    - an object with `history` and one of `mistake_agent`, `question`, `is_correct`, `is_corrected`: who-and-when;
    - an object of runs with `turn_history` and an `ic_*` environment (or such an object under `logs`): intercode;
    - a list of objects with `task_id` and `traj`: tau-bench;
    - a list of objects with `role`, or an object with `messages`: openai-chat;
    - an object of runs, the first with `traj`, `em` or `reward`: fireact;
    - a text file (`TextLog`) with `BEGIN TRIAL` and `BEGIN ... AGENTS` lines: reflexion;
    - a Jupyter notebook (`cells`) that printed WebShop episodes: react-webshop.
    """
    if isinstance(data, Archive):
        return "inspect"
    if isinstance(data, TextLog):
        return "reflexion" if is_reflexion(data) else None
    if isinstance(data, dict) and OTLP_KEY in data:
        return "otel"
    if isinstance(data, dict) and isinstance(data.get("eval"), dict) \
            and any(k in data for k in ("samples", "status", "version")):
        return "inspect"
    if isinstance(data, dict):
        tf = data.get("trajectory_format")
        if (isinstance(tf, str) and tf.startswith("mini-swe-agent")) or ("messages" in data and "info" in data):
            return "mini-swe-agent"
        if "history" in data and any(k in data for k in ("mistake_agent", "question", "is_correct", "is_corrected")):
            return "who-and-when"
        if is_intercode(data):
            return "intercode"
        if "messages" in data:
            return "openai-chat"
        if is_webshop_notebook(data):
            return "react-webshop"
        if is_fireact(data):
            return "fireact"
        return None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        if OTLP_KEY in data[0]:
            return "otel"
        if "task_id" in data[0] and "traj" in data[0]:
            return "tau-bench"
        if "role" in data[0]:
            return "openai-chat"
    return None


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
    if fmt is not None and fmt not in CONVERTERS:
        raise UserInputError(f"unknown format {fmt!r}", key="--format", expected="one of " + ", ".join(FORMATS))


def _detect_or_fail(data: Any, path: str | Path) -> str:
    fmt = detect(data)
    if fmt is None:
        Source(path).fail(f"not a known trajectory format: {describe_shape(data)}", line=1, key="(top level)")
    return fmt


def detect_format(path: str | Path) -> str:
    """The format of a raw file (one of `FORMATS`); a file of none of them fails naming it."""
    return _detect_or_fail(load(path), path)


def import_file(path: str | Path, fmt: str | None = None) -> list[RoundLog]:
    """One round log per trajectory in the file (a tau-bench file holds many)."""
    _check_format(fmt)
    data = load(path, Source(path, fmt))
    return CONVERTERS[fmt or _detect_or_fail(data, path)](data, path)


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
    if fmt in MULTI_RUN_FORMATS:
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
        logs = CONVERTERS[file_fmt](data, f)
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
