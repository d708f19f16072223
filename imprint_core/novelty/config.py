"""NoveltyConfig: the novelty rule's parameters, each with its default and
its bounds, checked in one place; and the config helpers every road uses.

Every dataclass field is a knob named as the field is. Its bounds are data
(`check` in the field's metadata: a choice, an integer range or a share),
read by the one validator (`NoveltyConfig.__post_init__`) and by whoever
describes the field elsewhere (a scenario's `loop:` keys and their JSON
schema, `harness/scenarios/model.py`). A config is built with
`dataclasses.replace` from the shipped defaults (`make_config`), so a field
added here is a knob of the tuner, `imprint replay --param`, the gate and
scenario files without any other change.

Values given as text are read by the one converter of parameter values
(`imprint_core.params`): `true`/`false` for a bool, numbers, text, `none`
for an optional field, a list as `[a,b]` (items separated by
`params.LIST_SEPARATOR`).
"""
from __future__ import annotations

import dataclasses
import enum
import json
import typing
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Sequence

from .. import params as typed
from ..errors import UserInputError
from .fingerprints import SHINGLE_WORDS
from .normalization import NORMALIZATIONS

FINGERPRINT_UNITS = ("paragraph", "line")
NEAR_DUPLICATE = ("off", "jaccard", "containment")
MAX_SHINGLE_WORDS = 32


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _integer(name: str, value: Any, lo: int, hi: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {f'from {lo} to {hi}' if hi is not None else f'at least {lo}'}; "
                         f"got {value}")


def _share(name: str, value: Any, *, zero: bool) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        raise ValueError(f"{name} must be a number; got {value!r}")
    if not (0 <= value <= 1 if zero else 0 < value <= 1):
        raise ValueError(f"{name} must be in {'[0, 1]' if zero else '(0, 1]'}; got {value}")


def _knob(default: Any, help: str, *, allowed: Sequence[str] | None = None, lo: int | None = None,
          hi: int | None = None, share: str | None = None) -> Any:
    """A field with its bounds as data: `allowed` choices, an integer from `lo`
    (to `hi`), or a `share` in "[0, 1]" or "(0, 1]"."""
    check: tuple = (("choice", tuple(allowed)) if allowed is not None else
                    ("share", share == "[0, 1]") if share is not None else ("integer", lo, hi))
    return field(default=default, metadata={"check": check, "help": help})


def check_field(name: str, value: Any, check: tuple | None) -> None:
    """ValueError naming `name` when `value` breaks the field's bounds (None: it has none)."""
    if check is None:
        return
    kind, *bounds = check
    if kind == "choice":
        _choice(name, value, bounds[0])
    elif kind == "integer":
        _integer(name, value, *bounds)
    else:
        _share(name, value, zero=bounds[0])


def json_bounds(check: tuple | None) -> dict[str, Any]:
    """A field's bounds as JSON schema keywords (for editors)."""
    if check is None:
        return {}
    kind, *bounds = check
    if kind == "choice":
        return {"enum": list(bounds[0])}
    if kind == "integer":
        lo, hi = bounds
        return {"minimum": lo, **({"maximum": hi} if hi is not None else {})}
    return {"minimum" if bounds[0] else "exclusiveMinimum": 0, "maximum": 1}


@dataclass(frozen=True)
class NoveltyConfig:
    """The novelty rule's parameters: plain values, so that a sweep can set
    any of them by name (dataclasses.replace). The defaults are the shipped rule."""
    normalization: str = _knob("default", "none, basic, or a profile of volatile-token masks "
                               "(normalization.PROFILES: default, logs, ocr, all)", allowed=NORMALIZATIONS)
    shingle_words: int = _knob(SHINGLE_WORDS, "Words per shingle of the novelty fingerprints; shorter lines are "
                               "one shingle", lo=1, hi=MAX_SHINGLE_WORDS)
    containment_threshold: float = _knob(0.8, "A window is new below this share of its shingles already seen",
                                         share="(0, 1]")
    min_new_shingles: int = _knob(3, "New shingles a round needs (or all of its largest new window)", lo=1)
    min_new_share: float = _knob(0.0, "The share of its windows' shingles a round must add as well",
                                 share="[0, 1]")
    fingerprint_unit: str = _knob("paragraph", "paragraph: a unit's lines are judged together; line: one by one",
                                  allowed=FINGERPRINT_UNITS)
    near_duplicate: str = _knob("off", "Near-duplicate matching of whole results: off, jaccard or containment",
                                allowed=NEAR_DUPLICATE)
    near_duplicate_threshold: float = _knob(0.9, "Similarity above which a whole result is a near duplicate",
                                            share="(0, 1]")
    shingle_capacity: int = _knob(262_144, "Shingles remembered (two generations)", lo=2)
    paragraph_capacity: int = _knob(65_536, "Window fingerprints remembered (two generations)", lo=2)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            check_field(f.name, getattr(self, f.name), f.metadata.get("check"))


