"""`--rule`, `--param NAME=VALUE` and `--params FILE.toml`: how a command is
told which stop rule to judge (replay, check, compare, tune). `choice_of`
makes them one `RuleChoice`, with the record's shorthand (`--patience`,
`--normalization`, `--novelty FIELD=VALUE`) as parameters of the record rule
(or of the record half of a rule built on it, like the shipped repeat-aware)."""
from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from imprint_core.errors import UserInputError

RULE_HELP = ("a stop rule: a built-in or entry-point name (`imprint rules` lists them), FILE.py:FACTORY or "
             "MODULE:FACTORY (default: the shipped chat.research_stop_rule)")


def add_rule_options(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    if many:
        p.add_argument("--rule", action="append", metavar="RULE", dest="rules",
                       help=RULE_HELP.replace("(default: the shipped chat.research_stop_rule",
                                              "(repeatable; default: every built-in") +
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


def inline_items(body: str, text: str) -> list[str]:
    """The NAME=VALUE items of `RULE[...]`, cut at top-level commas (brackets
    nest: `any[rules=[record,gemini-cli]]`); an item with no `=` continues
    the list value before it, so `any[rules=record,gemini-cli]` reads as
    `rules=record,gemini-cli`."""
    from imprint_core import params as typed
    try:
        parts = [p for p in typed.split_top(body) if p.strip()]
    except typed.ParamError as exc:
        raise UserInputError(exc.message, key=f"--rule {text}", expected=exc.expected) from None
    items: list[str] = []
    for p in parts:
        if items and len(typed.split_top(p, "=")) == 1:   # no NAME= of its own
            items[-1] += typed.LIST_SEPARATOR + p
        else:
            items.append(p)
    return items


def inline_rule(text: str) -> tuple[str, dict[str, Any]]:
    """`RULE[NAME=VALUE,...]` as the rule and its inline parameters (none for a plain `RULE`)."""
    from imprint_core.stoprules import parse_params
    if not (text.endswith("]") and "[" in text):
        return text, {}
    spec, _, body = text[:-1].partition("[")
    return spec, parse_params(inline_items(body, text), key=f"--rule {text}")


def _for_rule(table: dict[str, Any], name: str) -> dict[str, Any]:
    if isinstance(table.get(name), dict):
        return dict(table[name])
    return {k: v for k, v in table.items() if not isinstance(v, dict)}


def rule_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The one rule a command judges, and its parameters (file first, then
    `--param`, which wins)."""
    from imprint_core.stoprules import parse_params
    spec, inline = inline_rule(args.rule or "record")
    params = _for_rule(params_file(args.params), spec)
    params.update(inline)
    params.update(parse_params(args.param))
    return spec, params


def shorthand_of(args: argparse.Namespace) -> dict[str, tuple[str, Any]]:
    """The record's shorthand given: parameter -> (the flag that gave it, value)."""
    out: dict[str, tuple[str, Any]] = {}
    if getattr(args, "patience", None) is not None:
        out["patience"] = ("--patience", args.patience)
    for text in getattr(args, "novelty", None) or []:
        from ..realruns.noveltyconfigs import parse_assignment
        name, values = parse_assignment(text, key="--novelty")
        if len(values) != 1:
            raise UserInputError(f"{text!r} gives {len(values)} values", key="--novelty", expected="FIELD=VALUE")
        if name in out:
            raise UserInputError(f"--novelty {name} given twice", key="--novelty", expected="each field once")
        out[name] = ("--novelty", values[0])
    if getattr(args, "normalization", None) is not None:
        if "normalization" in out and out["normalization"][1] != args.normalization:
            raise UserInputError("--normalization and --novelty normalization= disagree", key="--normalization")
        out["normalization"] = ("--normalization", args.normalization)
    return out


def choice_of(args: argparse.Namespace):
    """The one rule a command judges as a `RuleChoice`: `--rule` (default:
    the shipped one), its parameters from `--params FILE.toml`, then
    `--param`, then the record's shorthand, which also sets the record half
    of a rule built on it (its `patience`, and the fields of its `novelty`
    config). A parameter given twice, or shorthand for a rule that takes no
    such parameter, is refused, never silently dropped."""
    from imprint_core.novelty import NoveltyConfig
    from imprint_core.stoprules import DEFAULT_RULE, RECORD_SHORTHAND, choose, convert, parse_params, resolve
    spec, inline = inline_rule(args.rule or DEFAULT_RULE)
    info = resolve(spec)
    from_file = _for_rule(params_file(args.params), spec)
    params = {k: convert(info, k, v, "--params", file=args.params) for k, v in from_file.items()}
    params.update(inline)
    for name, value in parse_params(args.param).items():
        if name in inline:
            raise UserInputError(f"{name} is given in --rule {args.rule} and by --param", key=f"--param {name}",
                                 expected="each parameter once")
        params[name] = value
    record, fields = resolve("record"), {}
    for name, (flag, value) in shorthand_of(args).items():
        if name not in RECORD_SHORTHAND:
            raise UserInputError(f"the record's rule has no novelty field {name!r}", key=flag,
                                 expected="one of " + ", ".join(RECORD_SHORTHAND[1:]))
        field = name != "patience" and info.name != "record"   # a field of a novelty config, for a rule built on it
        if not (name in info.params or field and "novelty" in info.params):
            raise UserInputError(f"{flag} is shorthand for a parameter of the record's rule, not of {info.name!r}",
                                 key=flag, expected=f"--param NAME=VALUE for --rule {spec}")
        if name in params or field and "novelty" in params:
            raise UserInputError(f"{name} is given by {flag} and by --param/--params", key=flag,
                                 expected="each parameter once")
        if field:
            fields[name] = convert(record, name, value, flag)
        else:
            params[name] = convert(info, name, value, flag)
    if fields:
        params["novelty"] = NoveltyConfig(**fields)
    return choose(spec, params)


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
        spec, inline = inline_rule(text)
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
