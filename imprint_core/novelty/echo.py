"""Echoes: a call's own arguments, echoed in its result, are not evidence.

A search tool that writes `Search results for "<query>":` above its hits, or
returns `{"query": q, "results": [...]}`, would otherwise turn every changed
query into new text ("changed queries alone do not establish progress").

The arguments' scalar leaves (strings, numbers, booleans; lists and nested
objects are walked, a list item keeps its parent's key) are normalized like
the evidence. In the normalized result an echo is:
- a string value with at least three letters or digits (mask placeholders
  such as <date> left out), wherever it stands as whole words;
- any value, written after its own name: `page": 2`, `lang=en`.
Shingles that touch an echo are not judged (fingerprints.windows_of):
they are remembered, so the same evidence is known whichever query fetched
it, but they make nothing new.

A JSON result (up to EMPTY_JSON_CHARS) whose leaves are all null, empty
strings, empty containers or echoed values is an empty read.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterator

import numpy as np

from .fingerprints import Lines
from .normalization import normalize

EMPTY_JSON_CHARS = 4_096
_PLACEHOLDER = re.compile(r"<[a-z]+>")
_DIGIT = re.compile(r"\d")


def leaves(arguments: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """(name, value) of every scalar in the arguments."""
    if isinstance(arguments, dict):
        for k, v in arguments.items():
            yield from leaves(v, str(k))
    elif isinstance(arguments, (list, tuple)):
        for v in arguments:
            yield from leaves(v, key)
    elif isinstance(arguments, (str, int, float)):
        yield key, arguments


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


class Echoes:
    """The echoes of one call's arguments, for one normalization."""

    def __init__(self, arguments: dict, variant: str):
        self.variant = variant
        self.strings: set[str] = set()
        self.scalars: set[Any] = set()      # numbers and booleans, as JSON gives them back
        pairs: set[tuple[str, str]] = set()
        anywhere: set[str] = set()
        for name, value in leaves(arguments):
            text = " ".join(normalize(_text(value), variant).split())
            if isinstance(value, str):
                self.strings.add(text)
            else:
                self.scalars.add((type(value) is bool, value))
            if not text:
                continue
            if isinstance(value, str) and sum(map(str.isalnum, _PLACEHOLDER.sub("", text))) >= 3:
                anywhere.add(text)
            name = " ".join(normalize(name, variant).split())
            if name:
                pairs.add((name, text))
        self.pattern = _pattern(frozenset(anywhere), frozenset(pairs)) if anywhere or pairs else None
        # whether an echo may hold a digit (else a digit in a JSON result is evidence)
        self.digits = bool(self.scalars) or any(_DIGIT.search(v) for v in self.strings)

    def words(self, lines: Lines, first_line: int, last_line: int, flags: np.ndarray) -> bool:
        """Flag the words of lines first_line..last_line that an echo touches; whether any was."""
        if self.pattern is None:
            return False
        text, starts = _decoded(lines)
        w0 = int(lines.first[first_line])
        w1 = int(lines.first[last_line] + lines.size[last_line])
        lo, hi = int(lines.bounds[w0]) + 1, int(lines.bounds[w1])
        if starts is not None:                       # byte offsets to character offsets
            lo, hi = starts.searchsorted([lo, hi]).tolist()
        found = False
        for m in self.pattern.finditer(text, lo, hi):
            ends = np.array([m.start(), m.end() - 1])
            a, b = lines.word_at(ends if starts is None else starts[ends]).tolist()
            flags[a:b + 1] = True
            found = True
        return found


def _decoded(lines: Lines) -> tuple[str, np.ndarray | None]:
    """The lines' text, and the byte offset of each character (None: ASCII, the same)."""
    got = getattr(lines, "_decoded", None)
    if got is None:
        text = lines.data.decode()
        starts = None
        if len(text) != len(lines.data):
            b = np.frombuffer(lines.data, np.uint8)
            starts = np.append(((b & 0xC0) != 0x80).nonzero()[0], b.size)
        got = lines._decoded = (text, starts)
    return got


def _bounded(v: str, left_of: str, right_of: str) -> str:
    """v, not inside a longer word: no word character before it if left_of
    starts with one, nor after it if right_of ends with one."""
    left = r"(?<!\w)" if re.match(r"\w", left_of[:1]) else ""
    right = r"(?!\w)" if re.match(r"\w", right_of[-1:]) else ""
    return left + v + right


@functools.lru_cache(maxsize=1_024)
def _pattern(anywhere: frozenset[str], pairs: frozenset[tuple[str, str]]) -> re.Pattern[str]:
    alts = [_bounded(re.escape(n) + r'"?[:=] ?"?' + re.escape(v), n, v) for n, v in pairs]
    alts += [_bounded(re.escape(v), v, v) for v in anywhere]
    alts.sort(key=len, reverse=True)   # the longest first
    return re.compile("|".join(alts))


def evidence_free(text: str, echoes: Echoes | None) -> bool:
    """Whether text is a JSON value (up to EMPTY_JSON_CHARS) with nothing in
    it but nulls, empty strings, empty containers and the call's arguments."""
    s = text.strip()
    if not s or s[0] not in "[{" or len(s) > EMPTY_JSON_CHARS:
        return False
    if (echoes is None or not echoes.digits) and _DIGIT.search(s):   # a number, or a digit in a string
        return False
    try:
        value = json.loads(s)
    except ValueError:
        return False
    return _empty(value, echoes)


def _empty(value: Any, echoes: Echoes | None) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, dict):
        return all(_empty(v, echoes) for v in value.values())
    if isinstance(value, list):
        return all(_empty(v, echoes) for v in value)
    if echoes is None:
        return False
    if isinstance(value, str):
        return " ".join(normalize(value, echoes.variant).split()) in echoes.strings
    return (type(value) is bool, value) in echoes.scalars
