"""Traces, round logs and raw trajectories read into pandas DataFrames:
`load.py` (the one loader, `load_frames`), with `traces.py` (a trace's rows),
`roundlogs.py` (a round log's rows, replayed through the stop rule) and
`columns.py` (the four tables' columns)."""
from .columns import NUMERIC_COLUMNS, REQUEST_COLUMNS, ROUND_COLUMNS, RUN_COLUMNS, TOOL_COLUMNS
from .load import Frames, load_frames, replay_frames

__all__ = ["Frames", "load_frames", "replay_frames",
           "NUMERIC_COLUMNS", "REQUEST_COLUMNS", "ROUND_COLUMNS", "RUN_COLUMNS", "TOOL_COLUMNS"]
