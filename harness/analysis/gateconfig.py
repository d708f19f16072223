"""The gate's config: `reports/gate.toml` (or the file `--config` names)
read, checked against its schema and merged over the defaults.

Every table and key is known (`SCHEMA`: type, check and what is expected);
a mistake is a `UserInputError` naming the file, its line and the dotted
key. `[divergence.providers.PATTERN]` overrides the band of the providers it
matches, `[divergence.exact]` holds exact counting modes, and
`[loop_recall_baseline.CORPUS]` records what the shipped rule caught. A
replay setting that differs from the shipped default is kept, with a
warning: the gate then judges another rule than the one shipped.
"""
from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from imprint_core.errors import UserInputError, digits_exceeded, long_number_line, too_many_digits
from imprint_core.novelty import NORMALIZATIONS
from imprint_core.settings import SPECS

from ..realruns.labels import LOOP_SLACK, read_user_file
from ..realruns.noveltyconfigs import make_config
from ..realruns.regressionstore import CORPUS as REGRESSIONS
from ..realruns.roundlogs import PATIENCE, USER_TURNS

# table -> key -> (type, check, expected)
_NUM = (int, float)
SCHEMA: dict[str, dict[str, tuple[Any, Any, str]]] = {
    "inputs": {
        "traces": (list, None, "a list of paths"),
        "latest_run": (bool, None, "true or false"),
        "runs_dir": (str, None, "a path"),
        "round_logs": (list, None, "a list of paths"),
        "labels": (list, None, "a list of label files"),
    },
    "premature_stops": {
        "patience": (int, lambda v: PATIENCE.min <= v <= PATIENCE.max,
                     f"an integer within {PATIENCE.min}–{PATIENCE.max}"),
        "normalization": (str, lambda v: v in NORMALIZATIONS, "one of " + ", ".join(NORMALIZATIONS)),
        "user_turns": (str, lambda v: v in USER_TURNS, "one of " + ", ".join(USER_TURNS)),
        "max_premature": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "max_premature_share": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "strict": (list, None, "a list of corpus names (labels files without `labels-` and `.yaml`)"),
        "per_run": (list, None, "a list of corpus names whose every labelled run must hold"),
        "min_loop_recall": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1 (read as loop_recall_goal)"),
        "loop_recall_goal": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "rule": (str, lambda v: bool(v.strip()), "a stop rule (`imprint rules`)"),
        "rule_params": (dict, None, "a table of the rule's parameters"),
        "loop_slack": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "novelty": (dict, None, "a table of NoveltyConfig fields"),
    },
    "divergence": {
        "min_requests": (int, lambda v: v >= 1, "an integer of 1 or more"),
        "median_min": (_NUM, lambda v: v > 0, "a positive number"),
        "median_max": (_NUM, lambda v: v > 0, "a positive number"),
        "p95_max": (_NUM, lambda v: v > 0, "a positive number"),
        "max_undercount_share": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
        "exclude": (list, None, "a list of provider names or patterns"),
        "providers": (dict, None, "a table of per-provider thresholds"),
        "exact": (dict, None, "a table of thresholds for exact counting modes"),
        "max_overruns": (int, lambda v: v >= 0, "an integer of 0 or more"),
    },
    "loop_recall_baseline": {},   # one table per corpus: BASELINE_KEYS
    "overruns": {
        "deliberate": (list, None, "a list of scenario names that overrun on purpose"),
        "max_count": (int, lambda v: v >= 0, "an integer of 0 or more"),
        "max_overrun_sec": (_NUM, lambda v: v >= 0, "a number of seconds, 0 or more"),
    },
}
BASELINE_KEYS = {"recall": (_NUM, lambda v: 0 <= v <= 1, "a share within 0–1"),
                 "caught": (int, lambda v: v >= 0, "an integer of 0 or more"),
                 "loops": (int, lambda v: v >= 0, "an integer of 0 or more"),
                 "commit": (str, None, "the commit that measured it"),
                 "rule": (str, None, "the rule it was measured with")}
PROVIDER_KEYS = ("min_requests", "median_min", "median_max", "p95_max", "max_undercount_share")
DEFAULTS: dict[str, dict[str, Any]] = {
    "inputs": {"traces": ["traces"], "latest_run": True, "runs_dir": "traces/runs", "round_logs": [], "labels": []},
    "premature_stops": {"patience": PATIENCE.default, "normalization": "default", "user_turns": "reset", "max_premature": 0,
                        "max_premature_share": 0.10, "strict": [], "per_run": [REGRESSIONS],
                        "loop_recall_goal": 0.8, "loop_slack": LOOP_SLACK,
                        "novelty": {}, "rule": SPECS["chat.research_stop_rule"].default, "rule_params": {}},
    "loop_recall_baseline": {},
    "divergence": {"min_requests": 5, "median_min": 0.9, "median_max": 1.5, "p95_max": 2.0,
                   "max_undercount_share": 0.05, "exclude": [], "providers": {},
                   "exact": {"median_min": 0.98, "median_max": 1.02, "p95_max": 1.02, "max_undercount_share": 0.0},
                   "max_overruns": 0},
    "overruns": {"deliberate": [], "max_count": 0, "max_overrun_sec": 0.0},
}


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


