"""The gate's config: `reports/gate.toml` (or the file `--config` names)
read, checked against its schema and merged over the defaults.

Every table and key is known: `GateFile` is the schema (pydantic models,
strict: each key's type, bounds, default and what it expects), and a
mistake is a `UserInputError` naming the file, its line (found in the text:
`tomllib` keeps no positions) and the dotted key. `[divergence.providers.PATTERN]` overrides the band of the providers it
matches, `[divergence.exact]` holds exact counting modes, and
`[loop_recall_baseline.CORPUS]` records what the shipped rule caught. A
replay setting that differs from the shipped default is kept, with a
warning: the gate then judges another rule than the one shipped.
"""
from __future__ import annotations

import fnmatch
import re
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Sequence

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from imprint_core.errors import UserInputError, digits_exceeded, long_number_line, too_many_digits
from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig
from imprint_core.settings import SPECS

from ...realruns.labels import LOOP_SLACK, read_user_file
from ...realruns.noveltyconfigs import make_config
from ...realruns.regressionstore import CORPUS as REGRESSIONS
from ...realruns.roundlogs import PATIENCE, USER_TURNS

EXACT_DEFAULTS = {"median_min": 0.98, "median_max": 1.02, "p95_max": 1.02, "max_undercount_share": 0.0}
"""`[divergence.exact]`: what an exact counting mode (a tokenizer) is held to."""


def _field(default: Any, expected: str, **bounds: Any) -> Any:
    """A key's default, bounds and what a mistake is told it expects."""
    return Field(default, description=expected, **bounds)


Share = Annotated[float, Field(ge=0, le=1)]
Positive = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=0)]
_SHARE, _POSITIVE, _COUNT = "a share within 0–1", "a positive number", "an integer of 0 or more"


class _Table(BaseModel):
    """A table of gate.toml: its keys known, each value of its type (no
    true for a number, no 2.5 for an integer), nothing else accepted."""
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class Inputs(_Table):
    traces: list[str] = _field(["traces"], "a list of paths")
    latest_run: bool = _field(True, "true or false")
    runs_dir: str = _field("traces/runs", "a path")
    round_logs: list[str] = _field([], "a list of paths")
    labels: list[str] = _field([], "a list of label files")


class PrematureStops(_Table):
    patience: int = _field(PATIENCE.default, f"an integer within {PATIENCE.min}–{PATIENCE.max}", ge=PATIENCE.min,
                           le=PATIENCE.max)
    normalization: Literal[NORMALIZATIONS] = _field(NoveltyConfig().normalization,
                                                    "one of " + ", ".join(NORMALIZATIONS))
    user_turns: Literal[USER_TURNS] = _field("reset", "one of " + ", ".join(USER_TURNS))
    max_premature: Count = _field(0, _COUNT)
    max_premature_share: Share = _field(0.10, _SHARE)
    strict: list[str] = _field([], "a list of corpus names (labels files without `labels-` and `.yaml`)")
    per_run: list[str] = _field([REGRESSIONS], "a list of corpus names whose every labelled run must hold")
    loop_recall_goal: Share = Field(0.8, description=_SHARE + " (min_loop_recall: its older name)",
                                    validation_alias=AliasChoices("loop_recall_goal", "min_loop_recall"))
    rule: str = _field(SPECS["chat.research_stop_rule"].default, "a stop rule (`imprint rules`)",
                       pattern=r"\S")
    rule_params: dict[str, Any] = _field({}, "a table of the rule's parameters")
    loop_slack: Count = _field(LOOP_SLACK, _COUNT)
    novelty: dict[str, Any] = _field({}, "a table of NoveltyConfig fields")


class Thresholds(_Table):
    """A band of estimate / measured figures; keys left out are not changed."""
    min_requests: int | None = _field(None, "an integer of 1 or more", ge=1)
    median_min: Positive | None = _field(None, _POSITIVE)
    median_max: Positive | None = _field(None, _POSITIVE)
    p95_max: Positive | None = _field(None, _POSITIVE)
    max_undercount_share: Share | None = _field(None, _SHARE)


PROVIDER_KEYS = tuple(Thresholds.model_fields)
"""The keys a provider's band (or the exact band) overrides."""


class Divergence(_Table):
    min_requests: int = _field(5, "an integer of 1 or more", ge=1)
    median_min: Positive = _field(0.9, _POSITIVE)
    median_max: Positive = _field(1.5, _POSITIVE)
    p95_max: Positive = _field(2.0, _POSITIVE)
    max_undercount_share: Share = _field(0.05, _SHARE)
    exclude: list[str] = _field([], "a list of provider names or patterns")
    providers: dict[str, Thresholds] = _field({}, "a table of per-provider thresholds")
    exact: Thresholds = _field(Thresholds(**EXACT_DEFAULTS), "a table of thresholds for exact counting modes")
    max_overruns: Count = _field(0, _COUNT)


