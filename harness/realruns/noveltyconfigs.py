"""NoveltyConfig's fields by name: parse values, build configs, key them.

These helpers belong with NoveltyConfig and live in
`imprint_core/novelty/config.py`; this module keeps the harness's old
import path for them.
"""
from __future__ import annotations

from imprint_core.novelty.config import (  # noqa: F401  (re-exported)
    DEFAULT_VALUES, GRID_METADATA_KEYS, NOT_SWEPT_BY_DEFAULT, SHIPPED, as_dict, changed, config_key, default_grid,
    describe, expand, fields, make_config, parse_assignment, parse_value)
