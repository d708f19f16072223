"""Scenario files read into `Scenario`s, every mistake a `UserInputError`
naming the file, line and key (pydantic's errors translated: an unknown key
lists the allowed ones, a union's errors are said once), with the checks the
model alone cannot make: scripted calls to undefined tools, event
selectors, settings."""
from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError

from imprint_core.errors import SettingsError, UserInputError, UserInputErrors
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
        if part == tp.__name__:      # pydantic names a plain union's member in the loc
            return tp
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


_KEY_KINDS = ("extra_forbidden", "missing")


def nearest(word: str, allowed: "list[str] | tuple[str, ...]") -> str | None:
    """The allowed word closest to a misspelled one, if one is close."""
    close = difflib.get_close_matches(str(word), list(allowed), n=1)
    return close[0] if close else None


def unknown_key(key: Any, allowed: "list[str] | None") -> tuple[str, str | None]:
    """An unknown key's message, with the nearest allowed key suggested, and what is allowed."""
    near = nearest(key, allowed) if allowed else None
    return (f"unknown key {key!r}" + (f"; did you mean {near!r}?" if near else ""),
            "one of " + ", ".join(allowed) if allowed else None)


def _shadowed(e: dict, errors: list[dict]) -> bool:
    """A union member's scalar refusal of a mapping (`rounds: {mn: 2}` is no
    int) when another member says what is wrong inside the mapping."""
    loc = tuple(e["loc"])
    return isinstance(e.get("input"), dict) and len(loc) > 1 and any(
        len(o["loc"]) > len(loc) and tuple(o["loc"])[:len(loc) - 1] == loc[:-1]
        and tuple(o["loc"])[len(loc) - 1] != loc[-1] for o in errors)


def _translate(exc: ValidationError, name: str, lines: dict[tuple, int]) -> list[UserInputError]:
    """Every problem pydantic found, each named by line and key: a union's
    errors at one place said once, an unknown key with the nearest allowed
    key, and a required key left out because it was misspelled said once,
    as the misspelling."""
    errors = [e for e in exc.errors() if not _shadowed(e, exc.errors())]
    groups: dict[tuple, list[dict]] = {}
    for e in errors:
        groups.setdefault(_clean_loc(tuple(e["loc"]), lines, keep_last=e["type"] in _KEY_KINDS), []).append(e)
    problems: list[tuple[tuple, str, str | None]] = []
    misspelled: set[tuple] = set()     # the required keys an unknown key stands for
    for loc, same in groups.items():
        first = same[0]
        kind = first["type"]
        expected = None
        if kind == "extra_forbidden":
            allowed = _allowed_keys(tuple(first["loc"])[:-1])
            message, expected = unknown_key(loc[-1], allowed)
            near = nearest(loc[-1], allowed) if allowed else None
            if near is not None:
                misspelled.add(loc[:-1] + (near,))
        elif kind == "missing":
            message = "required key is missing"
        elif kind == "union_tag_invalid":
            tag = first["input"].get("kind") if isinstance(first["input"], dict) else first["input"]
            message = f"unknown provider kind {tag!r}"
            near = nearest(tag, ("stub", "local", "remote")) if isinstance(tag, str) else None
            message += f"; did you mean {near!r}?" if near else ""
            expected = "one of stub, local, remote"
        else:
            msgs = list(dict.fromkeys(e["msg"].removeprefix("Value error, ") for e in same))
            message = " or ".join(msgs)
            value = first.get("input")
            if value is not None and not isinstance(value, (dict, list)):
                message += f" (got {value!r})"
        problems.append((loc, message, expected))
    return [UserInputError(message, file=name, line=line_of(lines, loc), key=key_text(loc), expected=expected)
            for loc, message, expected in problems
            if not (loc in misspelled and message == "required key is missing")]


def _in_file_order(problems: list[UserInputError]) -> list[UserInputError]:
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def parse_scenario(text: str, name: str) -> Scenario:
    """The scenario the file describes; every problem in it at once (a
    `UserInputErrors` for more than one), each naming the line and key."""
    data, lines = load_yaml(text, name)
    if not isinstance(data, dict):
        raise UserInputError("a scenario file must be a mapping of keys", file=name, line=1,
                             expected="keys such as name, question, provider, tools, expect")
    scn = None
    try:
        scn = Scenario.model_validate(data)
        problems: list[UserInputError] = []
    except ValidationError as exc:
        problems = _translate(exc, name, lines)
    # The checks the model cannot make read the file's values, so that they
    # are said beside the model's refusals, not a run later.
    problems += _check_calls(data, name, lines)
    problems += _check_selectors(data, name, lines)
    problems += _check_settings(data, name, lines)
    if scn is not None and not problems:
        scn = _check_rule(scn, name, lines)
    if problems:
        problems = _in_file_order(problems)
        raise problems[0] if len(problems) == 1 else UserInputErrors(problems)
    assert scn is not None
    return scn.model_copy(update={"source": name})