class Baseline(_Table):
    """What the shipped rule caught on one corpus (`[loop_recall_baseline.CORPUS]`)."""
    recall: Share = Field(description=_SHARE + ": the share of labelled loops the shipped rule caught")
    caught: Count | None = _field(None, _COUNT)
    loops: Count | None = _field(None, _COUNT)
    commit: str | None = _field(None, "the commit that measured it")
    rule: str | None = _field(None, "the rule it was measured with")


class Overruns(_Table):
    deliberate: list[str] = _field([], "a list of scenario names that overrun on purpose")
    max_count: Count = _field(0, _COUNT)
    max_overrun_sec: Annotated[float, Field(ge=0)] = _field(0.0, "a number of seconds, 0 or more")


class GateFile(_Table):
    """The whole file: every table optional, each at its defaults."""
    inputs: Inputs = Inputs()
    premature_stops: PrematureStops = PrematureStops()
    divergence: Divergence = Divergence()
    loop_recall_baseline: dict[str, Baseline] = {}
    overruns: Overruns = Overruns()


def _split_dotted(header: str) -> tuple[str, ...]:
    """`a."b.c".d` -> ('a', 'b.c', 'd')."""
    parts, cur, quote = [], "", None
    for ch in header:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return tuple(parts)


def _key_at(text: str, line: int | None) -> str | None:
    """`table.key` of the assignment on `line` (None: no key there)."""
    current: tuple[str, ...] = ()
    for no, raw in enumerate(text.splitlines()[:line or 0], start=1):
        m = re.match(r"^\[\s*([^\[\]]+?)\s*\]", raw.strip())
        if m:
            current = _split_dotted(m.group(1))
        elif no == line:
            m = re.match(r"^(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=", raw.strip())
            return ".".join(current + (m.group(1).strip("\"'"),)) if m else None
    return None


def _line_of(text: str, table: Sequence[str], key: str | None) -> int | None:
    """The line of `key` in `[table]` (or of the table header itself)."""
    current: tuple[str, ...] = ()
    header_line = None
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        m = re.match(r"^\[\s*([^\[\]]+?)\s*\]", line)
        if m:
            current = _split_dotted(m.group(1))
            if current == tuple(table):
                header_line = no
                if key is None:
                    return no
            continue
        if current == tuple(table) and key is not None:
            m = re.match(r"^(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=", line)
            if m and m.group(1).strip("\"'") == key:
                return no
    return header_line


@dataclass
class GateConfig:
    path: str
    inputs: dict[str, Any]
    premature_stops: dict[str, Any]
    divergence: dict[str, Any]
    overruns: dict[str, Any]
    loop_recall_baseline: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def thresholds_for(self, provider: str, exact: bool = False) -> dict[str, Any]:
        """The band a provider's estimates are held to; an exact counting mode
        (a tokenizer) is held to `[divergence.exact]` instead."""
        out = {k: self.divergence[k] for k in PROVIDER_KEYS}
        for pattern, over in self.divergence["providers"].items():
            if fnmatch.fnmatchcase(provider, pattern):
                out.update(over)
        if exact:
            out.update(self.divergence["exact"])
        return out


def _line(text: str, loc: Sequence[str]) -> int | None:
    """The line of the key `loc` names: the key where it is written (in its
    table, or inline in a table above), else the header of its table."""
    for i in range(len(loc), 0, -1):
        line = _line_of(text, loc[:i - 1], loc[i - 1])
        if line is None:
            line = _line_of(text, loc[:i], None)
        if line is not None:
            return line
    return None


def _walk(loc: Sequence[str]) -> tuple[Any, Any, Any]:
    """Along `loc` through the tables: (the model holding its last key, that
    key's field, the model the key itself holds); None where unknown."""
    parent, field, model = None, None, GateFile
    for part in loc:
        if isinstance(model, tuple):       # a table of named tables (providers, corpora): `part` is a name
            parent, field, model = None, None, model[1]
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return model, None, None
        parent, field = model, model.model_fields[part]
        args = typing.get_args(field.annotation)
        model = ("named", args[1]) if typing.get_origin(field.annotation) is dict else field.annotation
    return parent, field, model


