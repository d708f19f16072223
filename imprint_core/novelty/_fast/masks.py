"""The masks applied fast: the same text as running each as `pattern.sub`.

Quarantined speed-up; the definition is `normalization.apply_masks_plain`.
Each mask's finder (`_fast/mask_finders.py`) says where a match could start; the
pattern is then tried only there, left to right, which is what `sub` does,
and the shapes of the result are spliced from the edits, not rebuilt. A mask
declared PLAIN_SUB, and a text with a non-ASCII digit, take the plain sub.
Where every mask of a table has a finder that compiled.pyx writes again in C
(the `default` profile's), the compiled path (accel) runs the same steps
there.
"""
from __future__ import annotations

import re
from typing import Sequence

from . import mask_finders as finders
from . import accel
from .mask_finders import ALL, PLAIN_SUB, READS_HEX, Shape

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")

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


def kept_prefix(repl: str, groups: int) -> tuple[int, str] | None:
    """For a mask that keeps the match's text up to the end of group `groups`
    (repl is \\1..\\k and a literal tail): (k, tail). The edit is then only
    what comes after group k, and no replacement string is built per match."""
    if not groups:
        return None
    head = "".join(f"\\{g}" for g in range(1, groups + 1))
    tail = repl[len(head):]
    if not repl.startswith(head) or "\\" in tail:
        raise ValueError(f"kept_groups={groups} needs a replacement \\1..\\{groups} and a literal, got {repl!r}")
    return groups, tail


def _edits(pattern: re.Pattern[str], repl: str, kept: tuple[int, str] | None, expand, text: str,
           starts: list[int]) -> list[tuple[int, int, str]] | None:
    """What pattern.sub(repl, text) replaces, as (start, end, replacement), given
    every position a match could start at (sorted); None: a match is empty."""
    edits: list[tuple[int, int, str]] = []
    pos = 0
    match = pattern.match
    for p in starts:
        if p < pos:
            continue
        m = match(text, p)
        if m is None:
            continue
        pos = m.end()
        if pos == p:  # an empty match: leave the subtleties to re
            return None
        if kept is not None:
            edits.append((m.end(kept[0]), pos, kept[1]))
        else:
            edits.append((p, pos, repl if expand is None else expand(m)))
    return edits


def _edited(text: str, edits: list[tuple[int, int, str]]) -> str:
    out = []
    pos = 0
    for p, e, r in edits:
        out.append(text[pos:p])
        out.append(r)
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _sub_at(pattern: re.Pattern[str], repl: str, kept: tuple[int, str] | None, expand, shape: Shape,
            starts: list[int]) -> Shape | None:
    """pattern.sub(repl, text) for the text of shape, given every position a
    match could start at (sorted): the shape of the result, None if unchanged."""
    text = shape.text
    edits = _edits(pattern, repl, kept, expand, text, starts)
    if edits is None:
        return Shape(pattern.sub(repl, text))
    if not edits:
        return None
    return shape.edited(_edited(text, edits), edits)


