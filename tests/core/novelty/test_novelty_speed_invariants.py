"""The optimized novelty path gives the same answers as a straightforward one.

imprint_core.novelty judges a round's results together (_fast/tally.py), masks
their units in one joined piece, tries each mask only where a literal search
says it could match (_fast/mask_finders.py, applied by _fast/masks.py), hashes
shingles in bulk with numpy (fingerprints.py) and keeps them in numpy hash
tables (store.py).
The reference below is the plain definition: each unit normalized alone with
every mask of the profile run as `pattern.sub` in order, lines and words by
str.split(), words hashed one by one, windows cut by window_cuts at anchors
found with the plain span hash, echoes found line by line, near-duplicate
sketches built gram by gram, Python sets. Fingerprint values differ (another
hash); every count and verdict must not, whether a round is observed at once
or judged result by result, under every option of NoveltyConfig.
"""
from __future__ import annotations

import itertools
import json
import random
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

import xxhash

from imprint_core import novelty as nv
from imprint_core.novelty import NoveltyConfig, NoveltyTracker, SHINGLE_WORDS, normalize, segment, shingles
from imprint_core.novelty._fast import masks as fm, mask_finders as finders
from imprint_core.novelty import fingerprints as fp, neardup, \
    normalization as nz
from imprint_core.novelty.echo import Echoes, evidence_free, template_lines
from imprint_core.novelty.rule import TEMPLATE_CAPACITY
from imprint_core.novelty.store import BoundedHashSet, FingerprintStore

# ------------------------------------------------------------ reference ---

_h64 = xxhash.xxh3_64_intdigest


def ref_masked(text: str, variant: str) -> str:
    """normalize() but for the whitespace collapse: NFKC, casefold, the profile's masks one by one."""
    if variant == "none":
        return text
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if variant != "basic":
        for mask in nz.masks_of(variant):
            text = mask.pattern.sub(mask.repl, text)
    return text


def ref_normalize(text: str, variant: str) -> str:
    return text if variant == "none" else " ".join(ref_masked(text, variant).split())


def ref_shingles(words):
    if not words:
        return set()
    hashes = [_h64(w.encode()) for w in words]
    if len(hashes) < SHINGLE_WORDS:
        return {hash(tuple(hashes))}
    return {hash(t) for t in zip(*(hashes[i:] for i in range(SHINGLE_WORDS)))}


def ref_sketch(data: bytes):
    """neardup.sketch written plainly."""
    if not data:
        return None
    data = data.ljust(neardup.GRAM, b"\0")
    grams = {fp.mix64_plain(int.from_bytes(data[i:i + neardup.GRAM], "little") + 1)
             for i in range(len(data) - neardup.GRAM + 1)}
    bins: dict[int, int] = {}
    for h in grams:
        b = h >> 57
        bins[b] = min(bins.get(b, h), h)
    return bins, len(grams)


def ref_similarity(a, b, measure: str) -> float:
    (sa, na), (sb, nb) = a, b
    either = set(sa) | set(sb)
    j = sum(1 for k in either if sa.get(k) == sb.get(k)) / max(len(either), 1)
    return j if measure == "jaccard" else min(j * (na + nb) / ((1 + j) * na), 1.0)


class Window:
    def __init__(self):
        self.judged: list[int] = []    # shingle ids (a multiset)
        self.lines: list[int] = []     # the line of each judged shingle
        self.extra: list[int] = []


def ref_new_passage(w: Window, known, width: int) -> bool:
    """A line of two or more shingles all unknown, or 2 * width unknown ones in a row of a line."""
    for line in dict.fromkeys(w.lines):
        ids = [sid for sid, ln in zip(w.judged, w.lines) if ln == line]
        flags = [sid not in known for sid in ids]
        if len(ids) >= 2 and all(flags):
            return True
        run = 0
        for f in flags:
            run = run + 1 if f else 0
            if run >= 2 * width:
                return True
    return False


