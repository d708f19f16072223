"""Normalization: what is left of a paragraph once what may change between
two deliveries of the same evidence is taken out.

Variants: `none` leaves the text as it is; `basic` is NFKC, casefold and
collapsed whitespace; every other variant is a *profile*: basic plus a named
set of volatile-token masks (PROFILES). The categories of masks:

- urls: tracking query strings and fragments of URLs
- ids, hashes: UUIDs; hex runs of 16 or more (commit hashes, digests)
- timestamps: dates (ISO, ISO basic, d/m/y, y/m/d, d.m.y, month names, with
  or without a weekday, RFC 2822, syslog and ctime forms), times, Unix epoch
  seconds and milliseconds (ten or thirteen digits from 1), "N units ago",
  "an hour ago", "three weeks ago" (number words up to sixty), "yesterday", "today", "just now"
- scores: similarity, rank, relevance and other scores after a name
- line_numbers: "12:" and "12 |" line prefixes
- addresses: memory addresses (0x and 6 to 16 hex digits)
- gutters: line numbers of `cat -n`, `nl` and editor views ("  12<tab>", "12→")
- durations: "1.23s", "120 ms", "0m1.234s", "5 minutes" (also facts, so
  outside the default profile)
- temp_paths: the directories of /tmp, /var/tmp, /dev/shm, macOS
  /var/folders and Windows AppData/Local/Temp paths (the file name is kept)
- ocr_noise: tokens of symbols only, and stray single letters other than "a"
  and "i" (screenshot OCR)

`default` (the shipped profile) is urls, ids, hashes, timestamps, scores and
line_numbers. Other numbers are kept: prices, counts and versions can be the
very facts the research is after.

MASKS is the definition: apply_masks_plain runs the entries of a profile's
categories as `pattern.sub(repl, text)`, in the table's order. Each entry
also names its finder in _fast/mask_finders.py (or declares PLAIN_SUB), which
apply_masks uses (through _fast/masks.py) to get the same text without
scanning every character with every regex.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from ._fast import mask_finders as finders
from ._fast.masks import FastMasks
from ._fast.memo import shared

CATEGORIES: tuple[str, ...] = ("urls", "ids", "hashes", "addresses", "temp_paths", "timestamps", "scores",
                               "durations", "line_numbers", "gutters", "ocr_noise")
_DEFAULT = ("urls", "ids", "hashes", "timestamps", "scores", "line_numbers")
# A profile: the mask categories it applies (in the table's order, whatever the order here).
PROFILES: dict[str, tuple[str, ...]] = {
    "default": _DEFAULT,
    "logs": _DEFAULT + ("addresses", "temp_paths", "durations", "gutters"),   # command output, traces, files
    "ocr": _DEFAULT + ("ocr_noise",),                                          # screenshot text
    "all": CATEGORIES,
}
NORMALIZATIONS: tuple[str, ...] = ("none", "basic", *PROFILES)


@dataclass(frozen=True)
class Mask:
    pattern: re.Pattern[str]
    repl: str
    finder: finders.Finder   # a _fast/mask_finders.py finder written for this pattern, or finders.PLAIN_SUB
    kept_groups: int = 0  # k > 0: repl is \1..\k + a literal, group 1 opens every match and
                          # groups 1..k follow one another and always take part
    category: str = "timestamps"  # one of CATEGORIES

    def __post_init__(self):
        if not (callable(self.finder) or self.finder is finders.PLAIN_SUB):
            raise TypeError(f"mask {self.pattern.pattern!r}: finder must be a finder or PLAIN_SUB")
        if self.category not in CATEGORIES:
            raise ValueError(f"mask {self.pattern.pattern!r}: unknown category {self.category!r}")


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
# Whole month and weekday names (bounded: a finder looks back a fixed distance).
_MONTH_NAME = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
               r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_WEEKDAY = r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?)"
_ORD = r"(?:st|nd|rd|th)?"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[ \t]?[ap]\.?m\.?)?"
_ZONE = r"(?:[+-]\d{2}:?\d{2}|gmt|utc|ut|z|[a-z][sd]t|cest?)"
_AGO_UNIT = r"(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?|mos?|months?|y|yrs?|years?)"
_DURATION_UNIT = r"(?:ns|[μu]s|ms|secs?|seconds?|mins?|minutes?|hrs?|hours?|s|m|h)"
_PATH_PART = r"[^\s/\\\"'<>|:*?]+"
MASKS: tuple[Mask, ...] = (
    Mask(re.compile(r"(https?://[^\s?#\"'<>]+)[?#][^\s\"'<>]*"), r"\1", finders.find_url, kept_groups=1,
         category="urls"),
    Mask(re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>", finders.find_uuid,
         category="ids"),
    # Not the digits of a decimal fraction ("score: 0.4279989206443445e-05").
    Mask(re.compile(r"(?<!\d\.)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"), "<id>", finders.find_hex,
         category="hashes"),
    Mask(re.compile(r"\b0x[0-9a-f]{6,16}\b"), "<addr>", finders.find_address, category="addresses"),
    # The directories of a temporary path; its last part (the file name) is kept.
    Mask(re.compile(r"(?<![\w.~/])(?:(?:/private)?/var/folders(?:/" + _PATH_PART + r"){2}/t|(?:/private)?(?:/var)?/tmp"
                    r"|/dev/shm|[a-z]:\\users\\" + _PATH_PART + r"\\appdata\\local\\temp)"
                    r"(?:[/\\]" + _PATH_PART + r")*?(?=[/\\]" + _PATH_PART + r"(?![/\\\w.-]))"),
         "<tmp>", finders.find_temp_path, category="temp_paths"),
    # A weekday opens RFC 2822 ("wed, 28 oct 2026 10:15:07 +0000"), ctime ("wed oct 28 10:15:07 2026")
    # and "wednesday, october 28" dates: masked whole, or the weekday would stay behind.
    Mask(re.compile(r"\b" + _WEEKDAY + r"\.?,?[ \t]+(?:" + _MONTH_NAME + r"[ \t]+\d{1,2}" + _ORD + r"|\d{1,2}" + _ORD
                    + r"[ \t]+" + _MONTH_NAME + r")(?:,?[ \t]+\d{4})?(?:,?[ \t]+" + _CLOCK + r"(?:[ \t]*" + _ZONE
                    + r")?(?:[ \t]+\d{4})?)?\b"), "<date>", finders.find_weekday_date),
    Mask(re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"),
         "<date>", finders.find_iso_date),
    Mask(re.compile(r"\b\d{8}t\d{4}(?:\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?\b"), "<date>", finders.find_iso_basic),
    # Unix time in seconds or milliseconds, 2001-09-09 to 2033-05-18 (ten or thirteen digits from 1).
    Mask(re.compile(r"(?<!\d\.)\b1\d{9}(?:\d{3})?(?:\.\d+)?\b"), "<date>", finders.find_epoch),
    Mask(re.compile(r"\b\d{4}/\d{1,2}/\d{1,2}\b"), "<date>", finders.find_ymd_slash),
    Mask(re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "<date>", finders.find_slash_date),
    Mask(re.compile(r"\b\d{1,2}\.\d{1,2}\.\d{4}\b"), "<date>", finders.find_dotted_date),
    Mask(re.compile(r"\b" + _MONTH + r" \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b"), "<date>", finders.find_month_day_year),
    Mask(re.compile(r"\b\d{1,2} " + _MONTH + r",? \d{4}\b"), "<date>", finders.find_day_month_year),
    # syslog: "oct 28 10:15:07", "nov  3 09:01:00"
    Mask(re.compile(r"\b" + _MONTH_NAME + r" {1,2}\d{1,2} {1,2}\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"), "<date>",
         finders.find_syslog_date),
    Mask(re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\+\d)?\b"), "<time>",
         finders.find_time),
    Mask(re.compile(r"\b(?:\d+ ?|(?:" + "|".join(map(re.escape, finders.AGO_WORDS)) + r") )" + _AGO_UNIT + r" ago\b"),
         "<ago>",
         finders.find_ago),
    Mask(re.compile(r"\b(?:yesterday|today|tomorrow|just now)\b"), "<ago>", finders.find_relative_day),
    Mask(re.compile(r"\b(score|similarity|relevance|rank|ranking|distance|confidence|cosine)(\"?\s*[:=]\s*)"
                    r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), r"\1\2<n>", finders.find_score, kept_groups=2,
         category="scores"),
    # "1.23s", "120 ms", "0m1.234s" (bash time), "5 minutes"
    Mask(re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?: ?" + _DURATION_UNIT + r"|(?:ms|s|m|h)(?:\d+(?:\.\d+)?(?:ms|s|m|h))+)\b"),
         "<dur>", finders.PLAIN_SUB, category="durations"),
    Mask(re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|][ \t]?"), "", finders.find_line_number, category="line_numbers"),
    Mask(re.compile(r"(?m)^[ \t]*\d+(?:\t|[ \t]*[→│])[ \t]?"), "", finders.find_gutter, category="gutters"),
    # Tokens of symbols only ("|", "~", "--", "•"), and single letters but "a" and "i".
    Mask(re.compile(r"(?<![^\s\x00])(?:[^\w\s\x00<>]+|[^\W\d_ai])(?![^\s\x00])"), "", finders.PLAIN_SUB,
         category="ocr_noise"),
)
# The units of a round are masked in one piece, joined by UNIT_SEP, which
# gives the same units back: no mask can match across "\n\x00\n" (none matches
# a NUL, and none crosses a newline except through \s, which stops at the
# NUL), and at a unit's edge \b, ^ and the lookbehinds see a newline exactly
# as they see the string's edge. A new mask must keep this true.
UNIT_SEP = "\n\x00\n"

def masks_of(profile: str) -> tuple[Mask, ...]:
    """The masks a profile applies, in the table's order."""
    cats = PROFILES[profile]
    return tuple(m for m in MASKS if m.category in cats)


