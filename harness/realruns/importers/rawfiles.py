"""Reading a raw trajectory file, and the one error every importer raises.

A raw file is JSON (or JSON lines when its name ends in `.jsonl`), plain or
gzip-compressed (recognised by its magic bytes, not its name). A JSON file
of several lines, each an OTLP export (`resourceSpans`), is JSON lines
whatever its name: OpenTelemetry's file exporters write one export a line.
A zip archive, or a file named `.eval`, is not parsed here: it is an
`Archive`, which only inspect_ai's reader opens. A file named `.txt` is a
`TextLog` (Reflexion's trial logs are plain text), never parsed as JSON. Every problem
becomes a `UserInputError` that names the file, the line (where the text has
one) or the key path (`messages[4].tool_calls[0].function.name`), and the
formats that can be imported, so the CLI prints one line and no traceback.
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, NoReturn

import jsonlines

from imprint_core.errors import UserInputError, long_number_line
from imprint_core.files import NumberTooLong, UnreadableJSON, json_lines, loads_json

from . import registry

FOLDER_SUFFIXES = (".traj.json.gz", ".otlp.jsonl", ".otlp.json", ".traj.json", ".json.gz", ".json", ".eval")
"""Raw suffixes a folder walk picks up (longest first, so `.traj.json.gz`
wins over `.json.gz`); the output name replaces the suffix by `.jsonl`."""

TEXT_SUFFIXES = (".txt.gz", ".txt")
"""Plain-text logs (Reflexion's trial logs), read as a `TextLog`."""

FILE_SUFFIXES = FOLDER_SUFFIXES + (".jsonl.gz", ".jsonl", ".ipynb") + TEXT_SUFFIXES
"""Suffixes stripped from a file named on the command line. JSON-lines and
text files are read only when named: a folder walk would otherwise take
`index.jsonl` (mini-swe-agent's outcome index) for a trajectory, or a
README for a log; and a notebook (ReAct's WebShop run) any notebook of
analysis beside the runs."""

GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"
"""A zip archive's first bytes: an inspect_ai `.eval` log, whatever its name."""
ARCHIVE_SUFFIXES = (".eval",)
"""Names read as an archive even when their bytes are not a zip (so that
inspect_ai's reader, not the JSON parser, says what is wrong with them)."""
OTLP_KEY = "resourceSpans"
"""The top-level key of an OTLP JSON export request."""
CHUNK = 1 << 16


def raw_suffix(name: str, suffixes: tuple[str, ...] = FILE_SUFFIXES) -> str:
    """The raw suffix of a file name ('' when it has none of `suffixes`)."""
    low = name.lower()
    return next((s for s in suffixes if low.endswith(s)), "")


def output_stem(name: str) -> str:
    """A file name without its raw suffix: `a.b.traj.json.gz` -> `a.b`."""
    return name[: len(name) - len(raw_suffix(name))] or name


class Source:
    """The file being read and the format it is read as: every error names both."""

    def __init__(self, file: str | Path, fmt: str | None = None):
        self.file, self.fmt = str(file), fmt

    def fail(self, message: str, *, key: str | None = None, line: int | None = None,
             expected: str | None = None) -> NoReturn:
        as_fmt = f" (read as {self.fmt})" if self.fmt else ""
        formats = "importable formats: " + ", ".join(registry.names())
        raise UserInputError(message + as_fmt, file=self.file, line=line, key=key,
                             expected=f"{expected}; {formats}" if expected else formats)

    def get(self, obj: dict, key: str, types: type | tuple[type, ...], where: str, expected: str,
            *, default: Any = ..., allow_none: bool = False) -> Any:
        """`obj[key]`, checked against `types` (a bool is never an int); a missing
        key returns `default` when one is given, else fails naming `where + key`."""
        if key not in obj:
            if default is not ...:
                return default
            self.fail("required key is missing", key=where + key, expected=expected)
        value = obj[key]
        if value is None and allow_none:
            return None
        ok_types = types if isinstance(types, tuple) else (types,)
        if not isinstance(value, ok_types) or (isinstance(value, bool) and bool not in ok_types):
            self.fail(f"wrong type {type(value).__name__}", key=where + key, expected=expected)
        return value

    def obj(self, value: Any, where: str, expected: str) -> dict:
        if not isinstance(value, dict):
            self.fail(f"wrong type {type(value).__name__}", key=where, expected=expected)
        return value


class Archive:
    """A zip archive (an inspect_ai `.eval` log), handed to its importer unread."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r})"


class TextLog:
    """A plain-text log (a file named `.txt`), handed to the importers as its text."""

    def __init__(self, path: str | Path, text: str):
        self.path, self.text = Path(path), text

    def __repr__(self) -> str:
        return f"TextLog({str(self.path)!r})"


def _line_at(data: bytes, offset: int | None = None) -> int:
    return data.count(b"\n", 0, len(data) if offset is None else offset) + 1


def _gunzip(raw: bytes, src: Source) -> bytes:
    """Decompress every gzip member; a cut or corrupt stream fails naming the
    line of the decompressed text at which the data stops."""
    out = bytearray()
    rest = raw
    while rest:
        d = zlib.decompressobj(wbits=31)
        pos = 0
        try:
            while pos < len(rest) and not d.eof:
                out += d.decompress(rest[pos:pos + CHUNK])
                pos += CHUNK
            out += d.flush()
        except zlib.error as exc:
            src.fail(f"corrupt gzip data ({exc}); the readable text ends inside this line", line=_line_at(bytes(out)))
        if not d.eof:
            src.fail("truncated gzip stream: the compressed data ends early; the readable text ends inside this line",
                     line=_line_at(bytes(out)))
        rest = d.unused_data
        if rest and not rest.startswith(GZIP_MAGIC):
            break  # trailing padding after the last member, as gzip(1) tolerates
    return bytes(out)


def _read_bytes(path: str | Path, src: Source) -> bytes:
    try:
        return Path(path).read_bytes()
    except IsADirectoryError:
        src.fail("is a directory, not a file")
    except OSError as exc:
        src.fail(f"cannot read: {exc.strerror}")


def read_text(path: str | Path, src: Source, raw: bytes | None = None) -> str:
    """The file's text: gunzipped when it starts with the gzip magic bytes, UTF-8 (a BOM is dropped)."""
    if raw is None:
        raw = _read_bytes(path, src)
    if raw.startswith(GZIP_MAGIC):
        raw = _gunzip(raw, src)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        src.fail(f"not UTF-8 text ({exc.reason} at byte {exc.start})", line=_line_at(raw, exc.start))
    return text.removeprefix("\ufeff")


TOO_DEEP = "nested too deeply to read (over the parser's recursion limit)"
"""What a file nested past json's recursion limit is told: a mistake in the input, not a crash."""


def _json_error(exc: json.JSONDecodeError, text: str, src: Source, line_offset: int = 0) -> NoReturn:
    cut = exc.pos >= len(text.rstrip())
    why = "the JSON ends early (is the file cut off?)" if cut else f"not valid JSON: {exc.msg}"
    src.fail(f"{why} at column {exc.colno}", line=exc.lineno + line_offset)


def load(path: str | Path, src: Source | None = None) -> Any:
    """Parse a raw file: JSON, JSON lines (a list of the lines' values) when
    the name ends in `.jsonl` or `.jsonl.gz`, or a `TextLog` when it ends in `.txt`."""
    src = src or Source(path)
    raw = _read_bytes(path, src)
    if raw.startswith(ZIP_MAGIC) or Path(path).name.lower().endswith(ARCHIVE_SUFFIXES):
        return Archive(path)
    text = read_text(path, src, raw)
    if not text.strip():
        src.fail("empty file", line=1)
    if Path(path).name.lower().endswith(TEXT_SUFFIXES):
        return TextLog(path, text)
    if Path(path).name.lower().endswith((".jsonl", ".jsonl.gz")) or _otlp_lines(text):
        try:
            return [value for _, value in json_lines(text)]
        except jsonlines.InvalidLineError as exc:
            if isinstance(exc.__cause__, json.JSONDecodeError):
                _json_error(exc.__cause__, exc.line, src, line_offset=exc.lineno - 1)
            src.fail(_unreadable(exc.__cause__), line=exc.lineno)
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        _json_error(exc, text, src)
    except UnreadableJSON as exc:
        src.fail(_unreadable(exc), line=long_number_line(text) if isinstance(exc, NumberTooLong) else 1)


def _unreadable(exc: BaseException | None) -> str:
    return str(exc) if isinstance(exc, NumberTooLong) else TOO_DEEP


def _otlp_lines(text: str) -> bool:
    """Whether the text is several lines whose first is a whole OTLP export object."""
    first, _, rest = text.lstrip().partition("\n")
    if not rest.strip() or not first.startswith("{") or OTLP_KEY not in first:
        return False
    try:
        return isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):
        return False


def __getattr__(name: str) -> Any:
    if name == "FORMATS":    # the importable formats' names, in detection order (registry.names())
        return registry.names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
