"""The compiled novelty path (imprint_core/novelty/_fast/compiled.pyx) gives what
the pure-Python path gives: the same canonical lines, shingles, span hashes
and windows, the same masked text, the same verdicts, on arbitrary text
(NUL, U+2028, combining marks, digits of other scripts, long words) and on
the shapes that hit every mask. Its finders find at least every position
where their mask's pattern matches. test_novelty_equivalence.py holds both
paths to the reference tracker on the benchmark corpus and the labelled
corpora.

The compiled half of each test skips, saying why, where the extension is
not built; IMPRINT_NOVELTY_PURE=1 and a missing extension are checked in a
child process.
"""
from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from imprint_core.novelty import NoveltyConfig, NoveltyTracker
from imprint_core.novelty import fingerprints as fp, normalization as nz
from imprint_core.novelty._fast import accel, mask_finders as finders

from test_novelty_speed_invariants import SHAPES, atoms_st, fast_round, near_misses, text_st

ROOT = Path(__file__).resolve().parents[3]
PATHS = ("pure", "compiled")
NOT_BUILT = "the compiled novelty path is not built here (`pip install -e .` builds it with a C compiler)"
needs_compiled = pytest.mark.skipif(not accel.AVAILABLE, reason=NOT_BUILT)


@contextmanager
def on_path(path: str):
    """Run the block on the named path; the compiled one skips the test where it is not built."""
    if path == "compiled" and not accel.AVAILABLE:
        pytest.skip(NOT_BUILT)
    with accel.compiled(path == "compiled"):
        yield


# Beyond ASCII: what str.split(), NFKC, casefold and the masks each treat in their own way.
ODD = ["\x00", "\u2028", "\u2029", "\x85", "\xa0", "\u3000", "\u1680", "\u200b", "\x1c", "\x1f", "\r", "\x0b", "\t",
       "\n", " ", "\u0301", "e\u0301", "\u0663", "\u0967\u0968", "\uff11\uff12", "\U0001d7d9", "\ufb01", "\u0130",
       "\u00df", "\U0001f600", "<date>", "\n\x00\n"]
word_st = st.sampled_from(ODD) | st.text(alphabet="ab0:-/.", min_size=1, max_size=6) \
    | st.text(alphabet="xyz", min_size=40, max_size=400) \
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
odd_text_st = st.lists(word_st, max_size=40).map("".join) | st.lists(word_st, max_size=30).map(" ".join)
any_text_st = odd_text_st | atoms_st | text_st


def _windows(units, width, per_line, seed):
    """windows_of the units with some words excluded (seeded), and the Lines it was given."""
    seen = []

    def exclude(lines):
        seen.append(lines)
        rng = np.random.default_rng(seed)
        return rng.random(lines.bounds.size - 1) < 0.1 if seed % 3 else None
    return fp.windows_of(units, width, per_line, exclude), seen


def _same_arrays(a, b):
    assert a.dtype == b.dtype and a.tolist() == b.tolist()


@needs_compiled
@hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(odd_text_st | text_st, max_size=6), st.integers(1, 8), st.booleans(), st.integers(0, 2**16))
def test_the_compiled_lines_shingles_and_windows_are_the_pure_ones(units, width, per_line, seed):
    got = {}
    for path in PATHS:
        with on_path(path):
            got[path] = _windows(units, width, per_line, seed)
    (wc, lc), (wp, lp) = got["compiled"], got["pure"]
    assert (wc is None) == (wp is None)
    if wp is None:
        return
    for field in ("hashes", "unit", "shingles", "counts", "extra", "line"):
        _same_arrays(getattr(wc, field), getattr(wp, field))
    for a, b in zip(lc, lp):
        assert a.data == b.data and list(a.units_kept) == list(b.units_kept)
        for field in ("bounds", "first", "size", "unit"):
            _same_arrays(getattr(a, field), getattr(b, field))


@needs_compiled
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(0, 400).map("w{}".format), min_size=150,
                         max_size=1_600).map(" ".join), min_size=1, max_size=3),
       st.lists(st.integers(0, 1_500), max_size=8), st.integers(1, 6))
def test_long_spans_are_cut_into_the_same_windows(paragraphs, breaks, width):
    """Spans past 2 * WINDOW_MIN words, cut at their anchors (and every WINDOW_MAX words without one)."""
    units = []
    for p in paragraphs:
        words = p.split()
        for b in sorted(breaks, reverse=True):
            if b < len(words):
                words.insert(b, "\n")
        units.append(" ".join(words))
    got = {}
    for path in PATHS:
        with on_path(path):
            got[path] = fp.windows_of(units, width)
    for field in ("hashes", "unit", "shingles", "counts", "line"):
        _same_arrays(getattr(got["compiled"], field), getattr(got["pure"], field))