class RefTracker:
    """The novelty rule written plainly: each unit normalized alone, lines
    and shingles by str.split(), windows cut by fingerprints.window_cuts at
    anchors found with the plain span hash, Python sets."""

    def __init__(self, cfg: NoveltyConfig):
        self.cfg = cfg
        self.sh = BoundedHashSet(cfg.shingle_capacity)
        self.par = BoundedHashSet(cfg.paragraph_capacity)
        self.sketches: tuple[list, list] = ([], [])   # young, old
        self.tpl = BoundedHashSet(TEMPLATE_CAPACITY)   # template line readings (echo.template_lines)
        self.tpl_pending: list[int] = []

    def windows(self, unit: str, echo, replace: bool = False) -> list[Window]:
        cfg = self.cfg
        lines = [" ".join(line.split()) for line in ref_masked(unit, cfg.normalization).split("\n")]
        lines = [line for line in lines if line]
        template = set()              # the lines some other value of the arguments gave: not judged
        if echo is not None and echo.templated:
            tl = template_lines("\n".join(lines), echo)
            if tl.unit_key is not None and tl.unit_key in self.tpl:
                template = set(range(len(lines)))
            else:
                template = {i for i, ks in tl.lookups if any(k in self.tpl for k in ks)}
            if not replace:
                self.tpl_pending += tl.remember
        if replace:   # a unit that is all echo: judged with each echo replaced, its template lines left out
            lines = [echo.replaced(line) for i, line in enumerate(lines) if i not in template]
            template = set()
        all_touched = [i in template for i in range(len(lines))]
        if cfg.fingerprint_unit == "line":
            spans = [[(line, t)] for line, t in zip(lines, all_touched)]
        else:
            spans = [list(zip(lines, all_touched))] if lines else []
        out = []
        for span in spans:
            shingles = []                 # (first word in the span, id, judged, text, line)
            offset = 0
            for line_no, (line, whole) in enumerate(span):
                words = line.split()
                touched = [whole] * len(words)
                if echo is not None and echo.pattern is not None:
                    starts = [0]
                    for w in words:
                        starts.append(starts[-1] + len(w) + 1)
                    for m in echo.pattern.finditer(line):
                        for k in range(len(words)):
                            if starts[k] < m.end() and m.start() < starts[k] + len(words[k]):
                                touched[k] = True
                k = cfg.shingle_words
                runs = [(i, i + k) for i in range(len(words) - k + 1)] or [(0, len(words))]
                for a, b in runs:
                    text = " ".join(words[a:b]).encode()
                    shingles.append((offset + a, _h64(text), not any(touched[a:b]), text, line_no))
                offset += len(words)
            cuts = []
            if offset > 2 * fp.WINDOW_MIN:
                cuts = fp.window_cuts(offset, [a for a, _, _, text, _ in shingles
                                               if fp.is_anchor_plain(fp.span_hash_plain(text))])
            bounds = [0, *cuts, offset]
            for lo, hi in zip(bounds, bounds[1:]):
                w = Window()
                for a, sid, judged, _, line_no in shingles:
                    if lo <= a < hi:
                        if judged:
                            w.judged.append(sid)
                            w.lines.append(line_no)
                        else:
                            w.extra.append(sid)
                out.append(w)
        return out

    def judge(self, status, text, segments=None, arguments=None):
        cfg = self.cfg
        if status == "error":
            return (0, 0, 0), None
        units = list(segments) if segments is not None else segment(text)
        echo = Echoes(arguments, cfg.normalization) if arguments and status == "ok" else None
        if status != "ok" or not any(u.strip() for u in units) or evidence_free(text, echo):
            return (0, 0, 0), None
        windows = []
        for u in units:
            ws = self.windows(u, echo)
            if echo is not None and ws and not any(w.judged for w in ws):
                again = self.windows(u, echo, replace=True)
                if again:     # not a unit of template lines only
                    again[0].extra += [sid for w in ws for sid in w.extra]
                    ws = again
            windows += ws
        sk = None
        near = False
        if cfg.near_duplicate != "off":
            sk = ref_sketch(" ".join(" ".join(ref_masked(u, cfg.normalization) for u in units).split()).encode())
            near = sk is not None and any(ref_similarity(sk, old, cfg.near_duplicate) >= cfg.near_duplicate_threshold
                                          for old in self.sketches[0] + self.sketches[1])
        new = total = largest = 0
        all_sh, extra, paras = set(), set(), set()
        for w in windows:
            extra |= set(w.extra)
            if near:
                extra |= set(w.judged)
            elif w.judged:
                total += len(w.judged)
            if not w.judged:
                continue
            ph = hash(tuple(sorted(w.judged)))
            paras.add(ph)
            if near or ph in self.par:
                continue
            sh = set(w.judged)
            if (self.sh.count_known(sh) < cfg.containment_threshold * len(sh)
                    or ref_new_passage(w, self.sh, cfg.shingle_words)):
                new += 1
                largest = max(largest, len(sh))
            all_sh |= sh
        return (len(windows), new, len(all_sh) - self.sh.count_known(all_sh)), (all_sh, extra, paras, sk, total,
                                                                               largest)

    def observe_round(self, results):
        judged = [self.judge(*r) for r in results]
        self.tpl.add_all(self.tpl_pending)
        self.tpl_pending = []
        kept = [j[1] for j in judged if j[1] is not None]
        round_sh = set().union(*(k[0] for k in kept))
        new_sh = len(round_sh) - self.sh.count_known(round_sh)
        new_par = sum(j[0][1] for j in judged)
        total, largest = sum(k[4] for k in kept), max((k[5] for k in kept), default=0)
        self.sh.add_all(round_sh)
        extra = set().union(*(k[1] for k in kept))
        if extra:
            self.sh.add_all(extra)
        self.par.add_all(set().union(*(k[2] for k in kept)))
        new_sketches = [k[3] for k in kept if k[3] is not None]
        if new_sketches:
            young, old = self.sketches
            young += new_sketches
            if len(young) >= neardup.CAPACITY // 2:
                self.sketches = ([], young)
        cfg = self.cfg
        progress = new_par > 0 and new_sh >= min(cfg.min_new_shingles, largest) and new_sh >= cfg.min_new_share * total
        return [j[0] for j in judged], (progress, new_par, new_sh)


