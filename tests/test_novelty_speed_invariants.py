"""The optimized novelty path gives the same answers as a straightforward one.

imprint_core.novelty judges a round's results together (_tally.py), masks
their units in one joined piece, tries each mask only where a literal search
says it could match (_fast_masks.py), hashes shingles in bulk with numpy
(fingerprints.py) and keeps them in numpy hash tables (store.py).
The reference below is the plain definition: each unit normalized alone with
every mask run as `pattern.sub` in order, words hashed one by one, Python
sets. Fingerprint values differ (another hash); every count and verdict must
not, whether a round is observed at once or judged result by result.
"""
from __future__ import annotations

import itertools
import json
import random
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

import xxhash

from imprint_core import novelty as nv
from imprint_core.novelty import (NoveltyConfig, NoveltyTracker, SHINGLE_WORDS, WINDOW_WORDS, normalize, segment,
                                  shingles)
from imprint_core.novelty import _fast_masks as fm, fingerprints as fp, normalization as nz
from imprint_core.novelty.store import BoundedHashSet, FingerprintStore

# ------------------------------------------------------------ reference ---

_h64 = xxhash.xxh3_64_intdigest


def ref_normalize(text: str, variant: str) -> str:
    if variant == "none":
        return text
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    text = text.casefold()
    if variant != "basic":
        for mask in nz.masks_of(variant):
            text = mask.pattern.sub(mask.repl, text)
    return " ".join(text.split())


def ref_shingles(words):
    if not words:
        return set()
    hashes = [_h64(w.encode()) for w in words]
    if len(hashes) < SHINGLE_WORDS:
        return {hash(tuple(hashes))}
    return {hash(t) for t in zip(*(hashes[i:] for i in range(SHINGLE_WORDS)))}


class RefTracker:
    """The novelty rule written plainly."""

    def __init__(self, cfg: NoveltyConfig):
        self.cfg = cfg
        self.sh = BoundedHashSet(cfg.shingle_capacity)
        self.par = BoundedHashSet(cfg.paragraph_capacity)

    def judge(self, status, text, segments=None):
        if status == "error":
            return (0, 0, 0), set(), set()
        units = list(segments) if segments is not None else segment(text)
        if status != "ok" or not any(u.strip() for u in units):
            return (0, 0, 0), set(), set()
        n = new = 0
        all_sh, paras = set(), set()
        for unit in units:
            words = ref_normalize(unit, self.cfg.normalization).split()
            for s in range(0, len(words), WINDOW_WORDS):
                window = words[s:s + WINDOW_WORDS]
                n += 1
                ph = _h64(" ".join(window).encode())
                paras.add(ph)
                if ph in self.par:
                    continue
                sh = ref_shingles(window)
                if self.sh.count_known(sh) < self.cfg.containment_threshold * len(sh):
                    new += 1
                all_sh |= sh
        return (n, new, len(all_sh) - self.sh.count_known(all_sh)), all_sh, paras

    def observe_round(self, results):
        judged = [self.judge(st_, t, segs) for st_, t, segs in results]
        round_sh = set().union(*(j[1] for j in judged)) if judged else set()
        new_sh = len(round_sh) - self.sh.count_known(round_sh)
        new_par = sum(j[0][1] for j in judged)
        self.sh.add_all(round_sh)
        self.par.add_all(set().union(*(j[2] for j in judged)) if judged else set())
        progress = new_par > 0 and new_sh >= self.cfg.min_new_shingles
        return [j[0] for j in judged], (progress, new_par, new_sh)


def fast_round(tracker: NoveltyTracker, results, one_by_one: bool = False):
    if one_by_one:  # as the loop does it: judge each result as it comes, then commit the round
        rn = tracker.commit_round([tracker.judge(s, t, g) for s, t, g in results])
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
    # the masks added for issue 12, item 3 and issue 13
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
    [["5", "an", "a", "a few", "one", "several", "a couple of", "12 ", "x", ""], [" ", "", "  "],
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


@hsettings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(0, 2**32 - 1), st.sampled_from(nv.NORMALIZATIONS), st.sampled_from([0.5, 0.8, 1.0]),
       st.sampled_from([(262_144, 65_536), (60, 8), (8, 2)]))