def _check_settings(data: dict, name: str, lines: dict[tuple, int]) -> list[UserInputError]:
    settings = data.get("settings")
    out: list[UserInputError] = []
    if not isinstance(settings, dict):
        return out
    for key, value in settings.items():
        where = line_of(lines, ("settings", key))
        if key in IGNORED_KEYS:
            continue  # the legacy round cap: accepted, never applied
        if key not in SPECS:
            near = nearest(key, list(SPECS))
            out.append(UserInputError("unknown setting" + (f"; did you mean {near!r}?" if near else ""), file=name,
                                      line=where, key=f"settings.{key}",
                                      expected="one of " + ", ".join(list(SPECS) + sorted(IGNORED_KEYS))))
            continue
        try:
            validate(key, value)
        except SettingsError as exc:
            out.append(UserInputError(exc.message, file=name, line=where, key=f"settings.{key}",
                                      expected=exc.expected))
    return out


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


def _items(value: Any, key: str) -> list:
    """`value[key]` where value is a mapping and it is a list, else nothing."""
    got = value.get(key) if isinstance(value, dict) else None
    return got if isinstance(got, list) else []


def _check_calls(data: dict, name: str, lines: dict[tuple, int]) -> list[UserInputError]:
    """A scripted call to a tool the scenario does not define would only show
    later as a changed round count: name it when the file loads."""
    spec = data.get("provider")
    if not isinstance(spec, dict) or spec.get("kind") != "stub":
        return []
    loop = data.get("loop")
    defined = [t["name"] for t in _items(data, "tools") if isinstance(t, dict) and isinstance(t.get("name"), str)] \
        + (["delegate_sections"] if isinstance(loop, dict) and loop.get("section_workers") is True else [])
    out = []
    for part in ("script", "workers", "final"):
        for i, turn in enumerate(_items(spec, part)):
            for j, call in enumerate(_items(turn, "calls")):
                tool = call.get("tool") if isinstance(call, dict) else None
                if isinstance(tool, str) and tool not in defined and call.get("undefined") is not True:
                    near = nearest(tool, defined)
                    out.append(UserInputError(
                        f"call to undefined tool {tool!r}" + (f"; did you mean {near!r}?" if near else ""),
                        file=name, line=line_of(lines, ("provider", part, i, "calls", j, "tool")),
                        key=f"provider.{part}[{i}].calls[{j}].tool",
                        expected=("one of " + ", ".join(defined) if defined else "a tool defined under `tools`")
                                 + ", or `undefined: true` for a deliberate call to a missing tool"))
    return out


def _check_selectors(data: dict, name: str, lines: dict[tuple, int]) -> list[UserInputError]:
    """Unknown event types and keys: a misspelled selector counts 0 events, so
    `: 0` could never fail."""
    out = []
    expect = data.get("expect")
    events = expect.get("events") if isinstance(expect, dict) else None
    for selector in events if isinstance(events, dict) else ():
        try:
            parse_selector(str(selector))
        except SelectorError as exc:
            out.append(UserInputError(exc.message, file=name, line=line_of(lines, ("expect", "events", selector)),
                                      key=f"expect.events.{selector}", expected=exc.expected))
    cancel = data.get("cancel")
    on_event = cancel.get("on_event") if isinstance(cancel, dict) else None
    if not isinstance(on_event, str):
        return out
    try:
        allowed = line_keys(parse_selector(on_event).type)
    except SelectorError as exc:
        return out + [UserInputError(exc.message, file=name, line=line_of(lines, ("cancel", "on_event")),
                                     key="cancel.on_event", expected=exc.expected)]
    where = cancel.get("where")
    for key in where if isinstance(where, dict) and allowed is not None else ():
        if key not in allowed:
            out.append(UserInputError(f"unknown key {key!r} of {on_event} events", file=name,
                                      line=line_of(lines, ("cancel", "where", key)), key=f"cancel.where.{key}",
                                      expected="one of " + ", ".join(sorted(allowed))))
    return out


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