_FAST = {name: FastMasks(masks_of(name)) for name in PROFILES}


def apply_masks_plain(text: str, profile: str = "default") -> str:
    """The masks by definition."""
    for mask in masks_of(profile):
        text = mask.pattern.sub(mask.repl, text)
    return text


def apply_masks(text: str, profile: str = "default") -> str:
    """The same answer as apply_masks_plain, fast."""
    return _FAST[profile].apply(text)


def split_profile(variant: str) -> tuple[str, FastMasks | None]:
    """`variant` as a smaller profile (`base`) and the masks it adds (`rest`),
    where those come after all of base's in the table: masking with base and
    then with rest is masking with variant, so a rule that needs `variant`
    can start from text another rule normalized with `base`. `rest` is None
    where no profile is smaller (`variant` is its own base)."""
    if variant in PROFILES:
        mine = masks_of(variant)
        for base in sorted(PROFILES, key=lambda p: -len(PROFILES[p])):
            theirs = masks_of(base)
            if len(theirs) < len(mine) and mine[:len(theirs)] == theirs:
                return base, FastMasks(mine[len(theirs):])
    return variant, None


def check_variant(variant: str) -> None:
    if variant not in NORMALIZATIONS:
        raise ValueError(f"unknown normalization {variant!r}; allowed: {', '.join(NORMALIZATIONS)}")


@shared(key=lambda text, variant="default": (variant, text), size=lambda text, variant="default": len(text))
def normalize(text: str, variant: str = "default") -> str:
    """Normalize one paragraph. `none` leaves it as it is; `basic` is NFKC,
    casefold and collapsed whitespace; a profile also masks its volatile tokens."""
    if variant == "none":
        return text
    check_variant(variant)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if variant != "basic":
        text = apply_masks(text, variant)
    return " ".join(text.split())


@shared(key=lambda units, variant: (variant, tuple(units)), size=lambda units, variant: sum(map(len, units)),
        copy=list)
def normalize_units(units: Sequence[str], variant: str) -> list[str]:
    """normalize() of each unit but for the whitespace collapse (the caller
    splits the words); the masks run once over the joined units."""
    if variant == "none":
        return list(units)
    units = [u.casefold() if u.isascii() else unicodedata.normalize("NFKC", u).casefold() for u in units]
    if variant == "basic":
        return units
    masks = _FAST[variant]
    joined = UNIT_SEP.join(units)
    if not masks.vetted or joined.count("\x00") != len(units) - 1:
        return [masks.apply(u) for u in units]
    return masks.apply(joined).split(UNIT_SEP)