def fast_round(tracker: NoveltyTracker, results, one_by_one: bool = False):
    if one_by_one:  # as the loop does it: judge each result as it comes, then commit the round
        rn = tracker.commit_round([tracker.judge(*r) for r in results])
    else:
        rn = tracker.observe_round(results)
    return [(v.paragraphs, v.new_paragraphs, v.new_shingles) for v in rn.verdicts], \
        (rn.progress, rn.new_paragraphs, rn.new_shingles)


# ---------------------------------------------------------------- inputs ---

# Pieces chosen to hit every mask, its edges and its near misses.
TOKENS = [
    "score", "Score", "similarity", "relevance", "rank", "ranking", "ranked", "distance", "confidence", "cosine",
    ":", "=", ": ", " = ", '"', "'", "-", "+", ".", ",", "/", "|", "?", "#", "&", "<", ">", "e-05", "e+3", "_",
    "0", "7", "12", "2024", "03", "31", "12345", "0.87", "-1.5", "1e-9", "3.", ".5",
    "2024-03-05", "2024-03-05t10:22:31z", "2024-03-05 10:22", "1999-12-31T23:59:59.123+02:00",
    "12/31/2024", "1/2/24", "3/4", "10:30", "9:05:01", "9:05 pm", "11:11a.m.", "12:00+1", "1:2",
    "jan", "January", "feb", "Mar", "march", "may", "sept", "Sept.", "dec", "decide", "market", "1st", "2nd", "3rd", "4th",
    "ago", "3 days ago", "1 hour ago", "minutes", "weeks", "year",
    "http://", "https://", "https://example.com/a/b", "?q=1&x=2", "#frag", "example.org", "www",
    "deadbeef", "0123456789abcdef", "0123456789abcdef0", "abcdefabcdefabcd", "1234567812345678", "feedface1234",
    "123e4567-e89b-12d3-a456-426614174000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "\n", "\n\n", "\n \n", "\t", "  ", " ", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2003", "\u3000",
    "\x00", "\n\x00\n", "caf\u00e9", "cafe\u0301", "\u0301", "Stra\u00dfe", "\u0130", "\ufb01", "\u00bd", "\u00b2",
    "\uff13", "\u0663", "\u0663\u0664:\u0665\u0666", "\u0967\u0968/\u0969/\u0968\u0966\u0968\u0966", "\U0001d7d9",
    "KB", "the", "of", "a", "evidence", "alpha", "beta", "gamma", "delta", "<id>", "<date>", "<n>",
]
# Volatile-token shapes, slot by slot: option 0 of every slot makes a text the
# mask matches; the other options are variants and near misses.
D = ["0", "7", "12", "123", "", "x", "\u0663"]
SHAPES = [
    [["jan", "sept", "march", "Dec", "mayday", "oct", "xjan", "0jan", "_sep"], ["", ".", ".."], [" ", "", "  ", "\n"],
     D, ["", "st", "nd", "th", "x"], ["", ",", ".", ",,"], [" ", "", "\t"], ["2024", "99999", "202", "1999x", "1999_"]],
    [D, [" ", "", "-"], ["jan", "sept", "march", "Dec", "decided"], ["", "."], ["", ","], [" ", ""],
     ["2024", "12345", "202", "2024a"]],
    [D, [":", ";", ""], ["00", "5", "59", "123"], ["", ":07", ":07.5", ":7"], ["", " ", "\n", "  "],
     ["", "am", "p.m.", "pm", "a.m", "xm"], ["", "+1", "+", "+12"], ["", "a", "0", " "]],
    [["2024", "999", "20245"], ["-", "/"], ["03", "3"], ["-"], ["05", "5", "051"],
     ["", "t", " ", "T", "x"], ["", "10:22", "10:2", "10:22:31", "10:22:31.123", "10:22:31,5"],
     ["", "z", "+02:00", "-0530", "+2", "zz"]],
    [D, ["/"], D, ["/", "//"], ["24", "2024", "20245", "2"]],
    [["1", "12", "123456", "", "a1"], [" ", "", "  "], ["second", "days", "hour", "weeks", "months", "yearly"],
     [" ", ""], ["ago", "agog", "ago.", "ago1"]],
    [["score", "rank", "ranking", "cosine", "xscore", "rankings", "Score"], ["", '"', "'"], ["", " ", "\n", "\t "],
     [":", "=", "::", ""], ["", " ", "  "], ["", "-", "+"], ["0", "12", "0.87", ".5", "1e-9", "3.", "1e+3", "e5"]],
    [["", "\n", "x\n", "\n\n"], ["", " ", "\t"], ["1", "42", "", "a"], ["", " ", "\t"], [":", "|", ";"],
     ["", " ", "\t", "  "], ["code", ""]],
    [["", "0.", "1.", "x"], ["0123456789abcdef", "deadbeefdeadbeef", "0123456789abcde", "ffffffffffffffff0", "1234567812345678",
      "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400"], ["", "g", "0", "-", " "]],
    [["http://", "https://", "http:/", "ftp://"], ["x.io", "a.b/c", ""], ["?q=1&r=2#f", "", "?", "#"],
     ["", " ", '"', "<"], ["", "tail"]],
    # the masks added later: timestamp forms, then the volatile tokens real agent runs hold
    [["0x", "0X", "x", "00x"], ["7f3a9c2e41b0", "7f3a9c", "7f3a9", "7f3a9c2e41b0d8e0a", "7f3a9cg"], ["", ">", "0", " "]],
    [["", " ", "x", "/", "~", "."], ["/tmp", "/var/tmp", "/private/tmp", "/dev/shm", "/var/folders/x1/ab/t",
                                     "c:\\users\\bo\\appdata\\local\\temp", "/tmpx", "/var/folders/x1/t"],
     ["/tmpab12/", "/", "", "\\ab\\", "/a/b/"], ["out.txt", "", "out/"], ["", " ", "/", "\n"]],
    [["wed", "wednesday", "tues", "sunx"], [",", ".", "", ",,"], [" ", "", "\t "],
     ["28 oct", "oct 28", "october 28th", "28th oct.", "28 octx", "oct"], [" 2026", "", ", 202"],
     [" 10:15:07 +0000 2026", " 10:15 pm", " 1015", " 10:15:07 gmt", " 10:15-0700", " 10:15 +00"], ["", "x", "0"]],
    [["2026", "226", "20266", "x"], ["1028", "102", "10289"], ["t", "x", ""], ["101507", "1015", "10150", "1015079"],
     ["", ".5", ",12"], ["", "z", "+0200", "-02:00", "+02"], ["", "0", "a"]],
    [["1792930507", "1792930507123", "179293050", "17929305071", "2792930507", "1792930507123456"],
     ["", ".5", "."], ["", "0", "a", " "], ["", "x"]],
    [["", "0", "x", "."], ["2026", "226", "20266"], ["/"], ["10", "1", "100"], ["/", "-"], ["28", "2", "280"],
     ["", "0", "/"]],
    [["", "0", "x", "1."], ["28", "2", "280", ""], ["."], ["10", "1", "100"], ["."], ["2026", "20", "20266"],
     ["", "0", ".5"]],
    [["", "x", " "], ["oct", "september.", "may", "octx", "jun"], [" ", "  ", "   ", ""], ["28", "3", "283"],
     [" ", "  ", ""], ["10:15:07", "9:01", "10:15:07.5", "10:1", "101:15"], ["", "0", "x"]],
    [["5", "an", "a", "a few", "one", "several", "a couple of", "two", "twenty", "couple", "twos", "12 ", "x", ""], [" ", "", "  "],
     ["hours", "h", "min", "mos", "yr", "hourz", "sec"], [" ago", " agox", "ago", "  ago"], ["", ".", "x"]],
    [["", "x", " "], ["yesterday", "today", "tomorrow", "just now", "todays", "just  now"], ["", "x", ".", " "]],
    [["", "x", " ", "."], ["1", "1.234", "120", "0"], ["", " "], ["s", "ms", "μs", "sec", "minutes", "m1.5s", "h2m",
                                                                  "sx", "mss", "hours"], ["", "x", "0", " ", "."]],
    [["", "\n", "x\n"], ["", " ", "\t"], ["12", "", "a"], ["\t", " →", "│", ":", ""], ["", " ", "\t"],
     ["code", ""]],
    [["", " ", "x"], ["|", "~", "--", "•", "l", "a", "i", "<id>", "7", "_"], ["", " ", "x", "\n"]],
]