SHIPPED = NoveltyConfig()
"""The shipped novelty config: the tuner's ties lean to it."""

DEFAULT_VALUES: dict[str, tuple[Any, ...]] = {
    "min_new_shingles": (1, 3),
    "fingerprint_unit": ("paragraph", "line"),
}
"""The default grid's values: the axes that change what a round is and cost
no throughput. The whole space (every profile, shingle width, threshold,
share and near-duplicate matching) is thousands of configs, hours on two
cores, and `--grid` names any of it. Two axes are left out of the default on
measurement, not on what they score: the `all` profile halves the tracker's
throughput and near-duplicate matching cuts it to a third (every result's
sketch against every remembered one), both far under the 13 MB/s the shipped
rule must keep (reports/tune/README.md has the figures). Fields not
in the grid are held at their shipped values until `--grid` names them. A field may
also name its own values in its dataclass metadata (`grid` or `choices`);
any other bool field is swept both ways, and any other field is held at its
default (the report lists it), until `--grid` names values for it."""

GRID_METADATA_KEYS = ("grid", "choices")
NOT_SWEPT_BY_DEFAULT = ("shingle_capacity", "paragraph_capacity")
"""Memory bounds, not judgement: never in the default grid."""


@lru_cache(maxsize=1)
def _fields() -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(NoveltyConfig)
    return tuple((f.name, hints.get(f.name, Any)) for f in dataclasses.fields(NoveltyConfig) if f.init)


def fields() -> dict[str, Any]:
    """Field name -> its resolved type, in declaration order."""
    return dict(_fields())


def _names() -> str:
    return ", ".join(fields())


def parse_value(field: str, text: str, key: str = "--grid") -> Any:
    """One value of a field, parsed by the field's type."""
    known = fields()
    if field not in known:
        raise UserInputError(f"NoveltyConfig has no field {field!r}", key=key, expected=f"one of {_names()}")
    try:
        value = typed.convert(text.strip(), known[field])
    except ValueError as exc:
        raise UserInputError(f"{field}: {exc}", key=key, expected=typed.type_name(known[field])) from None
    make_config({field: value}, key=key)   # NoveltyConfig's own checks (bounds, choices)
    return value


def parse_assignment(text: str, key: str = "--grid") -> tuple[str, list[Any]]:
    """`field=v1,v2,...` -> (field, values), each value checked."""
    if "=" not in text:
        raise UserInputError(f"{text!r} is not FIELD=VALUES", key=key,
                             expected=f"e.g. min_new_shingles=1,3,10; fields: {_names()}")
    name, _, values = text.partition("=")
    name = name.strip()
    try:
        parts = typed.split_top(values)
    except typed.ParamError as exc:
        raise UserInputError(exc.message, key=key, expected=exc.expected) from None
    if not values.strip() or any(not p.strip() and fields().get(name) is not str for p in parts):
        raise UserInputError(f"{text!r} has an empty value", key=key, expected="FIELD=V1,V2,...")
    out: list[Any] = []
    for p in parts:
        v = parse_value(name, p, key)
        if v not in out:
            out.append(v)
    return name, out


