"""Scenario files read into `Scenario`s, every mistake a `UserInputError`
naming the file, line and key (pydantic's errors translated: an unknown key
lists the allowed ones, a union's errors are said once), with the checks the
model alone cannot make: scripted calls to undefined tools, event
selectors, settings."""
from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

from imprint_core.errors import SettingsError, UserInputError
from imprint_core.settings import IGNORED_KEYS, SPECS, validate

from ..conventions import expand_paths
from ..yamlsource import key_text, line_of, load_yaml
from .model import Scenario, StubProviderSpec
from .selectors import SelectorError, line_keys, parse_selector


def _allowed_keys(loc: tuple) -> list[str] | None:
    """Field names of the model at `loc`, walking the annotations."""
    tp: Any = Scenario
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return None
    tp = _unwrap(tp, None)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [n for n, f in tp.model_fields.items() if not f.exclude]
    return None


def _unwrap(tp: Any, part: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0], part)
    if origin is Union or str(origin) == "types.UnionType":
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        for m in models:  # a discriminated union's tag names the member
            kind = m.model_fields.get("kind")
            if kind is not None and part in typing.get_args(kind.annotation):
                return m
        return models[0] if len(models) == 1 else (members[0] if len(members) == 1 else tp)
    return tp


def _step(tp: Any, part: Any) -> Any:
    tp = _unwrap(tp, part)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if part in tp.model_fields:
            return tp.model_fields[part].annotation
        return tp if any(  # a discriminator tag inside the loc: stay on the chosen member
            part in typing.get_args(f.annotation) for n, f in tp.model_fields.items() if n == "kind") else None
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None


def _clean_loc(loc: tuple, lines: dict[tuple, int], keep_last: bool) -> tuple:
    """Drop pydantic's own loc parts (union member names, validator names)
    that are not keys in the file; keep the last part for a missing or
    unknown key."""
    out: tuple = ()
    for i, part in enumerate(loc):
        if out + (part,) in lines or (keep_last and i == len(loc) - 1):
            out += (part,)
    return out


def _translate(exc: ValidationError, name: str, lines: dict[tuple, int]) -> UserInputError:
    errors = exc.errors()
    first = errors[0]
    kind = first["type"]
    loc = _clean_loc(tuple(first["loc"]), lines, keep_last=kind in ("extra_forbidden", "missing"))
    # A union reports one error per member at the same place: say them once.
    same = [e for e in errors if _clean_loc(tuple(e["loc"]), lines, kind in ("extra_forbidden", "missing")) == loc]
    expected = None
    if kind == "extra_forbidden":
        allowed = _allowed_keys(tuple(first["loc"])[:-1])
        message = "unknown key"
        expected = "one of " + ", ".join(allowed) if allowed else None
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "union_tag_invalid":
        tag = first["input"].get("kind") if isinstance(first["input"], dict) else first["input"]
        message = f"unknown provider kind {tag!r}"
        expected = "one of stub, local, remote"
    else:
        msgs = list(dict.fromkeys(e["msg"].removeprefix("Value error, ") for e in same))
        message = " or ".join(msgs)
        value = first.get("input")
        if value is not None and not isinstance(value, (dict, list)):
            message += f" (got {value!r})"
    more = len(errors) - len(same)
    if more:
        message += f"; and {more} more problem(s)"
    return UserInputError(message, file=name, line=line_of(lines, loc), key=key_text(loc), expected=expected)


def parse_scenario(text: str, name: str) -> Scenario:
    data, lines = load_yaml(text, name)
    if not isinstance(data, dict):
        raise UserInputError("a scenario file must be a mapping of keys", file=name, line=1,
                             expected="keys such as name, question, provider, tools, expect")
    try:
        scn = Scenario.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc, name, lines) from None
    _check_calls(scn, name, lines)
    _check_selectors(scn, name, lines)
    for key, value in scn.settings.items():
        where = line_of(lines, ("settings", key))
        if key in IGNORED_KEYS:
            continue  # the legacy round cap: accepted, never applied
        if key not in SPECS:
            raise UserInputError("unknown setting", file=name, line=where, key=f"settings.{key}",
                                 expected="one of " + ", ".join(list(SPECS) + sorted(IGNORED_KEYS)))
        try:
            validate(key, value)
        except SettingsError as exc:
            raise UserInputError(exc.message, file=name, line=where, key=f"settings.{key}",
                                 expected=exc.expected) from None
    return _check_rule(scn, name, lines).model_copy(update={"source": name})


