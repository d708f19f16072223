"""Traces and round logs read back (`frames.load_frames`, the one loader)
for the report, the tuner and the release gate, in rooms layered top to
bottom (pyproject.toml's import-linter contract): `report/`, `gate/`,
`decision.py`, `tune/` beside `compare.py`, `sweep/`, `frames/`, `stats.py`."""