def _keys(model: Any) -> str | None:
    return ", ".join(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else None


def _problem(err: dict[str, Any], name: str, text: str) -> UserInputError:
    """pydantic's first error as a UserInputError naming the file, line and dotted key."""
    parts = list(err["loc"])
    item = next((i for i, part in enumerate(parts) if isinstance(part, int)), None)   # an item of a list
    loc = tuple(str(part) for part in parts[:item])
    parent, field, model = _walk(loc)
    where = {"file": name, "line": _line(text, loc), "key": ".".join(loc)}
    if item is not None:
        return UserInputError("must be a list of strings", expected=field.description if field else None, **where)
    if err["type"] == "extra_forbidden":
        return UserInputError("unknown table" if len(loc) == 1 else "unknown key", expected=_keys(parent), **where)
    if err["type"] == "missing":
        return UserInputError("required key is missing", expected=field.description if field else None, **where)
    if err["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return UserInputError("must be a table", expected=_keys(model[1] if isinstance(model, tuple) else model),
                              **where)
    return UserInputError(f"{err['input']!r} is not valid",
                          expected=(field.description if field is not None else None) or err["msg"], **where)


def parse_config(text: str, name: str) -> GateConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        problem = re.sub(r" \(at line .*$", "", str(exc))
        raise UserInputError(f"not valid TOML: {problem}", file=name,
                             line=int(m.group(1)) if m else None) from None
    except ValueError as exc:     # tomllib lets int()'s refusal of a number past the digit limit through
        if not digits_exceeded(exc):
            raise
        line = long_number_line(text)
        raise UserInputError(f"not valid TOML: {too_many_digits()}", file=name, line=line,
                             key=_key_at(text, line)) from None
    try:
        parsed = GateFile.model_validate(data)
    except ValidationError as exc:
        raise _problem(exc.errors()[0], name, text) from None
    novelty = parsed.premature_stops.novelty
    if "normalization" in novelty:
        raise UserInputError("set normalization as premature_stops.normalization", file=name,
                             line=_line(text, ("premature_stops", "novelty", "normalization")),
                             key="premature_stops.novelty.normalization")
    for k, v in novelty.items():
        try:
            make_config({k: v}, key=f"premature_stops.novelty.{k}")
        except UserInputError as exc:
            raise UserInputError(exc.message, file=name, line=_line(text, ("premature_stops", "novelty", k)),
                                 key=f"premature_stops.novelty.{k}", expected=exc.expected) from None
    out = parsed.model_dump()
    d = out["divergence"]
    d["providers"] = {prov: over.model_dump(exclude_none=True) for prov, over in parsed.divergence.providers.items()}
    d["exact"] = {**EXACT_DEFAULTS, **parsed.divergence.exact.model_dump(exclude_none=True)}
    out["loop_recall_baseline"] = {corpus: b.model_dump(exclude_unset=True)
                                   for corpus, b in parsed.loop_recall_baseline.items()}
    if d["median_min"] > d["median_max"]:
        raise UserInputError("median_min is above median_max", file=name, line=_line_of(text, ["divergence"], "median_min"),
                             key="divergence.median_min", expected=f"at most {d['median_max']}")
    _check_rule(out["premature_stops"], name, text)
    cfg = GateConfig(name, out["inputs"], out["premature_stops"], out["divergence"], out["overruns"],
                     out["loop_recall_baseline"])
    # The replay settings are the shipped defaults unless the file pins others on purpose: say so.
    ps = out["premature_stops"]
    for key, setting in (("patience", "chat.research_no_progress_rounds"), ("rule", "chat.research_stop_rule")):
        if key in data.get("premature_stops", {}) and ps[key] != SPECS[setting].default:
            cfg.warnings.append(f"{name}:{_line_of(text, ['premature_stops'], key)}: premature_stops.{key} = "
                                f"{ps[key]!r} differs from the shipped default {setting} = "
                                f"{SPECS[setting].default!r}: the gate judges another rule than the one shipped")
    return cfg


def _check_rule(ps: dict[str, Any], name: str, text: str) -> None:
    """The rule the gate replays with, chosen as `frames` will choose it, when
    the file loads: a bad rule or parameter names this file and line."""
    from imprint_core.stoprules import choose
    novelty = make_config({**ps["novelty"], "normalization": ps["normalization"]}, key="premature_stops.novelty")
    choose(ps["rule"], ps["rule_params"], defaults={"patience": ps["patience"], "novelty": novelty},
           key="premature_stops.rule_params.", file=name,
           lines={k: _line_of(text, ["premature_stops", "rule_params"], k)
                  or _line_of(text, ["premature_stops"], "rule_params") for k in ps["rule_params"]},
           spec_key="premature_stops.rule", spec_line=_line_of(text, ["premature_stops"], "rule"))


def load_config(path: str | Path) -> GateConfig:
    return parse_config(read_user_file(path, "the gate config"), str(path))
