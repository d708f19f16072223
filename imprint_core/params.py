"""Parameter values, typed: one converter for every road a parameter comes by.

A stop rule's parameters and NoveltyConfig's fields arrive as text (the
command line: `--param`, `--grid`, `--novelty`, `RULE[NAME=VALUE,...]`) or
as values already parsed (a TOML `--params` file, `gate.toml`, a scenario's
`stop_rule_params`). `convert` turns either into a value of the parameter's
type, or refuses it: an integer parameter takes no 2.5, NaN or inf, whatever
road it came by, since a rule given one would silently never stop.

Lists: items are separated by `LIST_SEPARATOR`; brackets group, so a list
can sit where commas already separate something else (`any[rules=[record,
gemini-cli],gemini-cli.threshold=3]`, `--grid rules=[a,b],[c]`).
"""
from __future__ import annotations

import enum
import json
import math
import types
import typing
from typing import Any

LIST_SEPARATOR = ","
OPEN, CLOSE = "[", "]"
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


class ParamError(ValueError):
    """A value refused: what is wrong, and what was expected."""

    def __init__(self, message: str, expected: str):
        super().__init__(message)
        self.message, self.expected = message, expected


def split_top(text: str, sep: str = LIST_SEPARATOR) -> list[str]:
    """`text` cut at each `sep` outside brackets (brackets nest):
    `a,b[x=1,y=2],[c,d]` -> ['a', 'b[x=1,y=2]', '[c,d]']."""
    parts, cur, depth = [], [], 0
    for ch in text:
        if ch == OPEN:
            depth += 1
        elif ch == CLOSE:
            depth -= 1
            if depth < 0:
                raise ParamError(f"{text!r} closes a bracket it never opened", "balanced [ and ]")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ParamError(f"{text!r} leaves a bracket open", "balanced [ and ]")
    parts.append("".join(cur))
    return parts


def list_items(text: str) -> list[str]:
    """The items of a list written as text: `a,b` or `[a,b]`; empty items dropped."""
    t = text.strip()
    if t.startswith(OPEN) and t.endswith(CLOSE) and len(split_top(t)) == 1:
        t = t[1:-1]
    return [p.strip() for p in split_top(t) if p.strip()]


def type_of_default(default: Any) -> Any:
    """The type a parameter takes when only its default says: the default's
    own type, a list of its first item's type, or Any for None."""
    if default is None:
        return Any
    if isinstance(default, (list, tuple)):
        item = type_of_default(default[0]) if default else Any
        return (list if isinstance(default, list) else tuple)[item] if item is not Any else type(default)
    return type(default)


def type_name(typ: Any) -> str:
    """How `expected` words a type: `an integer`, `a number`, ..."""
    origin = typing.get_origin(typ)
    if typ is Any:
        return "any value"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) if a is not type(None) else "none" for a in typing.get_args(typ))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(typ)))
    if typ in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(typ) if a is not Ellipsis]
        return f"a list ({type_name(args[0]) if args else 'any value'} each), e.g. a{LIST_SEPARATOR}b"
    return {bool: "true or false", int: "an integer", float: "a finite number", str: "text"}.get(
        typ, with_article(str(getattr(typ, "__name__", typ))))


def with_article(noun: str) -> str:
    """`an object`, `a dict`: a noun with the article its sound takes (by its first letter)."""
    return ("an " if noun[:1].lower() in "aeiou" and noun[:1] else "a ") + noun


def convert(value: Any, typ: Any) -> Any:
    """`value` (text, or a value already parsed) as type `typ`; ParamError
    naming the value when it is not one."""
    expected = type_name(typ)

    def refuse(why: str | None = None) -> ParamError:
        return ParamError(why or f"{value!r} is not {expected}", expected)

    if typ is Any or typ is object:
        return value
    origin = typing.get_origin(typ)
    text = value.strip() if isinstance(value, str) else None
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(typ)
        if type(None) in args and (value is None or text is not None and text.lower() in ("none", "null")):
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return convert(value, a)
            except ParamError:
                continue
        raise refuse()
    if origin is typing.Literal:
        for choice in typing.get_args(typ):
            if value == choice and type(value) is type(choice) or text is not None and str(choice) == text:
                return choice
        raise refuse()
    if typ in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        kind = origin or typ
        args = [a for a in typing.get_args(typ) if a is not Ellipsis]
        item = args[0] if args else Any
        if text is not None:
            items: list[Any] = list_items(text)
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)
        else:
            raise refuse()
        return kind(convert(v, item) for v in items)
    if typ is bool:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in TRUE_WORDS:
            return True
        if text is not None and text.lower() in FALSE_WORDS:
            return False
        raise refuse()
    if typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if text is not None:
            try:
                return int(text)
            except ValueError:
                pass
        raise refuse()
    if typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif text is not None:
            try:
                number = float(text)
            except ValueError:
                raise refuse() from None
        else:
            raise refuse()
        if not math.isfinite(number):
            raise refuse()
        return number
    if typ is str:
        if isinstance(value, str):
            return value
        raise refuse()
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        if isinstance(value, typ):
            return value
        for m in typ:
            if text is not None and text in (m.name, str(m.value)):
                return m
        raise refuse(f"{value!r} is not one of {', '.join(m.name for m in typ)}")
    if isinstance(typ, type):
        if isinstance(value, typ):
            return value
        if text is not None:     # a structured value written as JSON
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                raise refuse() from None
            if isinstance(parsed, typ):
                return parsed
        raise refuse()
    return value


def show(value: Any) -> str:
    """A value as `convert` reads it back from text."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return OPEN + LIST_SEPARATOR.join(show(v) for v in value) + CLOSE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)