def _check_value(value: Any, spec: tuple[Any, Any, str], file: str, line: int | None, key: str) -> None:
    typ, check, expected = spec
    ok = isinstance(value, typ) and not (isinstance(value, bool) and typ is not bool)
    if ok and check is not None:
        ok = bool(check(value))
    if not ok:
        raise UserInputError(f"{value!r} is not valid", file=file, line=line, key=key, expected=expected)


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
    out = {t: dict(v) for t, v in DEFAULTS.items()}
    out["divergence"]["providers"] = {}
    for table, body in data.items():
        if table not in SCHEMA:
            raise UserInputError("unknown table", file=name, line=_line_of(text, [table], None) or _line_of(text, [], table),
                                 key=table, expected=", ".join(SCHEMA))
        if not isinstance(body, dict):
            raise UserInputError("must be a table", file=name, line=_line_of(text, [], table), key=table)
        for key, value in body.items():
            line = _line_of(text, [table], key)
            if table == "loop_recall_baseline":
                out[table][key] = _baseline(value, name, text, key, line)
                continue
            if key not in SCHEMA[table]:
                raise UserInputError("unknown key", file=name, line=line, key=f"{table}.{key}",
                                     expected=", ".join(SCHEMA[table]))
            _check_value(value, SCHEMA[table][key], name, line, f"{table}.{key}")
            if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                raise UserInputError("must be a list of strings", file=name, line=line, key=f"{table}.{key}")
            if table == "divergence" and key == "providers":
                for prov, over in value.items():
                    pline = (_line_of(text, ["divergence", "providers", prov], None)
                             or _line_of(text, ["divergence", "providers"], prov) or line)
                    if not isinstance(over, dict):
                        raise UserInputError("must be a table of thresholds", file=name, line=pline,
                                             key=f"divergence.providers.{prov}", expected=", ".join(PROVIDER_KEYS))
                    for k, v in over.items():
                        kline = _line_of(text, ["divergence", "providers", prov], k) or pline
                        if k not in PROVIDER_KEYS:
                            raise UserInputError("unknown key", file=name, line=kline,
                                                 key=f"divergence.providers.{prov}.{k}", expected=", ".join(PROVIDER_KEYS))
                        _check_value(v, SCHEMA["divergence"][k], name, kline, f"divergence.providers.{prov}.{k}")
            if table == "divergence" and key == "exact":
                for k, v in value.items():
                    kline = _line_of(text, ["divergence", "exact"], k) or line
                    if k not in PROVIDER_KEYS:
                        raise UserInputError("unknown key", file=name, line=kline, key=f"divergence.exact.{k}",
                                             expected=", ".join(PROVIDER_KEYS))
                    _check_value(v, SCHEMA["divergence"][k], name, kline, f"divergence.exact.{k}")
                value = {**DEFAULTS["divergence"]["exact"], **value}
            if table == "premature_stops" and key == "novelty":
                if "normalization" in value:
                    raise UserInputError("set normalization as premature_stops.normalization", file=name, line=line,
                                         key="premature_stops.novelty.normalization")
                for k, v in value.items():
                    kline = _line_of(text, ["premature_stops", "novelty"], k) or line
                    try:
                        make_config({k: v}, key=f"premature_stops.novelty.{k}")
                    except UserInputError as exc:
                        raise UserInputError(exc.message, file=name, line=kline, key=f"premature_stops.novelty.{k}",
                                             expected=exc.expected) from None
            if table == "premature_stops" and key == "min_loop_recall":
                key = "loop_recall_goal"   # its older name
            out[table][key] = value
    d = out["divergence"]
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


def _baseline(value: Any, name: str, text: str, corpus: str, line: int | None) -> dict[str, Any]:
    where = f"loop_recall_baseline.{corpus}"
    tline = _line_of(text, ["loop_recall_baseline", corpus], None) or line
    if not isinstance(value, dict):
        raise UserInputError("must be a table", file=name, line=tline, key=where,
                             expected="recall, caught, loops, commit, rule")
    for k, v in value.items():
        kline = _line_of(text, ["loop_recall_baseline", corpus], k) or tline
        if k not in BASELINE_KEYS:
            raise UserInputError("unknown key", file=name, line=kline, key=f"{where}.{k}", expected=", ".join(BASELINE_KEYS))
        _check_value(v, BASELINE_KEYS[k], name, kline, f"{where}.{k}")
    if "recall" not in value:
        raise UserInputError("required key is missing", file=name, line=tline, key=f"{where}.recall",
                             expected="the share of labelled loops the shipped rule caught")
    return dict(value)


def load_config(path: str | Path) -> GateConfig:
    return parse_config(read_user_file(path, "the gate config"), str(path))
