"""Importable formats register, as stop rules do.

A format is an object with four attributes (`Format` is the plain one):

- `name`: what `imprint import --format NAME` and a round log's
  `source_format` call it;
- `detect(data) -> bool`: whether parsed data (`rawfiles.load`: a JSON value,
  JSON lines as a list, a `TextLog` for a `.txt` file, an `Archive` for a
  zip) is in this format, by its shape alone;
- `convert(data, path) -> list[RoundLog]`: the runs the file holds, one round
  log each;
- `many_runs`: whether one file holds many runs (its logs are written to
  `OUT/<file stem>/<run>.jsonl`; else `OUT/<file stem>.jsonl`).

The built-in formats are declared by their modules (a `FORMATS` tuple each)
and listed, in the order detection tries them, by `convert.py`, which hands
them to `register_builtin`. A user's package adds a format with an entry
point in the group `imprint.importers` whose value is such an object (or a
sequence of them):

    [project.entry-points."imprint.importers"]
    my-agent = "my_package.trajectories:FORMAT"

Entry-point formats are tried after the built-in ones, in name order; a
name already taken, an object without the four attributes, or one that
cannot be loaded is an error naming the entry point.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from imprint_core.errors import UserInputError

if TYPE_CHECKING:
    from ..roundlogs import RoundLog

ENTRY_POINT_GROUP = "imprint.importers"
"""The entry-point group a package adds importable formats under."""

ATTRIBUTES = ("name", "detect", "convert", "many_runs")
"""What a format declares (the module docstring)."""


@dataclass(frozen=True)
class Format:
    """One importable format: its name, how its data looks, how it converts."""
    name: str
    detect: Callable[[Any], bool]
    convert: Callable[[Any, "str | Path"], "list[RoundLog]"]
    many_runs: bool = False


_BUILTIN: list[Any] = []
_plugins: list[Any] | None = None


def register_builtin(formats: Iterable[Any]) -> None:
    """The built-in formats, in detection order (convert.py, once)."""
    for fmt in formats:
        if any(f.name == fmt.name for f in _BUILTIN):
            raise ValueError(f"importable format {fmt.name!r} is declared twice")
        _BUILTIN.append(fmt)


def _checked(obj: Any, where: str) -> Any:
    missing = [a for a in ATTRIBUTES if not hasattr(obj, a)]
    if missing or not isinstance(obj.name, str) or not obj.name or not callable(obj.detect) \
            or not callable(obj.convert):
        raise UserInputError(f"entry point {where} is no importable format (missing or wrong: "
                             f"{', '.join(missing) or 'name, detect or convert'})", key=ENTRY_POINT_GROUP,
                             expected="an object with name, detect(data), convert(data, path) and many_runs, "
                                      "or a sequence of them (harness.realruns.importers.registry.Format)")
    return obj


def _entry_point_formats() -> list[Any]:
    from importlib.metadata import entry_points
    out: list[Any] = []
    taken = {f.name for f in _BUILTIN}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"{ep.name!r} ({ep.value})"
        try:
            loaded = ep.load()
        except Exception as exc:
            raise UserInputError(f"entry point {where} cannot be loaded: {exc}", key=ENTRY_POINT_GROUP) from None
        for fmt in (loaded if isinstance(loaded, (list, tuple)) else [loaded]):
            fmt = _checked(fmt, where)
            if fmt.name in taken:
                raise UserInputError(f"entry point {where} declares format {fmt.name!r}, which is taken",
                                     key=ENTRY_POINT_GROUP, expected="a name no other format has")
            taken.add(fmt.name)
            out.append(fmt)
    return out


def formats() -> tuple[Any, ...]:
    """Every importable format, in the order detection tries them: the
    built-in ones, then those of entry points (loaded once)."""
    global _plugins
    if _plugins is None:
        _plugins = _entry_point_formats()
    return (*_BUILTIN, *_plugins)


def reload() -> None:
    """Read the entry points again at the next `formats()` (a package installed since)."""
    global _plugins
    _plugins = None


def builtin_names() -> tuple[str, ...]:
    """The built-in formats' names, in detection order (no entry point read)."""
    return tuple(f.name for f in _BUILTIN)


def names() -> tuple[str, ...]:
    """The importable formats' names, in detection order."""
    return tuple(f.name for f in formats())


def find(name: str) -> Any | None:
    """The format called `name` (None: no such format)."""
    return next((f for f in formats() if f.name == name), None)


def detect(data: Any) -> str | None:
    """The name of the first format whose `detect` says yes (None: none)."""
    return next((f.name for f in formats() if f.detect(data)), None)


def declared(modules: Sequence[Any]) -> list[Any]:
    """The formats `modules` declare (`FORMATS`), in their order."""
    return [fmt for m in modules for fmt in m.FORMATS]
