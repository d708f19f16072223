"""Evidence novelty: normalization, fingerprints, a bounded store, patience.

A read round makes progress when some paragraph of its evidence is new (its
5-word-shingle containment in what was already seen is below a threshold)
and the round adds enough new shingles. Every paragraph of a round is judged
against the store as it was before the round, so the verdict does not depend
on result order. The store keeps two generations of bounded sets, so memory
stays flat however long the run, and cycles (A B A B, A B C A B C) stay
visible as long as the cycle fits in the store.

How it is fast (benchmarks/bench_novelty.py measures it): a round's results
are judged together. Their units are normalized in one piece (joined by a
separator no mask can cross), each mask is tried only where a cheap literal
search says it could match (the same answer as running every mask over the
whole text; see _apply_masks), all the round's shingles are hashed at once
with numpy from prefix sums over the normalized bytes instead of one hash call
per word, and the shingle store is a pair of numpy hash tables looked up a
whole array at a time. Judging results one by one (judge, then commit_round)
gives the same verdicts; tests/test_novelty_speed_invariants.py checks all of
it against the plain definitions.
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np
import xxhash

_h64 = xxhash.xxh3_64_intdigest

NORMALIZATIONS: tuple[str, ...] = ("none", "basic", "default")
SHINGLE_WORDS = 5
WINDOW_WORDS = 200  # long paragraphs are judged in windows of this many words

# Volatile tokens the `default` variant masks. Other numbers are kept: prices,
# counts and versions can be the very facts the research is after.
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*"), r"\1"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    # Not the digits of a decimal fraction ("score: 0.4279989206443445e-05").
    (re.compile(r"(?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"), "<date>"),
    (re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "<date>"),
    (re.compile(r"\b" + _MONTH + r" \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"), "<date>"),
    (re.compile(r"\b\d{1,2} " + _MONTH + r",? \d{4}\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\+\d)?\b"), "<time>"),
    (re.compile(r"\b\d+ (?:second|minute|hour|day|week|month|year)s? ago\b"), "<ago>"),
    (re.compile(r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
                r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), r"\1\2<n>"),
    (re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|][ \t]?"), ""),
)


def _nfkc_casefold(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def _check_variant(variant: str) -> None:
    if variant not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {variant!r}; allowed: {', '.join(NORMALIZATIONS)}")


def normalize(text: str, variant: str = "default") -> str:
    """Normalize one paragraph. `none` leaves it as it is; `basic` is NFKC,
    casefold and collapsed whitespace; `default` also masks volatile tokens."""
    if variant == "none":
        return text
    _check_variant(variant)
    text = _nfkc_casefold(text)
    if variant == "default":
        text = _apply_masks(text)
    return " ".join(text.split())


# ------------------------------------------------------------------ masks ---
#
# Applying the masks means, by definition, `text = pattern.sub(repl, text)` for
# each mask in order (`_apply_masks_plain`). Most masks match nowhere in most
# paragraphs, and a regex whose pattern does not start with a literal scans
# every character (30-50 MB/s each here). So each mask has a finder written
# for exactly its pattern: from cheap literal searches it returns either None
# (the pattern cannot match anywhere), ALL (run the plain sub), or the
# positions where a match could start (a superset of the real ones); the
# pattern is then tried only there, left to right, which is what `sub` does.
# The literal searches run on a "shape" of the text in which every ASCII digit
# (or every [0-9a-f] character) reads as "0"; a text with a non-ASCII \d
# character takes the plain path. A finder is used only while its pattern's
# source is character for character the one it was written for: edit a
# pattern and it silently falls back to the plain sub (correct, slower) until
# its finder is revisited. tests/test_novelty_speed_invariants.py compares
# both paths on random text.

_ALL = object()
_DIGIT_SHAPE = bytes.maketrans(b"0123456789", b"0" * 10)
_HEX_SHAPE = bytes.maketrans(b"0123456789abcdef", b"0" * 16)
_HEX_16 = b"0" * 16
_HEX_ZEROS = re.compile(rb"0+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_MONTH_PREFIXES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_SCORE_WORDS = ("score", "similarity", "relevance", "rank", "distance", "confidence", "cosine")  # rank: also ranking


class _Shape:
    """Lazily built byte shapes of one text (positions equal the str's: one
    byte per character, a non-ASCII one read as "?")."""
    __slots__ = ("text", "_digits", "_hex")

    def __init__(self, text: str, digits: bytes | None = None, hex: bytes | None = None):
        self.text, self._digits, self._hex = text, digits, hex

    @property
    def digits(self) -> bytes:
        if self._digits is None:
            self._digits = self.text.encode("ascii", "replace").translate(_DIGIT_SHAPE)
        return self._digits

    @property
    def hex(self) -> bytes:
        if self._hex is None:
            self._hex = self.text.encode("ascii", "replace").translate(_HEX_SHAPE)
        return self._hex

    def edited(self, text: str, edits: list[tuple[int, int, str]]) -> _Shape:
        """The shape of text, which is this one's with text[p:e] replaced by r
        for each (p, e, r): the shapes built so far are spliced, not rebuilt."""
        return _Shape(text, _splice(self._digits, edits, _DIGIT_SHAPE), _splice(self._hex, edits, _HEX_SHAPE))


_REPLACEMENT_SHAPES: dict[tuple[str, bytes], bytes] = {}


def _splice(shape: bytes | None, edits: list[tuple[int, int, str]], table: bytes) -> bytes | None:
    if shape is None:
        return None
    parts = []
    pos = 0
    cache = _REPLACEMENT_SHAPES
    for p, e, r in edits:
        parts.append(shape[pos:p])
        rs = cache.get((r, table))
        if rs is None:
            rs = r.encode("ascii", "replace").translate(table)
            if len(cache) < 256:
                cache[r, table] = rs
        parts.append(rs)
        pos = e
    parts.append(shape[pos:])
    return b"".join(parts)


def _find_all(hay, needle) -> list[int]:
    """Every (overlapping) occurrence of needle in hay."""
    out = []
    find = hay.find
    i = find(needle)
    while i >= 0:
        out.append(i)
        i = find(needle, i + 1)
    return out


def _before(positions: list[int], back: Sequence[int]) -> list[int]:
    return sorted({p - b for p in positions for b in back if p - b >= 0})


def _words_in(text: str, words: Sequence[str], lo: int = 0, hi: int | None = None) -> list[int]:
    """Positions of every occurrence of each word within text[lo:hi]."""
    out: list[int] = []
    hi = len(text) if hi is None else hi
    for w in words:
        find = text.find
        i = find(w, lo, hi)
        while i >= 0:
            out.append(i)
            i = find(w, i + 1, hi)
    return out


def _search_all(pattern: re.Pattern[bytes], hay: bytes) -> list[int]:
    """Every position where pattern matches (overlapping starts)."""
    out = []
    search = pattern.search
    m = search(hay)
    while m is not None:
        out.append(m.start())
        m = search(hay, m.start() + 1)
    return out


# Shape patterns that start with a literal, so that re searches them fast.
_DAY_YEAR = re.compile(rb" 00?(?:st|nd|rd|th)?,? 0000")
_DAY_MONTH_YEAR = re.compile(rb"0 [a-z]+\.?,? 0000")


def _f_url(t: str, s: _Shape):
    if "://" not in t or ("?" not in t and "#" not in t):
        return None
    return _find_all(t, "http")


def _f_uuid(t: str, s: _Shape):
    return _ALL if b"00000000-0000-0000-0000-000000000000" in s.hex else None


def _f_hex(t: str, s: _Shape):
    # \b before a [0-9a-f] character: a match starts where a run of >= 16 of them does.
    # bytes.find skips ahead where the text is not hex; a regex for sixteen
    # "0"s steps through every hex character (a third of the text).
    h = s.hex
    out = []
    i = h.find(_HEX_16)
    while i >= 0:
        out.append(i)
        i = h.find(_HEX_16, _HEX_ZEROS.match(h, i).end())
    return out or None


def _f_iso_date(t: str, s: _Shape):
    return _find_all(s.digits, b"0000-00-00") or None


def _f_slash_date(t: str, s: _Shape):
    return _before(_find_all(s.digits, b"0/0"), (0, 1)) or None


def _f_month_day_year(t: str, s: _Shape):
    # "<month>[a-z]*.? D, YYYY". " D, YYYY" (_DAY_YEAR) is found from its year:
    # searching for its leading space would try the regex at every word. It
    # has no space inside, so it starts at the last space before " YYYY", and
    # just before " YYYY" comes a digit, a comma or the end of st/nd/rd/th.
    d = s.digits
    out: list[int] = []
    for y in _find_all(d, b" 0000"):
        if y < 2 or d[y - 1] not in b"0,tdh":
            continue
        i = d.rfind(b" ", max(0, y - 6), y)
        if i < 0 or _DAY_YEAR.match(d, i) is None:
            continue
        # The month word is the run of [a-z] before " D", less an ending ".":
        # a match starting inside that run would have no \b before it.
        j = i - 1 if i and t[i - 1] == "." else i
        q = j
        while q and "a" <= t[q - 1] <= "z":
            q -= 1
        if t.startswith(_MONTH_PREFIXES, q, j):
            out.append(q)
    return sorted(out) or None


def _f_day_month_year(t: str, s: _Shape):
    # "D <month>[a-z]*, YYYY": a match starts one or two digits before "D <letters>".
    if b" 0000" not in s.digits:
        return None
    return _before(_search_all(_DAY_MONTH_YEAR, s.digits), (0, 1)) or None


def _f_time(t: str, s: _Shape):
    return _before(_find_all(s.digits, b"0:00"), (0, 1)) or None


def _f_ago(t: str, s: _Shape):
    # "N <unit>s? ago": a match starts where the digit run before the unit word does.
    if " ago" not in t:
        return None
    d = s.digits
    out = []
    for i in _find_all(t, " ago"):
        j = t.rfind(" ", 0, i)  # the space before the unit word
        if j > 0 and d[j - 1] == 48:
            j -= 1
            while j > 0 and d[j - 1] == 48:
                j -= 1
            out.append(j)
    return sorted(set(out)) or None


def _f_score(t: str, s: _Shape):
    if ":" not in t and "=" not in t:
        return None
    return sorted(_words_in(t, _SCORE_WORDS)) or None


def _f_line_number(t: str, s: _Shape):
    # A line that starts with a digit, a space or a tab. The newlines are
    # found by numpy: three searches for two-byte needles cost more.
    if ":" not in t and "|" not in t:
        return None
    b = np.frombuffer(s.digits, np.uint8)
    first = np.flatnonzero(b[:-1] == 10)
    first += 1                                          # each line's first character
    c = b[first]
    out = first[(c == 48) | (c == 32) | (c == 9)].tolist()
    if b.size and b[0] in (48, 32, 9):
        out.insert(0, 0)
    return out or None


# Each finder with the exact pattern source it was written for.
_FINDERS_BY_SOURCE = {
    r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*": _f_url,
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b": _f_uuid,
    r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b": _f_hex,
    r"(?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b": _f_hex,
    r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b": _f_iso_date,
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b": _f_slash_date,
    r"\b" + _MONTH + r" \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b": _f_month_day_year,
    r"\b\d{1,2} " + _MONTH + r",? \d{4}\b": _f_day_month_year,
    r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\+\d)?\b": _f_time,
    r"\b\d+ (?:second|minute|hour|day|week|month|year)s? ago\b": _f_ago,
    r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
    r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?": _f_score,
    r"(?m)^[ \t]*\d+[ \t]*[:|][ \t]?": _f_line_number,
}
_FINDERS = tuple(_FINDERS_BY_SOURCE.get(p.pattern) for p, _ in _MASKS)
# Joining a result's units with _UNIT_SEP and masking them in one piece gives
# the same units back: no mask can match across "\n\x00\n" (none matches a
# NUL, and none crosses a newline except through \s, which stops at the NUL),
# and at a unit's edge \b, ^ and the lookbehinds see a newline exactly as they
# see the string's edge. Vetted for the patterns above only.
_UNIT_SEP = "\n\x00\n"
_BATCH_MASKS = all(_FINDERS)
# After the last mask whose finder reads the hex shape, that shape is dropped
# rather than kept up to date.
_LAST_HEX_STEP = max((i for i, f in enumerate(_FINDERS) if f in (_f_uuid, _f_hex)), default=-1)


def _apply_masks_plain(text: str) -> str:
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


_GROUP_REF = re.compile(r"\\(\d+)")


def _template(repl: str):
    """repl as a function of the match: a literal, or group references and literal text."""
    if "\\" not in repl:
        return None
    parts = _GROUP_REF.split(repl)  # literal, group, literal, group, ..., literal
    if any("\\" in lit for lit in parts[::2]):
        return lambda m: m.expand(repl)
    literals, groups = parts[::2], [int(g) for g in parts[1::2]]

    def expand(m):
        out = [literals[0]]
        for g, lit in zip(groups, literals[1:]):
            out.append(m.group(g) or "")
            out.append(lit)
        return "".join(out)
    return expand


_TEMPLATES = {repl: _template(repl) for _, repl in _MASKS}

# Masks whose replacement keeps the match's text up to the end of group k and
# puts a literal after it: in these patterns group 1 opens the match, groups
# 1..k follow one another and always take part, so `\1..\k` + tail is the
# same as replacing only what comes after group k. The edit is then that
# shorter span and no replacement string is built per match. Keyed by the
# exact pattern source and repl, like the finders.
_KEPT_PREFIX = {
    (r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*", r"\1"): (1, ""),
    (r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
     r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", r"\1\2<n>"): (2, "<n>"),
}


def _sub_at(pattern: re.Pattern[str], repl: str, shape: _Shape, starts: list[int]) -> _Shape | None:
    """pattern.sub(repl, text) for the text of shape, given every position a
    match could start at (sorted): the shape of the result, None if unchanged."""
    text = shape.text
    edits: list[tuple[int, int, str]] = []
    pos = 0
    match = pattern.match
    kept = _KEPT_PREFIX.get((pattern.pattern, repl))
    expand = _TEMPLATES.get(repl, False)
    if expand is False:
        expand = _template(repl)
    for p in starts:
        if p < pos:
            continue
        m = match(text, p)
        if m is None:
            continue
        pos = m.end()
        if pos == p:  # an empty match: leave the subtleties to re
            return _Shape(pattern.sub(repl, text))
        if kept is not None:
            edits.append((m.end(kept[0]), pos, kept[1]))
        else:
            edits.append((p, pos, repl if expand is None else expand(m)))
    if not edits:
        return None
    out = []
    pos = 0
    for p, e, r in edits:
        out.append(text[pos:p])
        out.append(r)
        pos = e
    out.append(text[pos:])
    return shape.edited("".join(out), edits)


def _apply_masks(text: str) -> str:
    if not text.isascii():
        try:
            text.encode("latin-1")          # no decimal digit above U+007F below U+0100
        except UnicodeEncodeError:
            if any(map(str.isdecimal, "".join(_NON_ASCII.findall(text)))):
                return _apply_masks_plain(text)  # a non-ASCII digit: the shapes would not see it
    shape = _Shape(text)
    for step, ((pattern, repl), finder) in enumerate(zip(_MASKS, _FINDERS)):
        if step == _LAST_HEX_STEP + 1:
            shape._hex = None
        if finder is None:
            new, n = pattern.subn(repl, shape.text)
            if n:
                shape = _Shape(new)
            continue
        starts = finder(shape.text, shape)
        if starts is None:
            continue
        if starts is _ALL:
            new, n = pattern.subn(repl, shape.text)
            if n:
                shape = _Shape(new)
        else:
            shape = _sub_at(pattern, repl, shape, starts) or shape
    return shape.text


def _normalize_units(units: Sequence[str], variant: str) -> list[str]:
    """normalize() of each unit but for the whitespace collapse (the caller
    splits the words), the masks run once over the joined units."""
    if variant == "none":
        return list(units)
    units = [u.casefold() if u.isascii() else unicodedata.normalize("NFKC", u).casefold() for u in units]
    if variant == "basic":
        return units
    joined = _UNIT_SEP.join(units)
    if not _BATCH_MASKS or joined.count("\x00") != len(units) - 1:
        return [_apply_masks(u) for u in units]
    return _apply_masks(joined).split(_UNIT_SEP)


# ----------------------------------------------------------- segmentation ---

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_JSON_ITEM = json.JSONEncoder(ensure_ascii=False, sort_keys=True)  # what json.dumps(..., same options) uses
try:  # the C encoder that JSONEncoder.encode builds on every call, built once
    _JSON_ITEM_C = json.encoder.c_make_encoder(None, _JSON_ITEM.default, json.encoder.encode_basestring, None,
                                               _JSON_ITEM.key_separator, _JSON_ITEM.item_separator, True, False, True)
except (AttributeError, TypeError):
    _JSON_ITEM_C = None


def _encode_item(item) -> str:
    """json.dumps(item, ensure_ascii=False, sort_keys=True) for what json.loads gave."""
    if _JSON_ITEM_C is None:
        return _JSON_ITEM.encode(item)
    return "".join(_JSON_ITEM_C(item, 0))


def segment(text: str) -> list[str]:
    """Split a tool result into evidence units: the items of a JSON array (one
    hit each), else blank-line separated paragraphs."""
    stripped = text.strip()
    if stripped[:1] == "[" and stripped[-1:] == "]":
        try:
            items = json.loads(stripped)
        except ValueError:
            items = None
        if isinstance(items, list):
            if _JSON_ITEM_C is None:
                return [i if isinstance(i, str) else _encode_item(i) for i in items]
            enc, join = _JSON_ITEM_C, "".join             # _encode_item inlined: one call less per hit
            return [i if isinstance(i, str) else join(enc(i, 0)) for i in items]
    return [p for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


# ------------------------------------------------------------ fingerprints ---
#
# A fingerprint is a 64-bit hash of the UTF-8 bytes of a span of normalized
# text: one shingle (five words joined by single spaces) or one window. All the
# spans of a result are hashed at once: a polynomial hash mod 2**64 from prefix
# sums, sum((b[j] + 1) * P**j), shifted to the span's start by the inverse
# power of P. Deterministic across processes and machines (no str hash()),
# never 0 (0 marks an empty slot in the store).

_P = 0x9E3779B97F4A7C15                     # odd, so invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_POWERS = [np.ones(1, np.uint64), np.ones(1, np.uint64)]
_ONE = np.uint64(1)
_ZERO = np.zeros(1, np.intp)
_SEPARATORS = bytes(1 if i == 32 else 2 if i == 10 else 0 for i in range(256))  # space 1, newline 2


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P**j and P**-j mod 2**64 for j < n (grown by doubling, kept)."""
    pw, ipw = _POWERS
    while pw.size < n:
        k = pw.size
        pw = np.concatenate([pw, pw * np.uint64(pow(_P, k, 1 << 64))])
        ipw = np.concatenate([ipw, ipw * np.uint64(pow(_P_INV, k, 1 << 64))])
        _POWERS[:] = [pw, ipw]
    return pw, ipw