def near_misses(slots, deviations=3):
    """Every text of the shape with at most `deviations` slots off option 0."""
    n = len(slots)
    for k in range(deviations + 1):
        for where in itertools.combinations(range(n), k):
            for picks in itertools.product(*(range(1, len(slots[i])) for i in where)):
                choice = [0] * n
                for i, p in zip(where, picks):
                    choice[i] = p
                yield "".join(slots[i][c] for i, c in enumerate(choice))


def shape_st(slots):
    return st.tuples(*(st.sampled_from(options) for options in slots)).map("".join)


glue_st = st.sampled_from(["", " ", "  ", "\n", ", ", "a", "0", "_", ".", "\t", "\n\n", "\u00e9"])
atoms_st = st.lists(st.tuples(st.one_of(*(shape_st(sh) for sh in SHAPES)), glue_st).map("".join),
                    max_size=6).map("".join)
words_st = st.sampled_from(TOKENS) | st.text(alphabet="abcdef0123456789 :-/.\n", min_size=1, max_size=20)
text_st = st.lists(words_st, min_size=0, max_size=60).map("".join) | st.lists(words_st, max_size=40).map(" ".join)


def para(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(TOKENS[:100] + ["w%d" % rng.randrange(60) for _ in range(60)]) for _ in range(n))