@needs_compiled
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_the_compiled_masks_equal_the_plain_masks_on_every_near_miss(shape):
    with on_path("compiled"):
        for core in near_misses(SHAPES[shape]):
            for text in (core, f"x {core} y", f"{core}\n{core}", f"({core})"):
                t = text.casefold()
                assert nz.apply_masks(t, "default") == nz.apply_masks_plain(t, "default"), repr(t)


@needs_compiled
@hsettings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text_st)
def test_the_compiled_masks_equal_the_plain_masks(text):
    t = text.casefold()
    with on_path("compiled"):
        assert nz.apply_masks(t, "default") == nz.apply_masks_plain(t, "default")


# What one mask replaces, and the listed words (months, weekdays, scores, relative days) a later mask's
# finder looks for: apply_table finds the word starts once and carries them across each edit (_reopen).
EDITED = ["https://a.io/x?q=1", "2026-10-28", "0123456789abcdef0123", "12:30", "3 days ago", "score: 0.5",
          "\n12: ", "1712345678"]
LISTED = ["oct", "october", "wed", "today", "score", "rank", "just now", "may", "sept", "yesterday", "similarity",
          "confidence", "tomorrow", "thursday", "ranking"]


@needs_compiled
@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(EDITED + LISTED + [" ", ", ", "\n", "x", "\xe9", "\u0663", "1", "28", "2026"]),
                max_size=40).map("".join))
def test_a_word_next_to_an_earlier_masks_edit_is_found_as_in_a_fresh_text(text):
    with on_path("compiled"):
        assert nz.apply_masks(text, "default") == nz.apply_masks_plain(text, "default")


@needs_compiled
@pytest.mark.parametrize("text", ["see https://a.io/x?q=caf\xe9 now", "https://a.io/?\xe9\nscore: 0.5 \xe9",
                                  "https://a.io/?\u0100 12:30"])
def test_a_text_whose_edits_take_its_last_wide_character_is_as_narrow_as_the_plain_one(text):
    """apply_table writes an edited text of one byte a character itself: the str it makes is the one
    `re` makes, down to its kind (str.isascii() reads it, and normalize_units asks)."""
    with on_path("compiled"):
        got = nz.apply_masks(text, "default")
    want = nz.apply_masks_plain(text, "default")
    assert got == want
    assert (got.isascii(), max(map(ord, got))) == (want.isascii(), max(map(ord, want)))


@needs_compiled
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text_st)
def test_every_compiled_finder_finds_every_match_of_its_pattern(text):
    """Where a mask's pattern matches (on a text without non-ASCII digits, which
    takes the plain sub), its compiled finder gives that position."""
    t = text.casefold()
    if any(c.isdecimal() and not c.isascii() for c in t):
        return
    for mask in nz.masks_of("default"):
        found = set(accel.built.find(mask.finder.__name__, t))
        starts = [p for p in range(len(t) + 1) if mask.pattern.match(t, p)]
        assert set(starts) <= found, (mask.pattern.pattern, t, sorted(set(starts) - found))


def _exact_masks():
    """The default profile's masks that the extension decides in C (its EXACT matchers), by finder name."""
    return {m.finder.__name__: m for m in nz.masks_of("default") if m.finder.__name__ in accel.built.EXACT}


def _same_match_everywhere(t: str, exact: dict) -> None:
    for name, mask in exact.items():
        for p in range(len(t) + 1):
            m = mask.pattern.match(t, p)
            want = None if m is None else (m.end(), m.end(mask.kept_groups) if mask.kept_groups else -1)
            assert accel.built.match_at(name, t, p) == want, (mask.pattern.pattern, t, p)


@needs_compiled
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_every_c_matcher_ends_where_re_does_on_every_near_miss(shape):
    """A mask decided in C (_fast/compiled.apply_table) matches where `re` does, at
    every position, with the same end and kept groups: on every near miss."""
    exact = _exact_masks()
    for core in near_misses(SHAPES[shape]):
        for text in (core, f"x {core} y", f"{core}\n{core}", f"é{core}_"):
            _same_match_everywhere(text.casefold(), exact)


@needs_compiled
@hsettings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text_st)
def test_every_c_matcher_ends_where_re_does(text):
    """... and on drawn text (non-ASCII digits included: the matchers read
    digits, word characters and spaces as `re` does)."""
    _same_match_everywhere(text.casefold(), _exact_masks())


