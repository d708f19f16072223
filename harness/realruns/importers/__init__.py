"""Importers: other agents' raw trajectories as `imprint-rounds/1` round logs.

Formats (`FORMATS`, registered: registry.py; a user's package adds one with
an entry point in `imprint.importers`): `inspect` (inspect_ai eval logs), `otel` (OTLP JSON
traces, GenAI conventions or OpenInference), `mini-swe-agent`,
`who-and-when` (Magentic-One and AG2), `intercode` (InterCode's SQL, bash,
Python and CTF results files), `tau-bench`, the generic `openai-chat`
message list, ReAct's WebShop notebook `react-webshop`, and the ReAct
question-answering logs `fireact` (FireAct's trajs files) and `reflexion`
(Reflexion's trial logs, text). The mapping's decisions live where they are
applied, one documented constant or function each: what a call is in
`callkinds` (a shell command line cut by `shellsyntax`; a corpus's
overrides in `toolkinds`), what its result counts as in `resultstatus`;
what a round is in each format's module (`chat`, `inspect`, `otel`,
`minisweagent`, `whoandwhen`, `intercode`, `react`, `webshop`).

    detect_format(path) -> str
    import_file(path, fmt=None) -> list[RoundLog]          # one per trajectory
    import_paths(paths, out_dir, fmt=None, progress=None) -> list[Path]

`imprint import` (harness/cli/import_runs.py) is the command around them.
"""
from typing import Any

from .convert import detect_format, import_file, import_paths, render_round_log
from .registry import ENTRY_POINT_GROUP, Format, formats, names

__all__ = ["ENTRY_POINT_GROUP", "FORMATS", "Format", "detect_format", "formats", "import_file", "import_paths", "names",
           "render_round_log"]


def __getattr__(name: str) -> Any:
    if name == "FORMATS":    # the importable formats' names, entry points' included (registry.names())
        return names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
