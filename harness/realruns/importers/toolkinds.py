"""The small mapping file that overrides the tool-kind rule for one corpus.

`callkinds.classify_tool` decides a named tool's kind from its name and
arguments. A corpus whose tools the rule gets wrong (a `lookup_and_update`
that writes, a `submit_query` that only reads) carries a `tool-kinds.yaml`
in the log's folder or one of the two above it, the nearest one winning:

    search_and_replace: write
    submit_query: read
    ask_operator: ask

Each key is a tool's name as the log records it; each value one of `read`,
`write`, `ask`. The inspect_ai and OpenTelemetry importers apply it to
every call of a listed tool; an unlisted tool keeps the rule's kind.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from imprint_core.errors import UserInputError

from ...yamlsource import line_of, load_yaml
from .callkinds import ASK, READ, WRITE, classify_tool

KINDS_FILE = "tool-kinds.yaml"
LEVELS = 3
"""How many folders up (the log's own included) the mapping is looked for."""
ALLOWED = (READ, WRITE, ASK)

Classifier = Callable[[str, dict], str]


def read_overrides(path: str | Path) -> dict[str, str]:
    """A mapping file's tool -> kind entries; a bad entry fails naming its line and key."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read the tool-kind mapping: {exc}", file=name) from None
    data, lines = load_yaml(text, name)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserInputError(f"wrong type {type(data).__name__}", file=name, line=1, key="(top level)",
                             expected="a mapping of tool name to read, write or ask")
    out: dict[str, str] = {}
    for tool, kind in data.items():
        if kind not in ALLOWED:
            raise UserInputError(f"unknown kind {kind!r}", file=name, line=line_of(lines, (tool,)), key=str(tool),
                                 expected="one of " + ", ".join(ALLOWED))
        out[str(tool)] = kind
    return out


def find_overrides(log_path: str | Path) -> tuple[dict[str, str], str | None]:
    """The nearest mapping file's entries for a log, and its path (None: no file)."""
    folder = Path(log_path).parent
    for _ in range(LEVELS):
        f = folder / KINDS_FILE
        if f.is_file():
            return read_overrides(f), str(f)
        if folder.parent == folder:
            break
        folder = folder.parent
    return {}, None


def classifier(overrides: dict[str, str]) -> Classifier:
    """`classify_tool`, with the mapping's kind for a listed tool."""
    def classify(name: str, args: dict) -> str:
        return overrides.get(name) or classify_tool(name, args)
    return classify