def make_config(overrides: dict[str, Any], key: str = "novelty", base: NoveltyConfig | None = None) -> NoveltyConfig:
    """The shipped config (or `base`) with `overrides`; NoveltyConfig's own
    validation errors become UserInputError naming `key`."""
    unknown = [k for k in overrides if k not in fields()]
    if unknown:
        raise UserInputError(f"NoveltyConfig has no field {unknown[0]!r}", key=f"{key}", expected=f"one of {_names()}")
    known = fields()
    typed_overrides = {}
    for k, v in overrides.items():   # the one converter's type checks: no 2.5 or NaN for an integer field
        try:
            typed_overrides[k] = typed.convert(v, known[k])
        except typed.ParamError as exc:
            raise UserInputError(f"{k}: {exc.message}", key=key, expected=exc.expected) from None
    try:
        return dataclasses.replace(base or NoveltyConfig(), **typed_overrides)
    except (ValueError, TypeError) as exc:
        shown = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
        raise UserInputError(f"{shown}: {exc}", key=key) from None


def _jsonable(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (tuple, list, frozenset, set)):
        items = [_jsonable(x) for x in v]
        return sorted(items, key=repr) if isinstance(v, (set, frozenset)) else items
    return v


def as_dict(cfg: NoveltyConfig) -> dict[str, Any]:
    """Every field's value, JSON-ready, in declaration order."""
    return {name: _jsonable(getattr(cfg, name)) for name, _ in _fields()}


def config_key(cfg: NoveltyConfig) -> str:
    """A canonical text of every field: equal configs, equal keys."""
    return json.dumps(as_dict(cfg), sort_keys=True, separators=(",", ":"), default=str)


def changed(cfg: NoveltyConfig, base: NoveltyConfig = SHIPPED) -> dict[str, Any]:
    """The fields where `cfg` differs from `base`."""
    return {k: v for k, v in as_dict(cfg).items() if v != as_dict(base)[k]}


def describe(cfg: NoveltyConfig, names: Sequence[str] | None = None) -> str:
    """`normalization=default, min_new_shingles=3` for `names` (default: the changed fields, or `shipped`)."""
    d = as_dict(cfg)
    shown = list(names) if names is not None else list(changed(cfg))
    if not shown:
        return "shipped novelty config"
    return ", ".join(f"{k}={_show(d[k])}" for k in shown)


def _show(v: Any) -> str:
    return typed.show(v) if isinstance(v, list) else str(v)


def default_grid() -> tuple[dict[str, list[Any]], list[str]]:
    """(field -> values to sweep, fields held at their default). Values come
    from `DEFAULT_VALUES`, else the field's `grid`/`choices` metadata, else
    both ways for a bool; the shipped value is always among them."""
    grid: dict[str, list[Any]] = {}
    held: list[str] = []
    meta = {f.name: f.metadata for f in dataclasses.fields(NoveltyConfig)}
    for name, typ in fields().items():
        default = getattr(SHIPPED, name)
        values: Iterable[Any] | None = DEFAULT_VALUES.get(name)
        if values is None:
            values = next((meta[name][k] for k in GRID_METADATA_KEYS if k in meta.get(name, {})), None)
        if values is None and typ is bool and name not in NOT_SWEPT_BY_DEFAULT:
            values = (default, not default)
        if values is None or name in NOT_SWEPT_BY_DEFAULT:
            held.append(name)
            continue
        vals = list(dict.fromkeys(values))
        if default not in vals:
            vals.insert(0, default)
        vals = [v for v in vals if _valid(name, v)]
        if len(vals) > 1:
            grid[name] = vals
        else:
            held.append(name)
    return grid, held


def _valid(name: str, value: Any) -> bool:
    try:
        make_config({name: value})
        return True
    except UserInputError:
        return False


def expand(grid: dict[str, list[Any]]) -> list[NoveltyConfig]:
    """Every combination of the grid's values (the first field varies slowest),
    the other fields at their shipped values; duplicates dropped."""
    configs: list[NoveltyConfig] = [NoveltyConfig()]
    for name, values in grid.items():
        configs = [make_config({name: v}, key=f"--grid {name}", base=c) for c in configs for v in values]
    out: dict[str, NoveltyConfig] = {}
    for c in configs:
        out.setdefault(config_key(c), c)
    return list(out.values())
