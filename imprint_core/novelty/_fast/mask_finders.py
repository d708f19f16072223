"""Where each mask could match: one finder per mask of `normalization.MASKS`,
written for exactly its pattern.

Most masks match nowhere in most paragraphs, and a regex whose pattern does
not start with a literal scans every character (30-50 MB/s each here). A
finder answers from cheap literal searches: None (the pattern cannot match
anywhere), ALL (run the plain sub), or the positions where a match could
start (a superset of the real ones). A mask without a finder declares
PLAIN_SUB.

The literal searches run on a "shape" of the text in which every ASCII digit
(or every [0-9a-f] character) reads as "0"; a text with a non-ASCII \\d
character takes the plain path. A finder and its pattern sit in one entry of
`normalization.MASKS`: whoever edits the pattern edits the finder's promise
too. `_fast/masks.py` applies the masks through these finders;
tests/core/novelty/test_novelty_speed_invariants.py compares both paths on every near miss
of every mask and on random text.
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

ALL = object()          # a finder's answer: run the plain sub over the whole text


class _PlainSub:
    def __repr__(self) -> str:
        return "PLAIN_SUB"


PLAIN_SUB = _PlainSub()  # a mask's declared finder when it has none: always the plain sub

_DIGIT_SHAPE = bytes.maketrans(b"0123456789", b"0" * 10)
_HEX_SHAPE = bytes.maketrans(b"0123456789abcdef", b"0" * 16)
_HEX_16 = b"0" * 16
_HEX_ZEROS = _ZEROS = re.compile(rb"0+")
_DIGITS_10 = b"0" * 10
_MONTH_PREFIXES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_SCORE_WORDS = ("score", "similarity", "relevance", "rank", "distance", "confidence", "cosine")  # rank: also ranking


class Shape:
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

    def drop_hex(self) -> None:
        """Stop keeping the hex shape: no finder still to run reads it."""
        self._hex = None

    def edited(self, text: str, edits: list[tuple[int, int, str]]) -> Shape:
        """The shape of text, which is this one's with text[p:e] replaced by r
        for each (p, e, r): the shapes built so far are spliced, not rebuilt."""
        return Shape(text, _splice(self._digits, edits, _DIGIT_SHAPE), _splice(self._hex, edits, _HEX_SHAPE))


# A finder: (text, its shape) -> the sorted positions where a match could
# start, ALL, or None (no match anywhere).
Finder = Callable[[str, Shape], "list[int] | object | None"]

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


# ---------------------------------------------------------------- finders ---
# One per mask of normalization.MASKS, in its order; each comment names the
# pattern it was written for.

# Shape patterns that start with a literal, so that re searches them fast.
_DAY_YEAR = re.compile(rb" 00?(?:st|nd|rd|th)?,? 0000")
_DAY_MONTH_YEAR = re.compile(rb"0 [a-z]+\.?,? 0000")


def find_url(t: str, s: Shape):
    if "://" not in t or ("?" not in t and "#" not in t):
        return None
    return _find_all(t, "http")


def find_uuid(t: str, s: Shape):
    return ALL if b"00000000-0000-0000-0000-000000000000" in s.hex else None


def find_hex(t: str, s: Shape):
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


def find_address(t: str, s: Shape):
    return _find_all(t, "0x") or None


_TEMP_ROOTS = ("/tmp", "/var/", "/private/", "/dev/shm", ":\\users\\")


def find_temp_path(t: str, s: Shape):
    # A match starts at one of the roots, or (Windows) at the drive letter before ":\\users\\".
    if "/" not in t and "\\" not in t:
        return None
    out = _words_in(t, _TEMP_ROOTS[:4])
    out += [i - 1 for i in _words_in(t, _TEMP_ROOTS[4:]) if i]
    return sorted(out) or None


_WEEKDAY_PREFIXES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def find_weekday_date(t: str, s: Shape):
    # A match starts at a weekday name and holds a digit.
    if b"0" not in s.digits:
        return None
    return sorted(_words_in(t, _WEEKDAY_PREFIXES)) or None


def find_iso_date(t: str, s: Shape):
    return _find_all(s.digits, b"0000-00-00") or None


def find_iso_basic(t: str, s: Shape):
    return _find_all(s.digits, b"00000000t0000") or None


def find_epoch(t: str, s: Shape):
    # A match starts where a run of ten or more digits does (\b before it), with a "1".
    d = s.digits
    out = []
    i = d.find(_DIGITS_10)
    while i >= 0:
        if t[i] == "1":
            out.append(i)
        i = d.find(_DIGITS_10, _ZEROS.match(d, i).end())
    return out or None


def find_ymd_slash(t: str, s: Shape):
    return _find_all(s.digits, b"0000/0") or None


def find_slash_date(t: str, s: Shape):
    return _before(_find_all(s.digits, b"0/0"), (0, 1)) or None


def find_dotted_date(t: str, s: Shape):
    # "D.M.YYYY": a match starts three to five characters before ".YYYY",
    # which a digit follows and a "." one or two characters before that.
    d = s.digits
    ends = [a for a in _find_all(d, b".0000") if a > 2 and d[a - 1] == 48 and 46 in (d[a - 2], d[a - 3])]
    return _before(ends, (3, 4, 5)) or None


def find_month_day_year(t: str, s: Shape):
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


def find_day_month_year(t: str, s: Shape):
    # "D <month>[a-z]*, YYYY": a match starts one or two digits before "D <letters>".
    if b" 0000" not in s.digits:
        return None
    return _before(_search_all(_DAY_MONTH_YEAR, s.digits), (0, 1)) or None


# In the digit shape, what comes before the hour's last digit in "<month name>.? D HH:MM":
# a run of at least three letters after a non-word character, "."?, spaces, the day, spaces,
# the hour's first digit (searched within the 18 characters before it).
_SYSLOG_HEAD = re.compile(rb"(?<![a-z0-9_])[a-z]{3,9}\.? {1,2}00? {1,2}0?$")


def find_syslog_date(t: str, s: Shape):
    d = s.digits
    out = []
    for j in _find_all(d, b"0:00"):
        h = j - 1 if d[j - 1] == 48 else j          # the hour's first digit, after a space and the day
        if h < 6 or d[h - 1] != 32 or (d[h - 2] != 48 and d[h - 3] != 48):
            continue
        m = _SYSLOG_HEAD.search(d, max(0, j - 18), j)
        if m is not None:
            out.append(m.start())
    return out or None


def find_time(t: str, s: Shape):
    return _before(_find_all(s.digits, b"0:00"), (0, 1)) or None


# The quantity words of "<quantity> <unit> ago" (normalization builds the mask's
# pattern from them, so the finder's promise and the pattern cannot drift apart).
AGO_WORDS = ("an", "a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
             "twelve", "fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "a few", "few", "several",
             "a couple of", "couple of", "a couple", "couple", "many", "some")
_AGO_QUANTITIES = tuple(w + " " for w in AGO_WORDS)


def find_ago(t: str, s: Shape):
    # "<quantity> <unit> ago": the unit is the run of letters before " ago";
    # before it come digits (and a space, or none) or a quantity word and a space.
    if " ago" not in t:
        return None
    d = s.digits
    out = set()
    for i in _find_all(t, " ago"):
        u = i
        while u and "a" <= t[u - 1] <= "z":
            u -= 1
        j = u - 1 if u and t[u - 1] == " " else u
        if j and d[j - 1] == 48:
            j -= 1
            while j and d[j - 1] == 48:
                j -= 1
            out.add(j)
        out.update(u - len(w) for w in _AGO_QUANTITIES if u >= len(w) and t.startswith(w, u - len(w)))
    return sorted(out) or None


def find_relative_day(t: str, s: Shape):
    # "yesterday" and "today" end in "day": one search finds both.
    out = _words_in(t, ("tomorrow", "just now"))
    for i in _find_all(t, "day"):
        if i >= 6 and t.startswith("yester", i - 6):
            out.append(i - 6)
        elif i >= 2 and t.startswith("to", i - 2):
            out.append(i - 2)
    return sorted(out) or None


def find_score(t: str, s: Shape):
    if ":" not in t and "=" not in t:
        return None
    return sorted(_words_in(t, _SCORE_WORDS)) or None


def _line_starts(s: Shape, lead: tuple[int, ...]) -> list[int]:
    """The first character of every line that starts with one of the byte values `lead` (in the digit shape)."""
    b = np.frombuffer(s.digits, np.uint8)
    first = (b[:-1] == 10).nonzero()[0]
    first += 1                                          # each line's first character
    c = b[first]
    hit = c == lead[0]
    for v in lead[1:]:
        hit |= c == v
    out = first[hit].tolist()
    if b.size and b[0] in lead:
        out.insert(0, 0)
    return out


def find_line_number(t: str, s: Shape):
    # A line that starts with a digit, a space or a tab. The newlines are
    # found by numpy: three searches for two-byte needles cost more.
    if ":" not in t and "|" not in t:
        return None
    return _line_starts(s, (48, 32, 9)) or None


def find_gutter(t: str, s: Shape):
    if "\t" not in t and "\u2192" not in t and "\u2502" not in t:
        return None
    return _line_starts(s, (48, 32, 9)) or None


READS_HEX = (find_uuid, find_hex)
"""The finders that read the hex shape: after the last mask that has one, the shape is dropped."""