class FastMasks:
    """A table of masks (objects with pattern, repl, finder, kept_groups),
    applied through their finders."""

    def __init__(self, masks: Sequence):
        self.masks = tuple(masks)
        self._steps = [(m.pattern, m.repl, None if m.finder is PLAIN_SUB else m.finder,
                        kept_prefix(m.repl, m.kept_groups), _template(m.repl)) for m in self.masks]
        # After the last mask whose finder reads the hex shape, that shape is
        # dropped rather than kept up to date.
        self._drop_hex_at = 1 + max((i for i, m in enumerate(self.masks) if m.finder in READS_HEX), default=-1)
        # A mask declared PLAIN_SUB has not been vetted for the joined units
        # of normalization.normalize_units either.
        self.vetted = all(m.finder is not PLAIN_SUB for m in self.masks)
        self.compiled_steps = _compiled_steps(self.masks)
        self._ocr = self._ocr_noise_only()
        if self.compiled_steps is not None:   # per mask: what the extension's apply_table needs
            exact = self.compiled_steps[2]
            self._table = [(p, r, k, e, x) for (p, r, _, k, e), x in zip(self._steps, exact)]
        # A table whose first masks have compiled finders and whose others do not (the `ocr` profile: the
        # default's, then ocr_noise): those first on the compiled path, then the others as they go. The
        # masks apply one after another, so the two halves in turn are the whole table.
        head = _compiled_head(self.masks)
        self._halves = (FastMasks(self.masks[:head]), FastMasks(self.masks[head:])) if 0 < head < len(self.masks) \
            else None

    def _ocr_noise_only(self) -> bool:
        """Whether this table is the ocr_noise mask alone, as the extension's ocr_noise() is written for it."""
        built = accel.built
        return (built is not None and len(self.masks) == 1 and self.masks[0].repl == ""
                and self.masks[0].pattern.pattern == getattr(built, "OCR_NOISE_PATTERN", None)
                and self.masks[0].pattern.flags == re.UNICODE)

    def plain(self, text: str) -> str:
        for m in self.masks:
            text = m.pattern.sub(m.repl, text)
        return text

    def _apply_compiled(self, text: str, ext) -> str:
        """apply, with each finder's compiled twin: no shapes to keep. The
        extension walks the table to the next mask that could match (one call
        where most texts match none)."""
        finders, back, _ = self.compiled_steps
        if hasattr(ext, "apply_table"):
            return ext.apply_table(finders, self._table, text, back)
        steps = self._steps
        i = 0
        while True:
            i, starts = ext.next_starts(finders, i, text, back)
            if starts is None:
                return text
            pattern, repl, _, kept, expand = steps[i]
            edits = _edits(pattern, repl, kept, expand, text, starts)
            if edits is None:
                text = pattern.sub(repl, text)
            elif edits:
                text = _edited(text, edits)
            i += 1

    def apply(self, text: str) -> str:
        if not text.isascii():
            try:
                text.encode("latin-1")          # no decimal digit above U+007F below U+0100
            except UnicodeEncodeError:
                if any(map(str.isdecimal, "".join(_NON_ASCII.findall(text)))):
                    return self.plain(text)     # a non-ASCII digit: the shapes would not see it
        if accel.ext is not None and self.compiled_steps is not None:
            return self._apply_compiled(text, accel.ext)
        if accel.ext is not None and self._halves is not None:
            return self._halves[1].apply(self._halves[0].apply(text))
        if accel.ext is not None and self._ocr:
            return accel.ext.ocr_noise(text)
        shape = Shape(text)
        drop_hex = self._drop_hex_at
        for step, (pattern, repl, finder, kept, expand) in enumerate(self._steps):
            if step == drop_hex:
                shape.drop_hex()
            if finder is None:
                new, n = pattern.subn(repl, shape.text)
                if n:
                    shape = Shape(new)
                continue
            starts = finder(shape.text, shape)
            if starts is None:
                continue
            if starts is ALL:
                new, n = pattern.subn(repl, shape.text)
                if n:
                    shape = Shape(new)
            else:
                shape = _sub_at(pattern, repl, kept, expand, shape, starts) or shape
        return shape.text


def _compiled_head(masks: Sequence) -> int:
    """How many of the first masks have a compiled finder (0 where the extension is not built)."""
    if accel.built is None:
        return 0
    ids = accel.built.FINDERS
    named = {fn for name, fn in vars(finders).items() if name in ids}
    k = 0
    while k < len(masks) and masks[k].finder in named:
        k += 1
    return k


def _compiled_steps(masks: Sequence) -> tuple[list[int], int, list[int]] | None:
    """Each mask's compiled finder, find_ago's look-back, and each mask's C
    matcher (0: `re` decides); None unless every mask has a compiled finder
    (or the extension is not built)."""
    if accel.built is None:
        return None
    ids = accel.built.FINDERS
    by_finder = {fn: ids[name] for name, fn in vars(finders).items() if name in ids}
    if not all(m.finder in by_finder for m in masks):
        return None
    back = max(len(w) + 1 for w in finders.AGO_WORDS)   # find_ago: the longest quantity word and its space
    exact = getattr(accel.built, "EXACT", {})
    names = {fn: name for name, fn in vars(finders).items() if name in ids}
    return [by_finder[m.finder] for m in masks], back, [exact.get(names[m.finder], 0) for m in masks]