def _span_hashes(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Fingerprints of data[starts[i]:ends[i]] for every i."""
    b = np.frombuffer(data, np.uint8)
    pw, ipw = _powers(b.size + 1)
    prefix = np.empty(b.size + 1, np.uint64)
    prefix[0] = 0
    np.cumsum((b + _ONE) * pw[:b.size], out=prefix[1:])
    h = prefix[ends]
    h -= prefix[starts]
    h *= ipw[starts]
    return np.maximum(h, _ONE, out=h)  # never 0: 0 marks an empty slot in the store


@dataclass
class _Windows:
    """The windows (judged paragraphs) of some units and their shingles."""
    hashes: np.ndarray      # one fingerprint per window
    unit: np.ndarray        # the unit (index into the units given) of each window
    shingles: np.ndarray    # the windows' shingle fingerprints, window after window
    counts: np.ndarray      # shingles per window


# What str.split() splits on, beyond the space and the newline.
_OTHER_ASCII_SPACE = tuple(c for c in map(chr, range(128)) if c.isspace() and c not in " \n")
_NON_ASCII_SPACE = tuple(c for c in map(chr, range(128, 0x10000)) if c.isspace())


def _canonical(units: Sequence[str]) -> tuple[bytes, np.ndarray] | None:
    """The units' words joined by single spaces, units joined by newlines
    (empty ones left out), as UTF-8; and the index of each unit kept. Most
    units are canonical already; only the others are split and joined."""
    joined = "\n".join(units)
    if not joined:
        return None
    checks = [c for c in _OTHER_ASCII_SPACE if c in joined]   # what, found in a unit, means it is not
    if joined.count("\n") != len(units) - 1:
        checks.append("\n")
    if "  " in joined:
        checks.append("  ")
    if not joined.isascii():
        checks += [c for c in _NON_ASCII_SPACE if c in joined]
    # An empty or space-edged unit, looked at unit by unit: cheaper than
    # searching the joined text for " \n", "\n " and "\n\n".
    need = [not u or u[0] == " " or u[-1] == " " for u in units]
    if not checks and not any(need):
        return joined.encode(), np.arange(len(units))
    for c in checks:
        need = [n or c in u for n, u in zip(need, units)]
    canon = [" ".join(u.split()) if n else u for n, u in zip(need, units)]
    kept = list(filter(None, canon))
    if not kept:
        return None
    index = np.arange(len(canon)) if len(kept) == len(canon) else \
        np.flatnonzero(np.fromiter(map(bool, canon), bool, len(canon)))
    return "\n".join(kept).encode(), index


def _windows_of(units: Sequence[str]) -> _Windows | None:
    """Windows of WINDOW_WORDS words over each unit's whitespace-split words;
    a window's shingles are its 5-word runs, or the whole window if shorter."""
    canon = _canonical(units)
    if canon is None:
        return None
    data, unit_of = canon
    kinds = np.frombuffer(data.translate(_SEPARATORS), np.uint8)
    seps = kinds.nonzero()[0]
    nw = seps.size + 1
    bounds = np.empty(nw + 1, np.intp)                 # word k is data[bounds[k] + 1:bounds[k + 1]]
    bounds[0] = -1
    bounds[1:-1] = seps
    bounds[-1] = len(data)
    first = (kinds[seps] == 2).nonzero()[0]            # a unit starts after each newline
    first += 1
    first = np.concatenate((_ZERO, first))
    size = np.empty_like(first)
    np.subtract(first[1:], first[:-1], out=size[:-1])
    size[-1] = nw - first[-1]
    if size.max() > WINDOW_WORDS:                      # long units: windows of WINDOW_WORDS
        per_unit = (size + (WINDOW_WORDS - 1)) // WINDOW_WORDS
        which = np.repeat(np.arange(first.size), per_unit)
        k = np.arange(which.size) - np.repeat(np.cumsum(per_unit) - per_unit, per_unit)
        first = first[which] + k * WINDOW_WORDS
        size = np.minimum(size[which] - k * WINDOW_WORDS, WINDOW_WORDS)
        unit_of = unit_of[which]
    last = first + size
    last -= 1
    k = SHINGLE_WORDS - 1
    counts = size - k
    if counts.min() >= 1:
        sh_first = np.arange(nw - k * first.size) + np.repeat(first - (np.cumsum(counts) - counts), counts)
        sh_last = sh_first + k
    else:                                              # a short window is one shingle
        np.maximum(counts, 1, out=counts)
        offsets = np.cumsum(counts) - counts
        sh_first = np.arange(int(offsets[-1] + counts[-1])) + np.repeat(first - offsets, counts)
        sh_last = np.minimum(sh_first + k, np.repeat(last, counts))
    starts = bounds[np.concatenate((first, sh_first))]
    starts += 1
    ends = bounds[np.concatenate((last, sh_last)) + 1]
    h = _span_hashes(data, starts, ends)
    return _Windows(hashes=h[:first.size], unit=unit_of, shingles=h[first.size:], counts=counts)


def shingles(words: Sequence[str]) -> set[int]:
    """64-bit fingerprints of the 5-word shingles; a shorter text is one shingle.
    (Words are whitespace-free tokens, as str.split() gives them.)"""
    if not words:
        return set()
    data = " ".join(words).encode()
    lens = np.fromiter((len(w.encode()) for w in words), np.intp, len(words))
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    k = SHINGLE_WORDS - 1
    if len(words) <= k:
        s, e = starts[:1], ends[-1:]
    else:
        s, e = starts[:-k], ends[k:]
    return set(_span_hashes(data, s, e).tolist())


def _unique(a: np.ndarray) -> np.ndarray:
    if a.size < 2:
        return a
    a = np.sort(a)
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


class FingerprintSet(AbstractSet):
    """A judged result's distinct fingerprints: a read-only set of ints over a
    sorted numpy array, so that a round's union is taken without Python sets.
    It remembers what the store held of them when judged (`in_young`,
    `known`, valid while the store's `version` is `version`)."""
    __slots__ = ("array", "_list", "in_young", "known", "version")

    def __init__(self, values: Iterable[int] | np.ndarray = (), in_young: np.ndarray | None = None,
                 known: np.ndarray | None = None, version: int = -1):
        if isinstance(values, np.ndarray):  # sorted, distinct, nonzero: from the tracker
            self.array = values
        else:
            self.array = _as_fingerprints(values)
        self._list = None
        self.in_young, self.known, self.version = in_young, known, version

    def __len__(self) -> int:
        return self.array.size

    def __iter__(self) -> Iterator[int]:
        return iter(self.as_list())

    def __contains__(self, h) -> bool:
        if not isinstance(h, int) or not 0 <= h < 1 << 64:
            return False
        i = int(np.searchsorted(self.array, np.uint64(h)))
        return i < self.array.size and int(self.array[i]) == h

    def as_list(self) -> list[int]:
        if self._list is None:
            self._list = self.array.tolist()
        return self._list

    def __repr__(self) -> str:
        return f"FingerprintSet({len(self)} fingerprints)"


def _as_fingerprints(hs: Iterable[int] | np.ndarray) -> np.ndarray:
    """Distinct fingerprints as a sorted uint64 array (ints taken mod 2**64, 0 read as 1)."""
    if isinstance(hs, FingerprintSet):
        return hs.array
    if isinstance(hs, np.ndarray):
        a = hs.astype(np.uint64, copy=False)
    else:
        a = np.array([h & 0xFFFF_FFFF_FFFF_FFFF for h in hs], np.uint64)
    return _unique(np.maximum(a, _ONE))


# ------------------------------------------------------------------ store ---

class BoundedHashSet:
    """At most `capacity` hashes in two generations: when the young one is
    half full it becomes the old one and the previous old one is dropped."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._young: set[int] = set()
        self._old: set[int] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, h: int) -> bool:
        return h in self._young or h in self._old

    def count_known(self, hs: set[int]) -> int:
        known = hs & self._young
        if self._old:
            known |= (hs - known) & self._old
        return len(known)

    def add_all(self, hs: Iterable[int]) -> None:
        self._young.update(hs)
        if len(self._young) >= self.capacity // 2:
            self._old, self._young = self._young, set()


_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)


class _Table:
    """One generation of fingerprints: a hash table of 8-slot buckets (one
    64-byte cache line each) in a numpy array, 0 meaning empty, and a small
    sorted array of the keys that found their bucket full. Lookups and inserts
    take whole arrays of fingerprints at once.

    Overflow goes to that array rather than into the next bucket so that a
    lookup is a fixed handful of numpy calls (a searchsorted for the keys of
    full buckets) instead of a loop walking the chains of full buckets: at
    this load a few percent of buckets are full, so nearly every round had a
    key to chase."""
    SLOTS = 8
    MAX_LOAD = 0.5          # sized for this many keys per slot
    GROW_LOAD = 0.75        # grown (rehashed) past this many

    def __init__(self, expected: int):
        bits = 1
        while (1 << bits) * self.SLOTS * self.MAX_LOAD < max(expected, 8):
            bits += 1
        self.keys = np.zeros((1 << bits, self.SLOTS), np.uint64)
        self.flat = self.keys.reshape(-1)              # the same memory, slot by slot
        self.fill = np.zeros(1 << bits, np.intp)       # used slots per bucket
        self.overflow = np.empty(0, np.uint64)         # sorted: keys whose bucket was full
        self.shift = np.uint64(64 - bits)
        self.count = 0

    def _bucket(self, q: np.ndarray) -> np.ndarray:
        return ((q * _FIBONACCI) >> self.shift).astype(np.intp)

    def contains(self, q: np.ndarray) -> np.ndarray:
        """Which of the nonzero fingerprints q are held."""
        rows = np.take(self.keys, self._bucket(q), axis=0)
        found = (rows == q[:, None]).view(np.uint64).ravel() != 0  # any() of each row of 8 bools
        over = self.overflow
        if over.size:
            go = np.flatnonzero(rows[:, -1] != 0)     # only a full bucket's keys can be in overflow
            if go.size:
                qg = q[go]
                i = np.searchsorted(over, qg)
                np.minimum(i, over.size - 1, out=i)
                found[go] |= over[i] == qg
        return found

    def insert(self, q: np.ndarray) -> None:
        """Add fingerprints, distinct and not yet held."""
        if not q.size:
            return
        if self.count + q.size > self.keys.size * self.GROW_LOAD:
            self._grow(self.count + q.size)
        self.count += q.size
        b = self._bucket(q)
        flat, fill = self.flat, self.fill
        while q.size:
            slot = fill[b]
            room = slot < self.SLOTS
            if not room.all():
                self.overflow = np.sort(np.concatenate((self.overflow, q[~room])))
                q, b, slot = q[room], b[room], slot[room]
            cell = b * self.SLOTS + slot
            flat[cell] = q                      # of keys sharing a cell, one lands
            landed = flat[cell] == q
            fill[b[landed]] += 1                # (so no bucket twice here)
            q, b = q[~landed], b[~landed]

    def _grow(self, expected: int) -> None:
        held = np.concatenate((self.flat[self.flat != 0], self.overflow))
        self.__init__(2 * expected)
        self.insert(held)

    def clear(self) -> None:
        self.flat.fill(0)
        self.fill.fill(0)
        self.overflow = self.overflow[:0]
        self.count = 0


class FingerprintStore:
    """BoundedHashSet's rule (two generations; when the young one holds
    capacity // 2 it becomes the old one and the old one is dropped) over two
    numpy hash tables of the tracker's 64-bit fingerprints: whole arrays are
    looked up at once, and the memory is a few flat arrays of fixed size."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._young = _Table(capacity // 2)
        self._old = _Table(capacity // 2)
        self._slots = self._young.keys.size
        self.version = 0  # changes whenever the content may have

    def __len__(self) -> int:
        return self._young.count + self._old.count

    def __contains__(self, h: int) -> bool:
        return bool(self.lookup(_as_fingerprints([h]))[1].any())

    def lookup(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For nonzero fingerprints q: which the young generation holds, and
        which either generation holds."""
        in_young = self._young.contains(q)
        known = in_young
        if self._old.count:
            rest = np.flatnonzero(~in_young)
            if rest.size:
                known = in_young.copy()
                known[rest] = self._old.contains(q[rest])
        return in_young, known

    def count_known(self, hs: Iterable[int] | np.ndarray) -> int:
        q = _as_fingerprints(hs)
        return int(np.count_nonzero(self.lookup(q)[1])) if q.size else 0

    def add_all(self, hs: Iterable[int] | np.ndarray) -> None:
        q = _as_fingerprints(hs)
        self.add_new(q[~self._young.contains(q)] if q.size else q)

    def add_new(self, q: np.ndarray) -> None:
        """Add distinct fingerprints that the young generation does not hold."""
        self.version += 1
        self._young.insert(q)
        if self._young.count >= self.capacity // 2:
            self._old, self._young = self._young, self._old
            if self._young.keys.size > self._slots:
                self._young = _Table(self.capacity // 2)  # a big round once made it grow: back to size
            else:
                self._young.clear()


@dataclass(frozen=True)
class NoveltyConfig:
    normalization: str = "default"
    containment_threshold: float = 0.8   # a paragraph is new below this
    min_new_shingles: int = 3            # a round needs at least this many
    shingle_capacity: int = 262_144
    paragraph_capacity: int = 65_536

    def __post_init__(self):
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {self.normalization!r}; allowed: {', '.join(NORMALIZATIONS)}")
        if not 0 < self.containment_threshold <= 1:
            raise ValueError(f"containment_threshold must be in (0, 1], got {self.containment_threshold}")


@dataclass
class EvidenceVerdict:
    """Novelty of one tool result, judged against the store before its round."""
    status: str
    paragraphs: int = 0
    new_paragraphs: int = 0
    new_shingles: int = 0
    error_signature: str | None = None
    repeated_error: bool = False

    def to_dict(self) -> dict:
        d = {"paragraphs": self.paragraphs, "new_paragraphs": self.new_paragraphs, "new_shingles": self.new_shingles}
        if self.error_signature:
            d["error_signature"] = self.error_signature
            d["repeated_error"] = self.repeated_error
        return d


@dataclass
class RoundNovelty:
    verdicts: list[EvidenceVerdict] = field(default_factory=list)
    new_paragraphs: int = 0
    new_shingles: int = 0   # the union over the round, not the sum

    min_new_shingles: int = 1

    @property
    def progress(self) -> bool:
        return self.new_paragraphs > 0 and self.new_shingles >= self.min_new_shingles


_EMPTY = FingerprintSet(np.empty(0, np.uint64))
_NO_FLAGS = np.empty(0, bool)


@dataclass
class _JudgedRound:
    verdicts: list[EvidenceVerdict]
    paragraphs: list[int]          # the fingerprints of every window of the round
    shingles: np.ndarray           # the distinct shingles of the round (unseen paragraphs only)
    in_young: np.ndarray           # ... which the store's young generation holds
    known: np.ndarray              # ... which the store holds
    version: int                   # the store's version they were looked up at
    errors: set[int]


class NoveltyTracker:
    """Judges rounds of evidence; keeps bounded fingerprints of all it saw.

    All the results of a round are judged together against the store as it
    was before the round (one normalization pass, one hashing pass, one lookup
    of every distinct fingerprint), which is also what judging them one at a
    time before committing gives."""

    def __init__(self, config: NoveltyConfig | None = None):
        self.config = config or NoveltyConfig()
        self._shingles = FingerprintStore(self.config.shingle_capacity)
        self._paragraphs = BoundedHashSet(self.config.paragraph_capacity)  # a few per result: Python sets
        self._errors = BoundedHashSet(4_096)

    def judge(self, status: str, text: str, segments: Sequence[str] | None = None) -> tuple[EvidenceVerdict, AbstractSet[int], set[int]]:
        """Verdict for one result, plus the shingles and paragraph hashes to
        commit once the whole round has been judged."""
        jr = self._judge_round([(status, text, segments)])
        v = jr.verdicts[0]
        if v.error_signature:
            return v, set(), set(jr.errors)
        if v.status != "ok":
            return v, set(), set()
        sh = FingerprintSet(jr.shingles, jr.in_young, jr.known, jr.version) if jr.shingles.size else _EMPTY
        return v, sh, set(jr.paragraphs)

    def commit_round(self, judged: Sequence[tuple[EvidenceVerdict, AbstractSet[int], AbstractSet[int]]]) -> RoundNovelty:
        """Remember a round's judged results; the round verdict counts new
        shingles over the union of the round, not the sum."""
        shingle_sets: list[AbstractSet[int]] = []
        paras: list[int] = []
        errors: set[int] = set()
        for v, sh, ps in judged:
            if v.error_signature:
                errors |= ps
            else:
                if len(sh):
                    shingle_sets.append(sh)
                paras += ps
        union, in_young, known, version = self._round_union(shingle_sets)
        return self._commit(_JudgedRound([v for v, _, _ in judged], paras, union, in_young, known, version, errors))

    def observe_round(self, results: Sequence[tuple[str, str, Sequence[str] | None]]) -> RoundNovelty:
        """Judge a round's (status, text, segments) results, then remember them."""
        return self._commit(self._judge_round(results))

    @property
    def stored(self) -> int:
        return len(self._shingles) + len(self._paragraphs) + len(self._errors)

    # ------------------------------------------------------------------

    def _judge_round(self, results: Sequence[tuple[str, str, Sequence[str] | None]]) -> _JudgedRound:
        verdicts: list[EvidenceVerdict] = []
        errors: set[int] = set()
        units: list[str] = []
        owners: list[int] = []           # the verdict of each unit
        for status, text, segments in results:
            if status == "error":
                sig = f"{_h64(normalize(text, 'default').encode()):016x}"
                verdicts.append(EvidenceVerdict(status, error_signature=sig, repeated_error=int(sig, 16) in self._errors))
                errors.add(int(sig, 16))
                continue
            us = list(segments) if segments is not None else segment(text)
            if status != "ok" or not any(u.strip() for u in us):
                verdicts.append(EvidenceVerdict("empty" if status == "ok" else status))
                continue
            owners += [len(verdicts)] * len(us)
            units += us
            verdicts.append(EvidenceVerdict(status))
        nv = len(verdicts)
        version = self._shingles.version
        empty = np.empty(0, np.uint64)
        win = _windows_of(_normalize_units(units, self.config.normalization)) if units else None
        if win is None:
            return _JudgedRound(verdicts, [], empty, _NO_FLAGS, _NO_FLAGS, version, errors)
        n = win.hashes.size
        owner = np.array(owners, np.intp)[win.unit]       # the verdict of each window
        for v, c in zip(verdicts, np.bincount(owner, minlength=nv).tolist()):
            v.paragraphs = c
        paragraphs = win.hashes.tolist()

        # An exactly seen paragraph is not new and adds nothing.
        seen = np.fromiter(map(self._paragraphs.__contains__, paragraphs), bool, n)
        sh, counts = win.shingles, win.counts
        if seen.any():
            if seen.all():
                return _JudgedRound(verdicts, paragraphs, empty, _NO_FLAGS, _NO_FLAGS, version, errors)
            sh = sh[np.repeat(~seen, counts)]
            counts = np.where(seen, 0, counts)
        # Distinct shingles per window, per result and over the round: a stable
        # sort brings equal fingerprints together with their windows (and so
        # their results) still in order.
        order = np.argsort(sh, kind="stable")
        s = sh[order]
        repeated = s[1:] == s[:-1]
        threshold = self.config.containment_threshold
        if not repeated.any():                           # every shingle once: counts are as built
            distinct = s
            in_young, known = self._shingles.lookup(distinct)
            if not known.any():
                new = counts > 0
                known_per_result = 0
            else:
                known_window = np.repeat(np.arange(n), counts)[order[known]]
                new = np.bincount(known_window, minlength=n) < threshold * counts
                known_per_result = np.bincount(owner[known_window], minlength=nv)
            new_shingles = (np.bincount(owner, weights=counts, minlength=nv).astype(np.intp)
                            - known_per_result).tolist()
        else:
            first = np.empty(s.size, bool)
            first[0] = True
            np.logical_not(repeated, out=first[1:])
            distinct = s[first]
            in_young, known = self._shingles.lookup(distinct)
            known_sorted = known[np.cumsum(first) - 1]
            w = np.repeat(np.arange(n), counts)[order]
            first_w = first.copy()
            first_w[1:] |= w[1:] != w[:-1]
            per_window = np.bincount(w[first_w], minlength=n)
            known_per_window = np.bincount(w[first_w & known_sorted], minlength=n)
            new = known_per_window < threshold * per_window
            r = owner[w]
            first_in_result = first                    # (first is not needed any more)
            first_in_result[1:] |= r[1:] != r[:-1]
            new_shingles = np.bincount(r[first_in_result & ~known_sorted], minlength=nv).tolist()
        new &= ~seen
        new_per_result = np.bincount(owner[new], minlength=nv).tolist()
        for v, a, b in zip(verdicts, new_per_result, new_shingles):
            v.new_paragraphs, v.new_shingles = a, b
        return _JudgedRound(verdicts, paragraphs, distinct, in_young, known, version, errors)

    def _round_union(self, sets: list[AbstractSet[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The round's distinct shingles, and which of them the store holds
        (as judged, when the store has not changed since)."""
        version = self._shingles.version
        if sets and all(isinstance(s, FingerprintSet) and s.version == version for s in sets):
            if len(sets) == 1:
                return sets[0].array, sets[0].in_young, sets[0].known, version
            values = np.concatenate([s.array for s in sets])
            order = np.argsort(values, kind="stable")
            s = values[order]
            first = np.empty(s.size, bool)
            first[0] = True
            np.not_equal(s[1:], s[:-1], out=first[1:])
            pick = order[first]
            return values[pick], np.concatenate([s.in_young for s in sets])[pick], \
                np.concatenate([s.known for s in sets])[pick], version
        union = _unique(np.concatenate([_as_fingerprints(s) for s in sets])) if sets else np.empty(0, np.uint64)
        return (union, *self._shingles.lookup(union), version)

    def _commit(self, jr: _JudgedRound) -> RoundNovelty:
        rn = RoundNovelty(verdicts=jr.verdicts, min_new_shingles=self.config.min_new_shingles)
        rn.new_paragraphs = sum(v.new_paragraphs for v in jr.verdicts)
        union, in_young, known = jr.shingles, jr.in_young, jr.known
        if jr.version != self._shingles.version:  # judged before another commit: look again
            in_young, known = self._shingles.lookup(union)
        rn.new_shingles = union.size - int(np.count_nonzero(known))
        self._shingles.add_new(union[~in_young])
        self._paragraphs.add_all(jr.paragraphs)
        self._errors.add_all(jr.errors)
        return rn


class PatienceRule:
    """Consecutive read rounds without new evidence, up to `patience`.

    A write round neither counts nor resets; an answered ask resets; a failed
    coordinator request, an empty read or an error counts like any round
    without new evidence."""

    def __init__(self, patience: int):
        self.patience = patience
        self.counter = 0

    def update(self, *, write: bool, progress: bool) -> bool:
        """Apply one round; True when patience is exhausted."""
        if write:
            return False
        self.counter = 0 if progress else self.counter + 1
        return self.counter >= self.patience