def test_tracker_verdicts_equal_reference(seed, variant, threshold, caps):
    """Random rounds with repeats, reorders, volatile changes, long paragraphs,
    JSON hits, empty reads; small capacities make the store rotate."""
    rng = random.Random(seed)
    cfg = NoveltyConfig(normalization=variant, containment_threshold=threshold, min_new_shingles=rng.choice([1, 3]),
                        shingle_capacity=caps[0], paragraph_capacity=caps[1])
    fast, single, ref = NoveltyTracker(cfg), NoveltyTracker(cfg), RefTracker(cfg)
    seen: list[str] = []
    for _ in range(rng.randint(1, 12)):
        results = []
        for _ in range(rng.randint(1, 4)):
            x = rng.random()
            if seen and x < 0.35:
                text = rng.choice(seen)
                if rng.random() < 0.5:  # reordered / re-timestamped
                    parts = text.split("\n\n")
                    rng.shuffle(parts)
                    text = "\n\n".join(parts).replace("2024", str(rng.randint(1990, 2030)))
            elif x < 0.55:
                hits = [{"title": para(rng, rng.randint(1, 8)), "score": round(rng.random(), 3),
                         "url": f"https://h{rng.randrange(5)}.com/p?q={rng.randrange(99)}"} for _ in range(rng.randint(1, 5))]
                text = json.dumps(hits)
            elif x < 0.62:
                text = rng.choice(["", "   ", "\n\n"])
            else:
                text = "\n\n".join(para(rng, rng.choice([1, 3, 4, 5, 6, 30, 199, 200, 201, 450]))
                                   for _ in range(rng.randint(1, 4)))
            seen.append(text)
            segs = None
            if rng.random() < 0.15:
                segs = text.split("\n\n") + [""]
            results.append(("ok", text, segs))
        if rng.random() < 0.1:
            results.append(("error", f"HTTP 503 at {rng.randint(0, 23)}:00", None))
        expected = ref.observe_round(results)
        assert fast_round(fast, results) == expected
        assert fast_round(single, results, one_by_one=True) == expected


@hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(text_st, min_size=1, max_size=3), min_size=1, max_size=5), st.sampled_from(nv.NORMALIZATIONS))
def test_tracker_verdicts_equal_reference_on_odd_text(rounds, variant):
    cfg = NoveltyConfig(normalization=variant, shingle_capacity=40, paragraph_capacity=6)
    fast, single, ref = NoveltyTracker(cfg), NoveltyTracker(cfg), RefTracker(cfg)
    for texts in rounds:
        results = [("ok", t, None) for t in texts]
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
        assert mask.finder is fm.PLAIN_SUB or mask.finder.__module__ == fm.__name__, mask.pattern.pattern
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
    masks[-1] = nz.Mask(re.compile(r"(?m)^[ \t]*\d+[ \t]*[:|]"), "", fm.PLAIN_SUB)  # an edited pattern, no finder yet
    fast = fm.FastMasks(masks)
    assert not fast.vetted  # nor are the units masked joined
    text = "  12: alpha\n13 | beta"
    assert fast.apply(text) == fast.plain(text) == " alpha\n beta"


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms_st | text_st, st.integers(0, len(nz.MASKS) - 1))
def test_fast_and_reference_agree_with_one_mask_declared_slow_path(text, which):
    """Any mask may fall back to the plain sub without changing the text."""
    masks = list(nz.MASKS)
    masks[which] = nz.Mask(masks[which].pattern, masks[which].repl, fm.PLAIN_SUB, category=masks[which].category)
    fast = fm.FastMasks(masks)
    t = text.casefold()
    assert fast.apply(t) == fast.plain(t) == nz.apply_masks_plain(t, "all")


@hsettings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=" \t\n\r\x0b\x1fab\u00a0\u2003\u3000\u00e9", max_size=12), max_size=6))
def test_canonical_units_equal_split_and_join(units):
    got = fp.canonical(units)
    canon = [" ".join(u.split()) for u in units]
    if not any(canon):
        assert got is None
    else:
        data, index = got
        assert data == "\n".join(c for c in canon if c).encode()
        assert index.tolist() == [i for i, c in enumerate(canon) if c]


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