def _store_pair(rng, universe, capacity):
    """Two stores fed the same batches, one on each path (their buckets, overflow and generations)."""
    from imprint_core.novelty.store import FingerprintStore
    stores = {}
    batches = [np.unique(rng.choice(universe, size=rng.integers(0, universe.size + 1)))
               for _ in range(rng.integers(0, 4))]
    for path in PATHS:
        with on_path(path):
            store = FingerprintStore(capacity)
            for b in batches:
                store.add_all(b)
            stores[path] = store
    return stores


@needs_compiled
@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 80), capacity=st.sampled_from([4, 16, 64, 4096]),
       threshold=st.sampled_from([0.5, 0.8, 1.0]), width=st.integers(1, 5), with_lines=st.booleans())
def test_a_round_tallied_in_one_call_is_tallied_as_by_numpy(seed, size, capacity, threshold, width, with_lines):
    """_fast/compiled.tally (the round's counts, the store looked up in C) gives
    tally_round's Tally, and the extension's store insert and lookup hold the
    same keys as numpy's: on stores small enough that buckets fill and
    generations turn over, with repeated shingles within and across windows."""
    from imprint_core.novelty._fast.tally import tally_round
    rng = np.random.default_rng(seed)
    universe = np.unique(rng.integers(1, 2**64 - 1, size=size, dtype=np.uint64))
    stores = _store_pair(rng, universe, capacity)
    probe = np.concatenate((universe, rng.integers(1, 2**64 - 1, size=8, dtype=np.uint64)))
    for path in PATHS:
        with on_path(path):
            for other in PATHS:
                _same_arrays(stores[path].lookup(probe)[1], stores[other]._young.contains(probe)
                             | (stores[other]._old.contains(probe) if stores[other]._old.count else False))
    store = stores["pure"]
    n = int(rng.integers(1, 12))
    counts = rng.integers(0, 9, size=n)
    seen = rng.random(n) < 0.2
    owner = np.sort(rng.integers(0, 3, size=n))
    shingles = rng.choice(universe, size=int(counts.sum()))
    lines = np.cumsum(rng.random(shingles.size) < 0.3).astype(np.intp) if with_lines else None
    with on_path("pure"):
        want = tally_round(shingles, counts, seen, owner, 3, store.lookup, threshold, lines, width)
    got = accel.built.tally(shingles, counts, seen, owner, 3, store.tables(), threshold, lines, width)
    for field, a, b in zip(want._fields, got, want):
        if isinstance(b, list):
            assert a == b, field
        else:
            _same_arrays(np.asarray(a), np.asarray(b))


@needs_compiled
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), small=st.integers(0, 600), top=st.integers(1, 63), large=st.integers(0, 600))
def test_a_large_round_of_small_hashes_is_tallied_as_by_numpy(seed, small, top, large):
    """compiled.tally sorts a round by spreading it into buckets by the hashes' top bits: a round whose
    hashes share their top bits (short shingles' hashes are small numbers), so that one bucket holds
    many, is tallied as tally_round tallies it, repeats and all."""
    from imprint_core.novelty._fast.tally import tally_round
    from imprint_core.novelty.store import FingerprintStore
    rng = np.random.default_rng(seed)
    universe = np.unique(np.concatenate((rng.integers(1, 2**top, size=small, dtype=np.uint64, endpoint=True),
                                         rng.integers(1, 2**64 - 1, size=large, dtype=np.uint64), np.ones(1, np.uint64))))
    store = FingerprintStore(1 << 12)
    store.add_all(rng.choice(universe, size=universe.size // 2))
    shingles = rng.choice(universe, size=small + large + 1)
    cuts = np.sort(rng.integers(0, shingles.size + 1, size=int(rng.integers(0, 20))))
    counts = np.diff(np.concatenate(([0], cuts, [shingles.size])))
    seen = rng.random(counts.size) < 0.1
    owner = np.sort(rng.integers(0, 3, size=counts.size))
    with on_path("pure"):
        want = tally_round(shingles, counts, seen, owner, 3, store.lookup, 0.8)
    got = accel.built.tally(shingles, counts, seen, owner, 3, store.tables(), 0.8, None, 5)
    assert got[-1] == want.results
    for a, b in zip(got[:-1], want[:-1]):
        _same_arrays(np.asarray(a), np.asarray(b))


OCR_ODD = ["a", "i", "b", "_", "<", ">", "<id>", "|", "~", "--", "\u2022", "\u00b2", "\u0663", "\u00e9", "x1", "1",
           "\x00", " ", "\n", "\t", "\u2028", "\x1c", "\xa0", "\u3000", "..", "a.", "\u0301"]


@needs_compiled
@hsettings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text_st | st.lists(st.sampled_from(OCR_ODD), max_size=30).map("".join))
def test_the_ocr_noise_mask_in_one_pass_is_the_regex(text):
    """_fast/compiled.ocr_noise (the `ocr` profile's last mask, which has no
    finder) gives the pattern's sub on drawn text, and the `ocr` profile
    (the default's masks on the compiled path, then ocr_noise) the plain masks."""
    mask = next(m for m in nz.MASKS if m.category == "ocr_noise")
    assert accel.built.ocr_noise(text) == mask.pattern.sub(mask.repl, text)
    t = text.casefold()
    with on_path("compiled"):
        assert nz.apply_masks(t, "ocr") == nz.apply_masks_plain(t, "ocr")


@needs_compiled
@hsettings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_text_st | st.lists(st.sampled_from(ODD + ["\n", " \n ", "a\ud800b"]), max_size=30).map("".join))
def test_a_units_canonical_lines_in_one_pass_are_split_and_join(text):
    """_fast/compiled.canonical_unit (echo.template_lines reads every unit's) is
    fingerprints._canonical_unit_plain, a lone surrogate included (the plain one then)."""
    with on_path("compiled"):
        assert fp._canonical_unit(text) == fp._canonical_unit_plain(text)


