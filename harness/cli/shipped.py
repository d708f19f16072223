"""`imprint tune --apply`: the recommended setting written where the shipped
defaults live, as a diff to commit.

The shipped rule has one home per part: the patience is the default of
`chat.research_no_progress_rounds` in `imprint_core/settings.py`, the novelty
fields are `NoveltyConfig`'s defaults in `imprint_core/novelty/config.py`. The
loop, the scenario model, `imprint replay`, `tune` and the gate all read them
from there (the gate's `reports/gate.toml` restates neither), so changing
them there changes the shipped rule everywhere. Files are those of the
checkout in the current folder, never of the installed package.

The two files are written as one unit (both or neither), under a lock, and
planned from what they hold under that lock: a second `--apply` that ran
beside this one, or before it since this tune began, changed defaults this
tune measured, and writing over it would ship a combination neither
evaluated, so it is refused.
"""
from __future__ import annotations

import ast
import difflib
import os
import re
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError
from imprint_core.files import write_files
from imprint_core.novelty import config as novelty_config
from imprint_core.settings import SPECS

from ..conventions import locked, workdir
from ..realruns.noveltyconfigs import SHIPPED, as_dict

SETTINGS = Path("imprint_core/settings.py")
NOVELTY = Path("imprint_core/novelty/config.py")
_PATIENCE = re.compile(r'(SettingSpec\("chat\.research_no_progress_rounds", int, "rounds", )(\d+)(,)')


def _field(name: str) -> re.Pattern:
    """A NoveltyConfig field's default: `    name: type = _knob(DEFAULT, "what it means", ...)`."""
    return re.compile(rf"^(    {re.escape(name)}: [\w|]+ = _knob\()([^,\s]+)(,)", re.M)


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
        new = _replaced(text, _PATIENCE, str(patience), str(root / SETTINGS), "chat.research_no_progress_rounds")
        if new != text:
            out[root / SETTINGS] = (text, new)
    if changed:
        text = read(NOVELTY)
        new = text
        for name, value in changed.items():
            new = _replaced(new, _field(name), _literal(value), str(root / NOVELTY), name,
                            f"the default of NoveltyConfig.{name}")
        if new != text:
            out[root / NOVELTY] = (text, new)
    return out


def _replaced(text: str, pattern: re.Pattern, value: str, file: str, key: str, what: str | None = None) -> str:
    """`text` with the default `pattern` finds set to `value`, and the comment
    right above it, where it names the old value as chosen ("`imprint tune`
    chose 9", or a block opening "# 9, not ..."), naming the new one: a
    comment must not keep vouching for a value that is gone."""
    m = pattern.search(text)
    if not m:
        raise UserInputError(f"{what or 'the default of ' + key} is not where --apply looks", file=file, key=key)
    old = m.group(2)
    line_start = text.rfind("\n", 0, m.start()) + 1
    indent = re.match(r"[ \t]*", text[line_start:]).group()
    above = text[:line_start].split("\n")[:-1]
    first = len(above)
    while first > 0 and re.match(rf"{re.escape(indent)}#", above[first - 1]):   # the comment block above, same indent
        first -= 1
    block = "\n".join(above[first:])
    if block and old != value:
        number = rf"(?<![\w.]){re.escape(old)}(?![\w.])"
        block = re.sub(rf"(\bchose\s+){number}", lambda b: b.group(1) + value, block)
        block = re.sub(rf"\A({re.escape(indent)}#\s+){number}", lambda b: b.group(1) + value, block)
    head = "\n".join(above[:first] + ([block] if block else []))
    head += "\n" if line_start else ""
    return head + text[line_start:m.start()] + m.group(1) + value + (m.group(3) or "") + text[m.end():]


def _default_in(text: str, pattern: re.Pattern) -> Any:
    """The value a default's line in `text` holds: a literal, or a name of the
    novelty module (`SHINGLE_WORDS`); None when it is neither."""
    m = pattern.search(text)
    if not m:
        return None
    src = m.group(2)
    try:
        return ast.literal_eval(src)
    except (ValueError, SyntaxError):
        return getattr(novelty_config, src, None) if src.isidentifier() else None


def _unchanged_since_measured(patience: int | None, changed: dict[str, Any], root: Path) -> None:
    """Refuse when a default this apply leaves as it is no longer holds the
    value this process measured (the imported one): the file was changed
    since, by another `--apply` or by hand, and the result would be a
    combination nobody evaluated."""
    checks: list[tuple[Path, str, re.Pattern, Any]] = []
    if patience is None:
        checks.append((SETTINGS, "chat.research_no_progress_rounds", _PATIENCE,
                       SPECS["chat.research_no_progress_rounds"].default))
    checks += [(NOVELTY, name, _field(name), value) for name, value in as_dict(SHIPPED).items() if name not in changed]
    texts: dict[Path, str] = {}
    for rel, key, pattern, measured in checks:
        if rel not in texts:
            texts[rel] = (root / rel).read_text(encoding="utf-8")
        now = _default_in(texts[rel], pattern)
        if now != measured:
            raise UserInputError(f"the default is now {now!r}, not the {measured!r} this tune measured (changed by "
                                 "another `imprint tune --apply` or by hand since): nothing written",
                                 file=str(root / rel), key=key, expected="a tune run against the current defaults")


def _check_writable(files: list[Path]) -> None:
    """Name the first file that cannot be replaced, before anything is written."""
    for f in files:
        for target in (f, f.parent):
            if not os.access(target, os.W_OK):
                raise UserInputError("cannot write it; nothing written", file=str(target), key="--apply",
                                     expected="a checkout whose settings.py and novelty/config.py can be written")


def plan(patience: int | None, changed: dict[str, Any], root: Path | None = None) -> tuple[dict, str]:
    """The edits `apply` would make and their unified diff, nothing written
    (`--dry-run`, and the diff shown before `--apply` asks)."""
    base = root or workdir()
    edits = planned_edits(patience, changed, base)
    _unchanged_since_measured(patience, changed, base)
    diff = []
    for f, (old, new) in edits.items():
        rel = f.relative_to(base) if f.is_relative_to(base) else f
        diff += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     f"a/{rel}", f"b/{rel}")
    return edits, "".join(diff)


def apply(patience: int | None, changed: dict[str, Any], root: Path | None = None, *,
          shown: str | None = None) -> str:
    """Write the edits to both files, or to neither, and return their unified
    diff. The files are read again under the lock, and refused when a default
    this tune measured has changed since (`_unchanged_since_measured`), or
    when the diff is no longer the one `shown` to the user."""
    base = root or workdir()
    with locked(base / SETTINGS.parts[0], command="tune --apply", what="checkout's shipped defaults",
                key="--apply", expected="a checkout whose files can be written"):
        edits, diff = plan(patience, changed, base)
        if shown is not None and diff != shown:
            raise UserInputError("the files changed since the diff was shown: nothing written", key="--apply",
                                 expected="imprint tune --apply again, to see the diff it would write now")
        if edits:
            _check_writable(list(edits))
            folder = Path(os.path.commonpath(list(edits)))
            folder = folder if folder.is_dir() else folder.parent
            try:
                write_files(folder, {f.relative_to(folder): new for f, (_, new) in edits.items()}, tag="tune-apply")
            except OSError as exc:
                named = next((Path(n) for n in (exc.filename2, exc.filename) if n and Path(n) in edits),
                             next(iter(edits)))
                raise UserInputError(f"cannot write it: {exc.strerror or exc}; nothing written", file=str(named),
                                     key="--apply", expected="a checkout whose files can be written") from None
    return diff
