"""Event selectors of `expect.events`: `type` or `type[key=value,...]`,
checked against the trace format when a scenario loads, so a misspelled
type or key is an error rather than a count of 0 that always matches."""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

from imprint_core.budget import RequestRecord
from imprint_core.events import EVENT_TYPES, Header

_SELECTOR = re.compile(r"^(?P<type>[a-z_]+)(?:\[(?P<filters>[^\]]*)\])?$")
SYNTAX = "`type` or `type[key=value,...]`"


class SelectorError(ValueError):
    """A selector that names no event type or key of the trace format."""

    def __init__(self, message: str, expected: str):
        super().__init__(message)
        self.message, self.expected = message, expected


@dataclass(frozen=True)
class Selector:
    type: str
    filters: tuple[tuple[str, str], ...]


def line_keys(type_name: str) -> frozenset[str] | None:
    """The keys a trace line of this type has (None: any, as the header's
    caller-supplied meta is written flat)."""
    cls = EVENT_TYPES[type_name]
    if issubclass(cls, Header):
        return None
    names = {f.name for f in fields(cls)} | {"type"}
    if "record" in names:            # settled requests write the ledger's record flat
        names = (names - {"record"}) | {f.name for f in fields(RequestRecord)}
    return frozenset(names)


def parse_selector(text: str) -> Selector:
    """The selector, or a SelectorError naming the unknown type or key and what is allowed."""
    m = _SELECTOR.match(text.strip())
    if not m:
        raise SelectorError(f"bad event selector {text!r}", SYNTAX)
    kind = m.group("type")
    if kind not in EVENT_TYPES:
        raise SelectorError(f"unknown event type {kind!r}", "one of " + ", ".join(sorted(EVENT_TYPES)))
    allowed = line_keys(kind)
    filters = []
    for part in (m.group("filters") or "").split(","):
        if not part.strip():
            continue
        k, eq, v = part.partition("=")
        k = k.strip()
        if not eq or not k:
            raise SelectorError(f"bad filter {part.strip()!r} in {text!r}", SYNTAX)
        # a dotted key reaches into a field holding a mapping (estimates.byte): its first part must exist
        if allowed is not None and k.split(".", 1)[0] not in allowed:
            raise SelectorError(f"unknown key {k!r} of {kind} events", "one of " + ", ".join(sorted(allowed)))
        filters.append((k, v.strip()))
    return Selector(kind, tuple(filters))