# ----------------------------------------------------------------- tests ---

# The profile each shape is checked in: the shipped one where it holds the
# shape's mask, else "all" (every mask).
SHAPE_PROFILES = ["default"] * 10 + ["all", "all"] + ["default"] * 8 + ["all", "all", "all"]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_fast_masks_equal_plain_masks_on_every_near_miss(shape):
    profile = SHAPE_PROFILES[shape]
    for core in near_misses(SHAPES[shape]):
        for before, after in itertools.product(["", " ", "a0", "\n", "."], repeat=2):
            t = (before + core + after).casefold()
            assert nz.apply_masks(t, profile) == nz.apply_masks_plain(t, profile), (profile, t)


@hsettings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms_st, st.sampled_from(list(nz.PROFILES)))
def test_fast_masks_equal_plain_masks_on_atoms(text, profile):
    t = text.casefold()
    assert nz.apply_masks(t, profile) == nz.apply_masks_plain(t, profile)


@hsettings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_st, st.sampled_from(list(nz.PROFILES)))
def test_fast_masks_equal_plain_masks(text, profile):
    t = text.casefold()
    assert nz.apply_masks(t, profile) == nz.apply_masks_plain(t, profile)
    assert normalize(text, profile) == ref_normalize(text, profile)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(text_st, min_size=1, max_size=6), st.sampled_from(nv.NORMALIZATIONS))
