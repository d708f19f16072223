"""Normalization: what is left of a paragraph once what may change between
two deliveries of the same evidence is taken out.

Variants: `none` leaves the text as it is; `basic` is NFKC, casefold and
collapsed whitespace; `default` also masks volatile tokens (MASKS below:
tracking query strings, ids, dates, times, "N days ago", scores, line
numbers). Other numbers are kept: prices, counts and versions can be the very
facts the research is after.

MASKS is the definition: apply_masks_plain runs each entry's pattern as
`pattern.sub(repl, text)` in order. Each entry also names its finder in
_fast_masks (or declares PLAIN_SUB), which apply_masks uses to get the same
text without scanning every character with every regex.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from . import _fast_masks as fast

NORMALIZATIONS: tuple[str, ...] = ("none", "basic", "default")


@dataclass(frozen=True)
class Mask:
    pattern: re.Pattern[str]
    repl: str
    finder: fast.Finder   # a _fast_masks finder written for this pattern, or fast.PLAIN_SUB
    kept_groups: int = 0  # k > 0: repl is \1..\k + a literal, group 1 opens every match and
                          # groups 1..k follow one another and always take part

    def __post_init__(self):
        if not (callable(self.finder) or self.finder is fast.PLAIN_SUB):
            raise TypeError(f"mask {self.pattern.pattern!r}: finder must be a finder or PLAIN_SUB")


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
MASKS: tuple[Mask, ...] = (
    Mask(re.compile(r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*"), r"\1", fast.find_url, kept_groups=1),
    Mask(re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>", fast.find_uuid),
    # Not the digits of a decimal fraction ("score: 0.4279989206443445e-05").
    Mask(re.compile(r"(?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"), "<id>", fast.find_hex),
    Mask(re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"),
         "<date>", fast.find_iso_date),
    Mask(re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "<date>", fast.find_slash_date),
    Mask(re.compile(r"\b" + _MONTH + r" \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"), "<date>", fast.find_month_day_year),
    Mask(re.compile(r"\b\d{1,2} " + _MONTH + r",? \d{4}\b"), "<date>", fast.find_day_month_year),
    Mask(re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\+\d)?\b"), "<time>", fast.find_time),
    Mask(re.compile(r"\b\d+ (?:second|minute|hour|day|week|month|year)s? ago\b"), "<ago>", fast.find_ago),
    Mask(re.compile(r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
                    r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), r"\1\2<n>", fast.find_score, kept_groups=2),
    Mask(re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|][ \t]?"), "", fast.find_line_number),
)
# The units of a round are masked in one piece, joined by UNIT_SEP, which
# gives the same units back: no mask can match across "\n\x00\n" (none matches
# a NUL, and none crosses a newline except through \s, which stops at the
# NUL), and at a unit's edge \b, ^ and the lookbehinds see a newline exactly
# as they see the string's edge. A new mask must keep this true.
UNIT_SEP = "\n\x00\n"

_FAST = fast.FastMasks(MASKS)


def apply_masks_plain(text: str) -> str:
    """The masks by definition."""
    for mask in MASKS:
        text = mask.pattern.sub(mask.repl, text)
    return text


apply_masks = _FAST.apply  # the same answer as apply_masks_plain, fast


def check_variant(variant: str) -> None:
    if variant not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {variant!r}; allowed: {', '.join(NORMALIZATIONS)}")


def normalize(text: str, variant: str = "default") -> str:
    """Normalize one paragraph. `none` leaves it as it is; `basic` is NFKC,
    casefold and collapsed whitespace; `default` also masks volatile tokens."""
    if variant == "none":
        return text
    check_variant(variant)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if variant == "default":
        text = apply_masks(text)
    return " ".join(text.split())


def normalize_units(units: Sequence[str], variant: str) -> list[str]:
    """normalize() of each unit but for the whitespace collapse (the caller
    splits the words); the masks run once over the joined units."""
    if variant == "none":
        return list(units)
    units = [u.casefold() if u.isascii() else unicodedata.normalize("NFKC", u).casefold() for u in units]
    if variant == "basic":
        return units
    joined = UNIT_SEP.join(units)
    if not _FAST.vetted or joined.count("\x00") != len(units) - 1:
        return [apply_masks(u) for u in units]
    return apply_masks(joined).split(UNIT_SEP)
