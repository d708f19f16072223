"""Novelty's speed-ups, quarantined below the definitions they serve.

Each module here gives the answer of a plain definition in the package above
(normalization.py's masks, rule.py's counting, fingerprints.py's windows) and
imports none of them, so that opening `novelty/` shows the definitions first
and a change of a definition cannot silently route through a speed-up:
masks.py over mask_finders.py, tally.py, memo.py, compiled.pyx (optional,
built by `pip install`) and accel.py, which chooses the compiled or the pure
path. pyproject.toml's import-linter contract holds the direction.
"""
