"""`--rule`, `--param NAME=VALUE` and `--params FILE.toml`: how a command is
told which stop rule to judge (replay, check, compare, tune)."""
from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError

RULE_HELP = ("a stop rule: a built-in or entry-point name (`imprint rules` lists them), FILE.py:FACTORY or "
             "MODULE:FACTORY (default: record, the record's novelty and patience rule)")


def add_rule_options(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument("--rule", action="append", metavar="RULE", dest="rules",
                       help=RULE_HELP.replace("(default: record", "(repeatable; default: every built-in") +
                       "; RULE[NAME=VALUE,...] sets its parameters inline")
    else:
        p.add_argument("--rule", default=None, metavar="RULE", help=RULE_HELP)
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a parameter of the rule (repeatable), e.g. threshold=3" +
                   ("; with several --rule, RULE.NAME=VALUE" if many else ""))
    p.add_argument("--params", metavar="FILE.toml",
                   help="parameters from a TOML file: keys at the top, or a table per rule ([gemini-cli] threshold = 3)")


def params_file(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserInputError(f"cannot read the parameters file: {exc.strerror}", file=path, key="--params") from None
    except UnicodeDecodeError as exc:
        raise UserInputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise UserInputError(f"not valid TOML: {exc}", file=path, key="--params") from None


def _for_rule(table: dict[str, Any], name: str) -> dict[str, Any]:
    if isinstance(table.get(name), dict):
        return dict(table[name])
    return {k: v for k, v in table.items() if not isinstance(v, dict)}


def rule_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The one rule a command judges, and its parameters (file first, then
    `--param`, which wins)."""
    from imprint_core.stoprules import parse_params
    spec = args.rule or "record"
    params = _for_rule(params_file(args.params), spec)
    params.update(parse_params(args.param))
    return spec, params


def rules_of(args: argparse.Namespace, default: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """The rules a command compares: (label, spec, parameters) each. A rule
    may carry its parameters inline, `gemini-cli[threshold=3]`, so one rule
    can be compared at several settings."""
    from imprint_core.stoprules import parse_params
    table = params_file(args.params)
    loose = parse_params(args.param)
    used: set[str] = set()
    out = []
    for text in args.rules or default:
        spec, inline = text, {}
        if text.endswith("]") and "[" in text:
            spec, _, body = text[:-1].partition("[")
            inline = parse_params([p for p in body.split(",") if p.strip()], key=f"--rule {text}")
        params = _for_rule(table, spec)
        for k, v in loose.items():
            name, dot, p = k.partition(".")
            if dot and name == spec:
                params[p] = v
                used.add(k)
            elif not dot and len(args.rules or default) == 1:
                params[k] = v
                used.add(k)
        params.update(inline)
        out.append((text, spec, params))
    for k in loose:
        if k not in used:   # a parameter no rule takes must not be dropped silently
            raise UserInputError(f"--param {k} names no rule being compared", key=f"--param {k}",
                                 expected="RULE.NAME=VALUE for one of " + ", ".join(spec for _, spec, _ in out))
    labels = [label for label, _, _ in out]
    dup = {x for x in labels if labels.count(x) > 1}
    if dup:
        raise UserInputError(f"rule {sorted(dup)[0]!r} is named twice", key="--rule")
    return out