def test_units_normalized_together_equal_one_by_one(units, variant):
    got = nz.normalize_units(units, variant)
    assert [" ".join(u.split()) for u in got] == [" ".join(ref_normalize(u, variant).split()) for u in units]


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab \u00e9\u00a0\t", min_size=1, max_size=4).filter(lambda w: w.split() == [w]),
                max_size=12))
def test_shingle_counts_match_reference(words):
    assert len(shingles(words)) == len(ref_shingles(words))


def test_the_fast_hashes_are_the_plain_ones():
    data = "the quick brown fox\njumps over the lazy dog".encode()
    starts, ends = np.array([0, 4, 20, 0]), np.array([3, 19, 43, 0])
    assert fp._span_hashes(data, starts, ends).tolist() == [fp.span_hash_plain(data[a:b]) for a, b in zip(starts, ends)]
    xs = [1, 2, 2**64 - 1, 0x9E3779B97F4A7C15]
    assert fp.mix64(np.array(xs, np.uint64)).tolist() == [fp.mix64_plain(x) for x in xs]


@hsettings(max_examples=200, deadline=None)
@given(st.integers(0, 3_000), st.lists(st.integers(0, 3_000), max_size=60, unique=True).map(sorted))
def test_window_cuts_keep_their_bounds(n, anchors):
    anchors = [a for a in anchors if a < n]
    cuts = fp.window_cuts(n, anchors)
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    assert cuts == sorted(set(cuts)) and all(0 < c < n for c in cuts)
    assert all(s >= fp.WINDOW_MIN for s in sizes) or n < 2 * fp.WINDOW_MIN and not cuts
    assert all(s <= fp.WINDOW_MAX for s in sizes[:-1]) and sizes[-1] < fp.WINDOW_MAX + fp.WINDOW_MIN
    assert set(cuts) - set(anchors) <= {c for c in cuts if c - max([0] + [d for d in cuts if d < c]) == fp.WINDOW_MAX}


def test_fingerprints_are_the_same_in_every_process():
    import subprocess
    import sys
    code = ("from imprint_core.novelty.fingerprints import shingles, windows_of; "
            "print(sorted(shingles('the quick brown fox jumps over'.split())), "
            "windows_of(['one two three four five six', 'seven']).hashes.tolist())")
    root = str(Path(nv.__file__).resolve().parents[2])
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                           env={"PYTHONHASHSEED": seed, "PYTHONPATH": root}).stdout for seed in ("1", "2")}
    here = f"{sorted(shingles('the quick brown fox jumps over'.split()))} " \
           f"{fp.windows_of(['one two three four five six', 'seven']).hashes.tolist()}\n"
    assert outs == {here}
    assert len(shingles("the quick brown fox jumps over".split())) == 2
    w = fp.windows_of(["one  two\tthree four five six"])
    assert w.hashes.tolist() == fp.windows_of(["one two three four five six"]).hashes.tolist()


def random_config(rng: random.Random, variant: str, threshold: float, caps: tuple[int, int]) -> NoveltyConfig:
    """Every parameter of the rule, drawn; the shipped value half the time."""
    def pick(default, *others):
        return default if rng.random() < 0.5 else rng.choice(others)
    return NoveltyConfig(normalization=variant, containment_threshold=threshold, min_new_shingles=rng.choice([1, 3]),
                         shingle_capacity=caps[0], paragraph_capacity=caps[1], shingle_words=pick(5, 1, 2, 3, 8),
                         min_new_share=pick(0.0, 0.05, 0.5), fingerprint_unit=pick("paragraph", "line"),
                         near_duplicate=pick("off", "jaccard", "containment"),
                         near_duplicate_threshold=rng.choice([0.5, 0.9]))


