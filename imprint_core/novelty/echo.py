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

Whatever the value (a word the template writes itself, one letter, a
number, `c++`, an empty string, a date the masks replace) and however it is
written (URL-encoded, HTML-escaped, in JSON), text that is a function of the
arguments alone is not evidence: a line whose reading with the value
replaced is one that another value gave before is one of the template's
lines, none of whose words is judged (template_lines).

A unit whose every shingle touches an echo ("The capital of Spain is
Madrid." for the query "capital of Spain") would then judge nothing, so a new
short fact that repeats the query's words could never be progress: such a
unit is judged on its text with each echo replaced by ECHO_MARK instead
(echoed_text), which is the same whichever value was echoed.

An empty read (evidence_free), up to EMPTY_JSON_CHARS, after stripping a
code fence around it: a JSON value whose leaves are all null, empty
strings, empty containers, "no results" phrases or echoed values; one
that holds an empty container and otherwise only numbers and booleans
(`{"results": [], "took": 12}`: the count and timing of nothing); one that
holds a list and whose every list is empty of content, whatever scalars
sit beside (`{"status": "ok", "count": 0, "items": [], "request_id": R}`:
the envelope of nothing, which may change every call); a
"no results" phrase (EMPTY_PHRASE); an HTML page with no text but such a
phrase.
"""
from __future__ import annotations

import functools
import html
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import quote, quote_plus

import numpy as np
import xxhash

from .fingerprints import Lines, _canonical_unit
from .segmentation import Leaves, last_parsed
from ._fast.memo import shared
from .normalization import normalize

EMPTY_JSON_CHARS = 4_096
TEMPLATE_CHARS = 200         # a line that says more than this besides its echoes is not read as a template's
MAX_READ_OCCURRENCES = 4     # a line with more occurrences is read with all or none replaced
ECHO_MARK = "<q>"   # no echo can match it: a string echo has three letters or digits, a pair echo a value
_PLACEHOLDER = re.compile(r"<[a-z]+>")
_AROUND_MARK = re.compile(r"[^\w\s]*(?:" + re.escape(ECHO_MARK) + r"[^\w\s]*\s*)+")
_WORDLIKE = re.compile(r"\w")
# What a tool says when it found nothing (casefolded, spaces collapsed, end punctuation and quotes gone).
# `for` may end it: the echoed query after it is gone by then (`no results for "<q>"` reads `no results for`).
_FOR = r"(?: for(?: .*)?)?"
EMPTY_PHRASE = re.compile(
    r"(?:(?:no|0|zero)(?: search| matching)? (?:results?|matches|match|items?|records?|entries|hits|documents|data"
    r"|output|rows)(?: (?:were |was )?(?:found|returned|available|to show))?" + _FOR +
    r"|(?:found|returned) (?:no|0) (?:results?|matches|items|records|entries|hits|documents|rows)" + _FOR +
    r"|nothing(?: (?:was )?found" + _FOR + r")?|none|null|nil|n/a|empty|\(empty\)|\(no output\)|\(none\)|\[\]|\{\})")
_FENCE = re.compile(r"\A```[\w+-]*[ \t]*\n(.*?)\n?```\Z", re.S)
_HTML = re.compile(r"\A<(?:!doctype|html|head|body|div|p|main|ul|table|span|section)\b", re.I)
_HTML_SKIP = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_TAG = re.compile(r"<[^>]*>")


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


def _leaves_key(arguments: Any, variant: str) -> tuple:
    """What Echoes are built from, as a key: the leaves with their types
    (True and 1, 1 and 1.0 echo differently)."""
    return variant, tuple((name, type(value), value) for name, value in leaves(arguments))


def _leaves_size(arguments: Any, variant: str) -> int:
    return sum(len(_text(v)) + len(n) for n, v in leaves(arguments))


@shared(key=_leaves_key, size=_leaves_size)
def echoes_of(arguments: dict, variant: str) -> "Echoes":
    """Echoes(arguments, variant), one for every config that shares the
    normalization while shared work is on (an Echoes is never changed)."""
    return Echoes(arguments, variant)


class Echoes:
    """The echoes of one call's arguments, for one normalization."""

    def __init__(self, arguments: dict, variant: str):
        self.variant = variant
        self.key = _leaves_key(arguments, variant)
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
        self.alternatives = _alternatives(frozenset(anywhere), frozenset(pairs))
        self.has_echoes = bool(self.alternatives)
        self._arguments = arguments

    # What only template_lines reads, made when first read: an empty read (evidence_free) needs none of it.
    @functools.cached_property
    def forms(self) -> tuple[str, ...]:
        forms = set().union(*(_forms(value, self.variant) for _, value in leaves(self._arguments)))
        return tuple(sorted(forms, key=lambda f: (-len(f), f)))   # the longest first

    @functools.cached_property
    def empty_value(self) -> bool:
        return any(isinstance(v, str) and not normalize("echo " + v, self.variant)[5:].strip()
                   for _, v in leaves(self._arguments))

    @functools.cached_property
    def templated(self) -> bool:
        return bool(self.forms) or self.empty_value

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """The echoes as one regex: the definition that `spans` follows
        without compiling it (a regex a call cost about a millisecond to build)."""
        return _pattern(self.alternatives) if self.alternatives else None

    def spans(self, text: str, lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
        """[m.span() for m in self.pattern.finditer(text, lo, hi)]: at each
        position from lo, the first alternative that matches there, then on
        from its end; the text ends at hi for what follows a match, not for
        what precedes it (as `re` reads pos and endpos)."""
        hi = len(text) if hi is None else hi
        first: dict[int, tuple[int, int]] = {}      # start: (alternative, end) of the first that matches
        for rank, alt in enumerate(self.alternatives):
            for start, end in alt.matches(text, lo, hi):
                if first.get(start, (len(self.alternatives),))[0] > rank:
                    first[start] = (rank, end)
        out: list[tuple[int, int]] = []
        pos = lo
        for start in sorted(first):
            if start >= pos:
                pos = first[start][1]
                out.append((start, pos))
        return out

    def replaced(self, line: str) -> str:
        """A canonical line with each echo, and the quotes and punctuation
        around it, replaced by one ECHO_MARK; tokens of symbols only dropped:
        `for "x":` and `for "x ":` read the same."""
        if not self.has_echoes:
            return line
        return _marked(line, self.spans(line))

    def occurrences(self, line: str, forms: Sequence[str] | None = None) -> list[tuple[int, int]]:
        """Where a canonical line writes an argument value in any of its forms
        (`forms`, whatever its length), as whole words at a word-character
        edge; of overlapping ones, the first and then the longest."""
        found = []
        for f in self.forms if forms is None else forms:
            left, right = _is_word(f[0]), _is_word(f[-1])
            at = line.find(f)
            while at >= 0:
                end = at + len(f)
                if not (left and at > 0 and _is_word(line[at - 1])) and \
                        not (right and end < len(line) and _is_word(line[end])):
                    found.append((at, end))
                at = line.find(f, at + 1)
        found.sort(key=lambda span: (span[0], -span[1]))
        out, pos = [], 0
        for start, end in found:
            if start >= pos:
                out.append((start, end))
                pos = end
        return out

    def words(self, lines: Lines, first_line: int, last_line: int, flags: np.ndarray) -> bool:
        """Flag the words of lines first_line..last_line that an echo touches; whether any was."""
        if not self.has_echoes:
            return False
        text, starts = lines.decoded
        w0 = int(lines.first[first_line])
        w1 = int(lines.first[last_line] + lines.size[last_line])
        lo, hi = int(lines.bounds[w0]) + 1, int(lines.bounds[w1])
        if starts is not None:                       # byte offsets to character offsets
            lo, hi = starts.searchsorted([lo, hi]).tolist()
        found = False
        for start, end in self.spans(text, lo, hi):
            ends = np.array([start, end - 1])
            a, b = lines.word_at(ends if starts is None else starts[ends]).tolist()
            flags[a:b + 1] = True
            found = True
        return found


def _is_word(c: str) -> bool:
    """Whether `re` takes the character for \\w."""
    return c.isalnum() or c == "_"


def _marked(line: str, spans: list[tuple[int, int]]) -> str:
    """line with each span, and the quotes and punctuation around it, one
    ECHO_MARK; tokens of symbols only dropped."""
    out, pos = [], 0
    for start, end in spans:
        out += (line[pos:start], ECHO_MARK)
        pos = end
    text = _AROUND_MARK.sub(f" {ECHO_MARK} ", "".join(out) + line[pos:])
    return " ".join(w for w in text.split() if w == ECHO_MARK or _WORDLIKE.search(w))


@functools.lru_cache(maxsize=4_096, typed=True)     # typed: 1, 1.0 and True are written apart
def _forms(value: Any, variant: str) -> frozenset[str]:
    """The ways a result may write an argument value, normalized like the
    evidence: as it is (masked, so `today` is `<ago>`), URL-encoded, as a
    JSON string's inside, HTML-escaped. Made once per value: an agent sends
    the same arguments again and again."""
    text = _text(value)
    raw = {text}
    if isinstance(value, str):
        raw |= {quote(text, safe=""), quote(text), quote_plus(text), json.dumps(text)[1:-1], html.escape(text)}
    # Masked as inside a line ("0:" at a line's start would be a line number's prefix, and gone).
    return frozenset(f for f in (" ".join(normalize("echo " + r, variant).split())[5:] for r in raw) if f)


_PUNCTUATION = "".join(c for c in map(chr, range(0x2070)) if not _is_word(c) and not c.isspace())


def _bare(reading: str, keep: str | None = None) -> str:
    """A reading without the punctuation at each word's edges (`q=`, `"":`,
    `</h1>`, which a value may glue to its neighbours or not) and without
    its marks: as the template would write it for an empty value (`keep`:
    the marks kept)."""
    return " ".join(w if w == keep else w.strip(_PUNCTUATION) for w in reading.split()
                    if w == keep or (w != ECHO_MARK and w.strip(_PUNCTUATION)))


def _h(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode()) or 1


@dataclass(frozen=True)
class TemplateLines:
    """What template_lines found in one unit."""
    lookups: tuple[tuple[int, tuple[int, ...]], ...]   # (line, its keys): lines that may be the template's
    remember: tuple[int, ...]                          # the keys to remember once the round is judged
    unit_key: int | None    # the whole unit's key, when it holds an echo: seen before, all of it is the template's
    lines: int              # its canonical lines


@shared(key=lambda unit, echoes: (unit, echoes.key), size=lambda unit, echoes: len(unit))
def template_lines(unit: str, echoes: "Echoes") -> TemplateLines:
    """Text that is a function of the call's arguments alone is not evidence,
    whatever the value (a word the template writes itself, one letter, a
    number, `c++`, an empty string, a date the masks replace, URL-encoded).
    What the same template gives for another value tells it: a line is one
    of the template's lines when one of its *readings* was one that an
    earlier call gave. A reading of a canonical line is the line with some
    of its argument occurrences (`Echoes.occurrences`) replaced by
    ECHO_MARK (`Query: query` reads as `query <q>`, `<q> query` or `<q>`);
    a template is also known by its text with the marks removed, which is
    what it gives for an empty value. Only lines that say at most
    TEMPLATE_CHARS besides the occurrences are read. A unit that holds an
    echo and was seen whole before (a template that masks drop the value
    from, `https://x.org/search?q=...` for the query `search`) is the
    template's in every line."""
    canon = _canonical_unit(unit)
    forms = [f for f in echoes.forms if f in canon]
    if not canon:      # no line (fingerprints leave the unit out)
        return TemplateLines((), (), None, 0)
    if not forms and not echoes.empty_value:
        return TemplateLines((), (_h("\x03" + canon),), None, 0)
    lookups, remember = [], [_h("\x03" + canon)]
    lines = canon.split("\n")
    for i, line in enumerate(lines):
        spans = echoes.occurrences(line, forms) if forms and any(f in line for f in forms) else []
        if len(line) - sum(e - s for s, e in spans) > TEMPLATE_CHARS:
            continue
        if spans:
            picks = range(1, 1 << len(spans)) if len(spans) <= MAX_READ_OCCURRENCES else [(1 << len(spans)) - 1]
            readings = {_marked(line, [sp for b, sp in enumerate(spans) if pick >> b & 1]) for pick in picks}
            keys = [_h(_bare(r, keep=ECHO_MARK)) for r in readings]
            bare = [_bare(r) for r in readings]
            # A template seen with a value is known bare too ("\x01"), for a later empty value; one
            # seen with an empty value is known by its bare text ("\x02").
            remember += keys + [_h("\x01" + b) for b in bare]
            lookups.append((i, tuple(keys) + tuple(_h("\x02" + b) for b in bare)))
        elif echoes.empty_value:
            bare_line = _bare(line)
            remember.append(_h("\x02" + bare_line))
            lookups.append((i, (_h("\x01" + bare_line), _h("\x02" + bare_line))))
    return TemplateLines(tuple(lookups), tuple(remember), _h("\x03" + canon) if lookups else None, len(lines))


# Between a name and its value: `"?[:=] ?"?` or ` #?`, in the order `re` tries them.
_SEPARATOR = r'(?:"?[:=] ?"?| #?)'
_SEPARATORS = [(q1, s, q2) for q1 in ('"', "") for s in (" ", "") for q2 in ('"', "")]


@dataclass(frozen=True)
class _Alternative:
    """One echo: `value` as whole words, or after its `name`."""
    regex: str
    name: str | None
    value: str

    def matches(self, text: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """(start, end) of every match starting from lo, overlapping or not."""
        head = self.value if self.name is None else self.name
        left = _is_word(head[0])
        at = text.find(head, lo, hi)
        while at >= 0:
            if not (left and at > 0 and _is_word(text[at - 1])):
                end = self._end(text, at + len(head), hi)
                if end is not None:
                    yield at, end
            at = text.find(head, at + 1, hi)

    def _end(self, text: str, at: int, hi: int) -> int | None:
        """Where the match ends whose head ends at `at`: for a pair, the
        first separator that the value and the right edge follow."""
        value, right = self.value, _is_word(self.value[-1])
        if self.name is None:       # the head was the value
            return None if right and at < hi and _is_word(text[at]) else at
        seps = [f"{q1}{c}{s}{q2}" for q1, s, q2 in _SEPARATORS
                for c in text[at + len(q1):at + len(q1) + 1] if c in ":="] + [" #", " "]
        for sep in seps:
            end = at + len(sep) + len(value)
            if (text.startswith(sep, at, hi) and text.startswith(value, at + len(sep), hi)
                    and not (right and end < hi and _is_word(text[end]))):
                return end
        return None


def _bounded(v: str, left_of: str, right_of: str) -> str:
    """v, not inside a longer word: no word character before it if left_of
    starts with one, nor after it if right_of ends with one."""
    left = r"(?<!\w)" if re.match(r"\w", left_of[:1]) else ""
    right = r"(?!\w)" if re.match(r"\w", right_of[-1:]) else ""
    return left + v + right


@functools.lru_cache(maxsize=1_024)
def _alternatives(anywhere: frozenset[str], pairs: frozenset[tuple[str, str]]) -> tuple[_Alternative, ...]:
    # after its name: `page": 2`, `lang=en`, and in prose, `page 2`, `page #2`
    alts = [_Alternative(_bounded(re.escape(n) + _SEPARATOR + re.escape(v), n, v), n, v) for n, v in pairs]
    alts += [_Alternative(_bounded(re.escape(v), v, v), None, v) for v in anywhere]
    alts.sort(key=lambda a: len(a.regex), reverse=True)   # the longest first
    return tuple(alts)


@functools.lru_cache(maxsize=64)
def _pattern(alternatives: tuple[_Alternative, ...]) -> re.Pattern[str]:
    return re.compile("|".join(a.regex for a in alternatives))


@shared(key=lambda text, echoes: None if callable(echoes) else (text, None if echoes is None else echoes.key),
        size=lambda text, echoes: len(text))      # echoes still to be made: no key (they are, once, by echoes_of)
def evidence_free(text: str, echoes: "Echoes | Callable[[], Echoes | None] | None") -> bool:
    """Whether text is an empty read (the module's docstring): nothing in it
    but the shapes of "no results" and the call's own arguments. `echoes`
    may be a function that makes them: most results are too long to be
    empty, and are judged without them."""
    s = text.strip()
    if not s or len(s) > EMPTY_JSON_CHARS:
        return not s
    fenced = _FENCE.match(s)
    if fenced:
        s = fenced.group(1).strip()
        if not s:
            return True
    page = _HTML.match(s)
    if callable(echoes) and (len(s) <= PHRASE_CHARS or s[0] in "[{\"" or s == "null" or page):
        echoes = echoes()      # only where they can count: plain text past PHRASE_CHARS is no phrase
    if page:
        s = html.unescape(_TAG.sub(" ", _HTML_SKIP.sub(" ", s))).strip()
        return not s or _empty_phrase(s, echoes)
    if s[0] in "[{\"" or s == "null":
        value = last_parsed(s, _NOT_PARSED)    # segment() parsed this very text a moment ago: read it
        if isinstance(value, Leaves):          # a JSON array that the compiled path read without parsing
            if value.first is None:            # nothing but nulls, "" and empty containers: _empty
                return True
            if not _empty(value.first, echoes):
                # A leaf with content: not _empty, nor _lists_of_nothing (for an array, the same
                # walk); _counts_of_nothing is what is left.
                return value.plain and value.hollow
            value = _NOT_PARSED
        if value is _NOT_PARSED:
            try:
                value = json.loads(s)
            except (ValueError, RecursionError):   # not JSON (or nested too deep to be a plain answer)
                value = _NOT_JSON
        if value is not _NOT_JSON:
            try:
                return _empty(value, echoes) or _counts_of_nothing(value) or _lists_of_nothing(value, echoes)
            except RecursionError:
                return False
    return _empty_phrase(s, echoes)


_NOT_JSON = object()
_NOT_PARSED = object()


PHRASE_CHARS = 400
"""Far longer than any way of saying "nothing found"."""


def _empty_phrase(s: str, echoes: Echoes | None) -> bool:
    if len(s) > PHRASE_CHARS:
        return False
    s = " ".join(s.casefold().split()).strip(_EDGES)
    if not s:        # punctuation alone: no words, judged as nothing by the shingles, not a phrase
        return False
    if echoes is not None:
        s = echoes.replaced(" ".join(normalize(s, echoes.variant).split()))
        echoed = ECHO_MARK in s
        s = s.replace(ECHO_MARK, "").strip(_EDGES)
        if not s:    # the call's arguments and nothing else
            return echoed
    return EMPTY_PHRASE.fullmatch(s) is not None


_EDGES = "\"'`.!:;,- "


def _empty(value: Any, echoes: Echoes | None) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, dict):
        return all(_empty(v, echoes) for v in value.values())
    if isinstance(value, list):
        return all(_empty(v, echoes) for v in value)
    if isinstance(value, str):
        if _empty_phrase(value, None):
            return True
        return echoes is not None and " ".join(normalize(value, echoes.variant).split()) in echoes.strings
    return echoes is not None and (type(value) is bool, value) in echoes.scalars


def _lists_of_nothing(value: Any, echoes: Echoes | None) -> bool:
    """An object or array that holds a list, and whose every list holds no
    item with content (`_empty`): whatever scalars sit beside them (timings,
    request ids, timestamps, counts, statuses, the echoed query) describe
    the nothing that was found. The items carry a read's content; the
    scalars around them are the envelope, which may change every call."""
    found = [False]

    def walk(v: Any) -> bool:
        if isinstance(v, list):
            found[0] = True
            return all(_empty(i, echoes) for i in v)
        if isinstance(v, dict):
            return all(walk(i) for i in v.values())
        return True
    return isinstance(value, (dict, list)) and walk(value) and found[0]


def _counts_of_nothing(value: Any) -> bool:
    """A container holding an empty container and otherwise only numbers,
    booleans, nulls and empty strings: the totals and timings of no results."""
    found = [False]

    def walk(v: Any) -> bool:
        if isinstance(v, (dict, list)):
            items = list(v.values()) if isinstance(v, dict) else v
            if not items:
                found[0] = True
            return all(walk(i) for i in items)
        return v is None or v == "" or isinstance(v, (int, float, bool))
    return isinstance(value, (dict, list)) and walk(value) and found[0]
