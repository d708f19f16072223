"""Evidence novelty: whether a read round brought new evidence (ADR 0102;
research-loop.md, "Progress"), and the patience rule that stops research
after rounds without it.

Where things live (start with config.py, then rule.py):
- config.py: NoveltyConfig (every parameter, with its default and bounds,
  checked in one place) and the helpers that parse, build, key and grid
  configs by field name.
- rule.py: the rule. EvidenceVerdict, RoundNovelty, NoveltyTracker,
  PatienceRule.
- normalization.py: the normalization variants, the mask profiles and the
  masks of volatile tokens (the reference regexes, each with its category).
- echo.py: a call's own arguments echoed in its result; empty JSON reads.
- segmentation.py: a tool result into evidence units (JSON hits, paragraphs).
- fingerprints.py: lines, shingles, content-defined windows and their
  64-bit fingerprints.
- neardup.py: sketches of whole results, for near-duplicate matching.
- store.py: the bounded two-generation stores the tracker remembers with.
- _fast_masks.py (over _mask_finders.py, where each mask could match),
  _bulk_shingle_counts.py: speed-ups, quarantined; each gives the answer of a plain
  definition elsewhere (tests/core/novelty/test_novelty_speed_invariants.py).
- _compiled.pyx (Cython, built by `pip install`, optional): the lines,
  shingles, hashes and window cuts in one C pass, and C twins of the
  `default` profile's mask finders; accel.py chooses it or the pure path
  (IMPRINT_NOVELTY_PURE=1; tests/core/novelty/test_novelty_compiled.py).
- _memo.py: `shared_work()`, the pure steps (normalize, segment, shingle)
  remembered per thread, so that a sweep's configs share them.

Speed is measured by benchmarks/bench_novelty.py. Hot numpy code calls array
methods (a.argsort(), a.repeat(n)) rather than np.argsort(a): each of those
functions adds a Python call, and there are dozens per round.
"""
from ._memo import shared_work
from .fingerprints import SHINGLE_WORDS, WINDOW_WORDS, shingles
from .normalization import NORMALIZATIONS, PROFILES, normalize
from .config import NoveltyConfig
from .rule import NoveltyTracker, PatienceRule
from .segmentation import segment

# What code outside the package imports; the rest is reached by its module.
__all__ = ["NORMALIZATIONS", "PROFILES", "NoveltyConfig", "NoveltyTracker", "PatienceRule", "SHINGLE_WORDS", "WINDOW_WORDS",
           "normalize", "segment", "shared_work", "shingles"]
