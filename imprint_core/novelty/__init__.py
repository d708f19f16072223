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
- _fast/: the speed-ups, quarantined below the definitions (nothing in
  it imports them): masks.py (the masks tried only where mask_finders.py
  says each could match), tally.py (a round counted in bulk), memo.py
  (`shared_work()`: normalizing, segmenting and shingling remembered per
  thread, so that a sweep's configs share them), compiled.pyx (Cython,
  built by `pip install`, optional: lines, shingles, hashes and window cuts
  in one C pass, C twins of the mask finders, the round's tally) and
  accel.py, which chooses it or the pure path (IMPRINT_NOVELTY_PURE=1).
  Each gives the answer of a plain definition here
  (tests/core/novelty/test_novelty_speed_invariants.py, test_novelty_compiled.py).

Speed is measured by benchmarks/bench_novelty.py. Hot numpy code calls array
methods (a.argsort(), a.repeat(n)) rather than np.argsort(a): each of those
functions adds a Python call, and there are dozens per round.
"""
from ._fast.memo import shared_work
from .fingerprints import SHINGLE_WORDS, WINDOW_WORDS, shingles
from .normalization import NORMALIZATIONS, PROFILES, normalize
from .config import NoveltyConfig
from .rule import NoveltyTracker, PatienceRule
from .segmentation import segment

# What code outside the package imports; the rest is reached by its module.
__all__ = ["NORMALIZATIONS", "PROFILES", "NoveltyConfig", "NoveltyTracker", "PatienceRule", "SHINGLE_WORDS", "WINDOW_WORDS",
           "normalize", "segment", "shared_work", "shingles"]