QUERIES = ["heat pump", "w3 w4", "alpha beta", "2024", "x", "score"]


@hsettings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(0, 2**32 - 1), st.sampled_from(nv.NORMALIZATIONS), st.sampled_from([0.5, 0.8, 1.0]),
       st.sampled_from([(262_144, 65_536), (60, 8), (8, 2)]))
@example(12482, "ocr", 0.5, (262_144, 65_536))   # an empty segment beside template lines (fixed with them)
def test_tracker_verdicts_equal_reference(seed, variant, threshold, caps):
    """Random rounds with repeats, reorders (of paragraphs and of lines),
    volatile changes, long paragraphs, JSON hits, echoed arguments, empty
    reads; small capacities make the store rotate; every option drawn."""
    rng = random.Random(seed)
    cfg = random_config(rng, variant, threshold, caps)
    fast, single, ref = NoveltyTracker(cfg), NoveltyTracker(cfg), RefTracker(cfg)
    seen: list[str] = []
    for _ in range(rng.randint(1, 12)):
        results = []
        for _ in range(rng.randint(1, 4)):
            x = rng.random()
            q = rng.choice(QUERIES)
            if seen and x < 0.35:
                text = rng.choice(seen)
                if rng.random() < 0.5:  # reordered / re-timestamped
                    parts = text.split("\n\n" if rng.random() < 0.5 else "\n")
                    rng.shuffle(parts)
                    text = "\n\n".join(parts).replace("2024", str(rng.randint(1990, 2030)))
            elif x < 0.55:
                hits = [{"title": para(rng, rng.randint(1, 8)), "score": round(rng.random(), 3),
                         "url": f"https://h{rng.randrange(5)}.com/p?q={rng.randrange(99)}"} for _ in range(rng.randint(1, 5))]
                if rng.random() < 0.3:
                    hits = [dict(h, query=q) for h in hits]
                text = json.dumps(hits)
            elif x < 0.62:
                text = rng.choice(["", "   ", "\n\n", json.dumps({"query": q, "results": []})])
            else:
                text = "\n\n".join("\n".join(para(rng, n) for n in rng.choice([[1], [3], [4, 5], [6, 12, 12], [30],
                                                                               [199], [200], [201], [450], [120, 150]]))
                                   for _ in range(rng.randint(1, 4)))
                if rng.random() < 0.3:
                    text = f'Results for "{q}":\n\n{text}'
            seen.append(text)
            segs = None
            if rng.random() < 0.15:
                segs = text.split("\n\n") + [""]
            results.append(("ok", text, segs, {"query": q, "page": rng.randint(1, 3)} if rng.random() < 0.5 else None))
        if rng.random() < 0.1:
            results.append(("error", f"HTTP 503 at {rng.randint(0, 23)}:00", None))
        expected = ref.observe_round(results)
        assert fast_round(fast, results) == expected
        assert fast_round(single, results, one_by_one=True) == expected


@hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(text_st, min_size=1, max_size=3), min_size=1, max_size=5), st.sampled_from(nv.NORMALIZATIONS),
       st.randoms(use_true_random=False))
def test_tracker_verdicts_equal_reference_on_odd_text(rounds, variant, rnd):
    cfg = random_config(rnd, variant, 0.8, (40, 6))
    fast, single, ref = NoveltyTracker(cfg), NoveltyTracker(cfg), RefTracker(cfg)
    for texts in rounds:
        results = [("ok", t, None, {"q": t[:6]} if i % 2 else None) for i, t in enumerate(texts)]
        expected = ref.observe_round(results)
        assert fast_round(fast, results) == expected
        assert fast_round(single, results, one_by_one=True) == expected


def test_judged_sets_behave_as_sets():
    t = NoveltyTracker()
    v, sh, paras = t.judge("ok", "alpha beta gamma delta epsilon zeta eta", None)
    assert len(sh) == 3 and set(sh) == sh and all(h in sh for h in sh) and -1 not in sh
    assert sh | set() == set(sh) and isinstance(paras, set)
    # commit_round also takes plain sets (any ints), as a caller may build them
    rn = t.commit_round([(v, set(sh) | {-5}, paras)])
    assert rn.new_shingles == 4


