"""`imprint tune --apply`: the recommended setting written where the shipped
defaults live, as a diff to commit.

The shipped rule has one home per part: the patience is the default of
`chat.research_no_progress_rounds` in `imprint_core/settings.py`, the novelty
fields are `NoveltyConfig`'s defaults in `imprint_core/novelty/rule.py`. The
loop, the scenario model, `imprint replay`, `tune` and the gate all read them
from there (the gate's `reports/gate.toml` restates neither), so changing
them there changes the shipped rule everywhere. Files are those of the
checkout in the current folder, never of the installed package.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError
from imprint_core.files import atomic_write_text

from ..conventions import workdir

SETTINGS = Path("imprint_core/settings.py")
NOVELTY = Path("imprint_core/novelty/rule.py")
_PATIENCE = re.compile(r'(SettingSpec\("chat\.research_no_progress_rounds", int, "rounds", )(\d+)(,)')


def _field(name: str) -> re.Pattern:
    return re.compile(rf"^(    {re.escape(name)}: [\w|]+ = )(\S+?)(\s+#.*)?$", re.M)


def _literal(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000:
        return f"{v:_}"
    return repr(v)


def planned_edits(patience: int | None, changed: dict[str, Any], root: Path | None = None) -> dict[Path, tuple[str, str]]:
    """{file: (old text, new text)} for the setting; UserInputError when the
    current folder is not a checkout or a default cannot be found."""
    root = root or workdir()
    out: dict[Path, tuple[str, str]] = {}

    def read(rel: Path) -> str:
        f = root / rel
        if not f.is_file():
            raise UserInputError("not found: run `imprint tune --apply` from the root of a checkout", file=str(f),
                                 key="--apply")
        return f.read_text(encoding="utf-8")

    if patience is not None:
        text = read(SETTINGS)
        new, n = _PATIENCE.subn(lambda m: f"{m.group(1)}{patience}{m.group(3)}", text, count=1)
        if not n:
            raise UserInputError("the default of chat.research_no_progress_rounds is not where --apply looks",
                                 file=str(root / SETTINGS), key="chat.research_no_progress_rounds")
        if new != text:
            out[root / SETTINGS] = (text, new)
    if changed:
        text = read(NOVELTY)
        new = text
        for name, value in changed.items():
            new, n = _field(name).subn(lambda m: f"{m.group(1)}{_literal(value)}{m.group(3) or ''}", new, count=1)
            if not n:
                raise UserInputError(f"the default of NoveltyConfig.{name} is not where --apply looks",
                                     file=str(root / NOVELTY), key=name)
        if new != text:
            out[root / NOVELTY] = (text, new)
    return out


def apply(patience: int | None, changed: dict[str, Any], root: Path | None = None) -> str:
    """Write the edits (each file atomically) and return their unified diff."""
    edits = planned_edits(patience, changed, root)
    base = root or workdir()
    diff = []
    for f, (old, new) in edits.items():
        rel = f.relative_to(base) if f.is_relative_to(base) else f
        diff += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     f"a/{rel}", f"b/{rel}")
    for f, (_, new) in edits.items():
        atomic_write_text(f, new)
    return "".join(diff)