RULE_SETTING = "chat.research_stop_rule"


def _check_rule(scn: Scenario, name: str, lines: dict[tuple, int]) -> Scenario:
    """The scenario's stop rule chosen as the loop will build it, when the
    file loads: a bad rule or parameter names this file and line, and a rule
    file named by a relative path is found from this file's folder (the
    scenario keeps it as a path that holds from any folder)."""
    spec = scn.settings.get(RULE_SETTING)
    params = scn.loop.stop_rule_params
    if spec is None and not params:
        return scn
    from imprint_core.stoprules import choose
    where = ("loop", "stop_rule_params")
    patience = scn.settings.get("chat.research_no_progress_rounds", SPECS["chat.research_no_progress_rounds"].default)
    choice = choose(spec, params, defaults={"patience": patience, "novelty": scn.loop.novelty()},
                    key="loop.stop_rule_params.", file=name,
                    lines={k: line_of(lines, where + (k,)) for k in params},
                    spec_key=f"settings.{RULE_SETTING}" if spec is not None else "loop.stop_rule_params",
                    spec_line=line_of(lines, ("settings", RULE_SETTING) if spec is not None else where),
                    base=Path(name).parent)
    if spec is None:
        return scn
    return scn.model_copy(update={"settings": {**scn.settings, RULE_SETTING: choice.spec}})


def _check_calls(scn: Scenario, name: str, lines: dict[tuple, int]) -> None:
    """A scripted call to a tool the scenario does not define would only show
    later as a changed round count: name it when the file loads."""
    spec = scn.provider
    if not isinstance(spec, StubProviderSpec):
        return
    defined = [t.name for t in scn.tools] + (["delegate_sections"] if scn.loop.section_workers else [])
    for part in ("script", "workers", "final"):
        for i, turn in enumerate(getattr(spec, part) or []):
            for j, call in enumerate(turn.calls):
                if call.tool not in defined and not call.undefined:
                    raise UserInputError(
                        f"call to undefined tool {call.tool!r}", file=name,
                        line=line_of(lines, ("provider", part, i, "calls", j, "tool")),
                        key=f"provider.{part}[{i}].calls[{j}].tool",
                        expected=("one of " + ", ".join(defined) if defined else "a tool defined under `tools`")
                                 + ", or `undefined: true` for a deliberate call to a missing tool")


def _check_selectors(scn: Scenario, name: str, lines: dict[tuple, int]) -> None:
    """Unknown event types and keys: a misspelled selector counts 0 events, so
    `: 0` could never fail."""
    for selector in scn.expect.events:
        try:
            parse_selector(selector)
        except SelectorError as exc:
            raise UserInputError(exc.message, file=name, line=line_of(lines, ("expect", "events", selector)),
                                 key=f"expect.events.{selector}", expected=exc.expected) from None
    cancel = scn.cancel
    if cancel is not None and cancel.on_event is not None:
        try:
            allowed = line_keys(parse_selector(cancel.on_event).type)
        except SelectorError as exc:
            raise UserInputError(exc.message, file=name, line=line_of(lines, ("cancel", "on_event")),
                                 key="cancel.on_event", expected=exc.expected) from None
        for key in cancel.where:
            if allowed is not None and key not in allowed:
                raise UserInputError(f"unknown key {key!r} of {cancel.on_event} events", file=name,
                                     line=line_of(lines, ("cancel", "where", key)), key=f"cancel.where.{key}",
                                     expected="one of " + ", ".join(sorted(allowed)))


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(p)) from None
    except OSError as exc:
        raise UserInputError(f"cannot read: {exc.strerror}", file=str(p)) from None
    return parse_scenario(text, str(p))


def scenario_files(paths: list[str | Path]) -> list[Path]:
    """The scenario files `paths` name: a folder's *.yaml files directly in it
    (its `labels/` are not scenarios), in `natural_order`; missing paths are errors."""
    return [f.path for f in expand_paths(paths, lambda name: name.endswith(".yaml"), recursive=False)]