def test_every_mask_has_its_finder_or_is_declared_slow_path():
    for mask in nz.MASKS:
        assert mask.finder is finders.PLAIN_SUB or mask.finder.__module__ == finders.__name__, mask.pattern.pattern
    with pytest.raises(TypeError):
        nz.Mask(nz.MASKS[0].pattern, nz.MASKS[0].repl, None)  # no finder must be said: PLAIN_SUB


def test_every_mask_is_exercised_by_a_near_miss_shape():
    """The near-miss test above compares both paths on text each mask matches."""
    for mask in nz.MASKS:
        assert any(mask.pattern.search(core.casefold()) for shape in SHAPES for core in near_misses(shape, 1)), \
            mask.pattern.pattern


def test_a_mask_declared_slow_path_takes_the_plain_sub():
    import re
    masks = list(nz.masks_of("default"))
    assert masks[-1].category == "line_numbers"
    masks[-1] = nz.Mask(re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|]"), "", finders.PLAIN_SUB)  # an edited pattern, no finder yet
    fast = fm.FastMasks(masks)
    assert not fast.vetted  # nor are the units masked joined
    text = "  12: alpha\n13 | beta"
    assert fast.apply(text) == fast.plain(text) == " alpha\n beta"


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms_st | text_st, st.integers(0, len(nz.MASKS) - 1))
def test_fast_and_reference_agree_with_one_mask_declared_slow_path(text, which):
    """Any mask may fall back to the plain sub without changing the text."""
    masks = list(nz.MASKS)
    masks[which] = nz.Mask(masks[which].pattern, masks[which].repl, finders.PLAIN_SUB, category=masks[which].category)
    fast = fm.FastMasks(masks)
    t = text.casefold()
    assert fast.apply(t) == fast.plain(t) == nz.apply_masks_plain(t, "all")


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=" \t\n\r\x0b\x1fab\u00a0\u2003\u3000\u00e9", max_size=12), max_size=6))
def test_canonical_units_equal_split_and_join(units):
    got = fp.canonical(units)
    lines = [(i, " ".join(line.split())) for i, u in enumerate(units) for line in u.split("\n")]
    lines = [(i, line) for i, line in lines if line]
    if not lines:
        assert got is None
    else:
        assert got.data == "\n".join(line for _, line in lines).encode()
        assert got.unit.tolist() == [i for i, _ in lines]
        words = [line.split() for _, line in lines]
        assert got.size.tolist() == [len(w) for w in words]
        assert got.first.tolist() == list(itertools.accumulate([0] + [len(w) for w in words[:-1]]))
        flat = [w for ws in words for w in ws]
        assert [got.data[a + 1:b].decode() for a, b in zip(got.bounds[:-1], got.bounds[1:])] == flat


json_st = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                       max_leaves=8)


@hsettings(max_examples=300, deadline=None)
@given(st.lists(json_st, min_size=1, max_size=4))
def test_json_hits_encoded_as_json_dumps_does(items):
    text = json.dumps(items)
    assert segment(text) == [i if isinstance(i, str) else json.dumps(i, ensure_ascii=False, sort_keys=True)
                             for i in json.loads(text)]


def test_unicode_facts_the_fast_paths_rely_on():
    import sys
    assert not any(chr(c).isdecimal() for c in range(0x80, 0x100))        # latin-1 text: ASCII digits only
    assert not any(chr(c).isspace() for c in range(0x10000, sys.maxunicode + 1))
    assert set(fp._NON_ASCII_SPACE) == {chr(c) for c in range(0x80, 0x10000) if chr(c).isspace()}


@hsettings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(1, 300), max_size=40), max_size=40), st.integers(2, 64))
def test_fingerprint_store_follows_the_bounded_set_rule(batches, capacity):
    fast, ref = FingerprintStore(capacity), BoundedHashSet(capacity)
    every = set()
    for batch in batches:
        hs = {h * 0x9E3779B97F4A7C15 % 2**64 for h in batch}
        every |= hs
        assert fast.count_known(hs) == ref.count_known(hs)
        fast.add_all(hs)
        ref.add_all(hs)
        assert len(fast) == len(ref)
        assert all((h in fast) == (h in ref) for h in every)