def test_a_long_paragraph_is_cut_alike():
    units = [" ".join(f"w{i}" for i in range(1_000)), "\n".join(" ".join(f"v{i}" for i in range(j, j + 150))
                                                                for j in range(0, 600, 150))]
    got = {}
    for path in PATHS:
        with on_path(path):
            got[path] = fp.windows_of(units, 5)
    assert got["pure"].counts.size >= 5               # cut: 1,000 words and 600 words in four lines
    for field in ("hashes", "unit", "shingles", "counts", "line"):
        _same_arrays(getattr(got["compiled"], field), getattr(got["pure"], field))


def test_the_compiled_finders_are_the_default_profiles():
    """Every mask of the shipped profile has a compiled finder (else its whole profile takes the Python finders)."""
    if not accel.AVAILABLE:
        pytest.skip(NOT_BUILT)
    assert {m.finder.__name__ for m in nz.masks_of("default")} <= set(accel.built.FINDERS)
    assert all(callable(vars(finders)[name]) for name in accel.built.FINDERS)


CONFIGS = [NoveltyConfig(), NoveltyConfig(normalization="logs", shingle_words=3),
           NoveltyConfig(normalization="basic", fingerprint_unit="line", shingle_words=1),
           NoveltyConfig(normalization="none", shingle_words=8, containment_threshold=0.5)]


@needs_compiled
@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(any_text_st, min_size=1, max_size=3), min_size=1, max_size=6), st.sampled_from(CONFIGS),
       st.booleans())
def test_the_tracker_gives_the_same_verdicts_on_both_paths(rounds, cfg, with_query):
    results = [[("ok", t, None, {"q": t[:12]} if with_query else None) for t in rnd] for rnd in rounds]
    verdicts = {}
    for path in PATHS:
        with on_path(path):
            tracker = NoveltyTracker(cfg)
            verdicts[path] = [fast_round(tracker, rnd) for rnd in results]
    assert verdicts["compiled"] == verdicts["pure"]


def _child(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != accel.PURE_ENV} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=full,
                          timeout=120)


_VERDICT = ("from imprint_core.novelty import NoveltyTracker; from imprint_core.novelty._fast import accel; "
            "r = NoveltyTracker().observe_round([('ok', 'one two three four five six seven', None)]); "
            "print(accel.active(), r.progress, r.new_shingles)")


def test_the_environment_variable_chooses_the_pure_path_without_a_notice():
    got = _child(_VERDICT, **{accel.PURE_ENV: "1"})
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["False", "True", "3"] and got.stderr == ""


def test_without_the_extension_the_pure_path_runs_after_one_notice():
    hide = ("import sys\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'imprint_core.novelty._fast.compiled':\n"
            "            raise ImportError('hidden')\n"
            "sys.meta_path.insert(0, Hide())\n")
    got = _child(hide + _VERDICT + "\nimport imprint_core.novelty.normalization\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["False", "True", "3"]
    lines = got.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: the compiled novelty path is not built")


@needs_compiled
def test_where_built_the_compiled_path_is_the_default():
    got = _child(_VERDICT)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True", "True", "3"] and got.stderr == ""
