"""Finding and building stop rules by name: built-ins, entry points, files.

A rule is named by a spec:

- a registered name: a built-in (`record`, `round-cap`, ...) or one that a
  package declares in the entry-point group `imprint.stop_rules`
  (`myrule = "mypackage.rules:make"`);
- `path/to/file.py:make`: a factory in a Python file;
- `package.module:make`: a factory in an importable module.

A factory's keyword parameters with defaults are the rule's parameters;
`build` checks the names it is given and converts text (from `--param
name=value` or a TOML table) to the parameter's type (its annotation, else
its default's) with the one converter, `imprint_core.params`. Built-ins
register with `register` exactly as a user's factory would.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import params as typed
from ..errors import UserInputError
from .guard import USER_FAILURES, Guarded, call_factory, user_files
from .protocol import Rule, as_rule

ENTRY_POINT_GROUP = "imprint.stop_rules"


@dataclass(frozen=True)
class RuleInfo:
    name: str
    factory: Callable[..., Any] = field(repr=False)
    params: dict[str, Any]          # name -> default
    source: str = ""                # where the rule comes from (a peer's file, the record's section)
    summary: str = ""
    origin: str = "built-in"        # built-in, entry point, file or module
    spec: str = ""                  # what names it in `--rule`
    open_params: bool = False       # takes parameters it does not list (any: NAME.PARAM)
    types: dict[str, Any] = field(default_factory=dict, repr=False)   # name -> the type a value must have

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": {k: _jsonable(v) for k, v in self.params.items()},
                "source": self.source, "summary": self.summary, "origin": self.origin, "spec": self.spec or self.name}


_BUILTIN: dict[str, RuleInfo] = {}


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool, type(None), list, dict)) else repr(v)


def params_of(factory: Callable[..., Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A factory's parameters and their defaults (keyword parameters with a
    default; `extra` names those a `**kwargs` factory accepts)."""
    out: dict[str, Any] = {}
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty:
            out[p.name] = p.default
    out.update(extra or {})
    return out


def types_of(factory: Callable[..., Any], params: Mapping[str, Any],
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Each parameter's type: `extra`'s, else the factory's annotation, else
    its default's (`params.type_of_default`). An annotation that cannot be
    resolved counts as absent."""
    try:
        hints = typing.get_type_hints(factory)
    except Exception:   # a user's annotation naming what is not there: fall back to the defaults
        hints = {}
    extra = extra or {}
    return {n: extra.get(n) or hints.get(n) or typed.type_of_default(d) for n, d in params.items()}


def _open(factory: Callable[..., Any]) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())


def register(name: str, factory: Callable[..., Any], *, source: str = "", summary: str = "",
             extra_params: Mapping[str, Any] | None = None, origin: str = "built-in",
             extra_types: Mapping[str, Any] | None = None) -> RuleInfo:
    params = params_of(factory, extra_params)
    info = RuleInfo(name, factory, params, source, summary or _first_line(factory.__doc__), origin, name,
                    extra_params is None and _open(factory), types_of(factory, params, extra_types))
    _BUILTIN[name] = info
    return info


def stop_rule(name: str, *, source: str = "", extra_params: Mapping[str, Any] | None = None,
              extra_types: Mapping[str, Any] | None = None):
    """Decorator form of `register`, for a factory."""
    def deco(factory):
        register(name, factory, source=source, extra_params=extra_params, extra_types=extra_types)
        return factory
    return deco


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ").strip()


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[RuleInfo]:
    """Every rule that can be named: the built-ins, then entry points."""
    out = list(_BUILTIN.values())
    for name, ep in sorted(_entry_points().items()):
        if name in _BUILTIN:
            continue
        try:
            out.append(_from_factory(ep.load(), name, "entry point", f"{ep.value}"))
        except Exception as exc:  # a broken third-party package must not hide the others
            out.append(RuleInfo(name, _broken(exc), {}, ep.value, f"cannot be loaded: {exc}", "entry point", name))
    return out


def _broken(exc: Exception) -> Callable[..., Any]:
    def factory(**_):
        raise UserInputError(f"the rule cannot be loaded: {exc}")
    return factory


def factory_problem(factory: Any) -> str | None:
    """Why `factory` cannot be a rule factory (called with its parameters'
    defaults, by keyword), or None. A built-in function (`os:system`) or a
    callable with required arguments is not one, and is refused before it
    is ever called."""
    if not callable(factory):
        return "is not a factory (a callable that returns a rule)"
    if inspect.isbuiltin(factory) or inspect.ismethodwrapper(factory) or inspect.ismethoddescriptor(factory):
        return "is a built-in function, not a rule factory"
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return "has no signature to read its parameters from"
    required = [p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required:
        return f"takes required arguments ({', '.join(required)}): a factory's parameters all have defaults"
    return None


def _from_factory(factory: Any, name: str, origin: str, spec: str) -> RuleInfo:
    problem = factory_problem(factory)
    if problem:
        raise UserInputError(f"{spec} {problem}", key="--rule", expected="make(**params) -> rule")
    source = spec.rpartition(":")[0] if origin == "file" else getattr(factory, "__module__", "") or spec
    params = params_of(factory)
    return RuleInfo(name, factory, params, source, summary_of(factory), origin, spec, _open(factory),
                    types_of(factory, params))


def summary_of(factory: Any) -> str:
    """What a rule does, in its author's words: the factory's docstring, else
    that of the rule class it returns (its return annotation, or the one
    class with observe and reset defined beside it), else its module's."""
    own = _first_line(getattr(factory, "__doc__", None))
    if own or inspect.isclass(factory):
        return own
    try:
        made = typing.get_type_hints(factory).get("return")
    except Exception:   # an annotation naming what is not there
        made = None
    if not inspect.isclass(made):
        scope = getattr(factory, "__globals__", {})
        rules = [v for v in scope.values() if inspect.isclass(v) and v.__module__ == scope.get("__name__")
                 and callable(getattr(v, "observe", None)) and callable(getattr(v, "reset", None))]
        made = rules[0] if len(rules) == 1 else None
    if made is not None and _first_line(made.__doc__):
        return _first_line(made.__doc__)
    return _first_line(getattr(factory, "__globals__", {}).get("__doc__"))


def names_file(spec: str) -> bool:
    """Whether `spec` names a factory in a Python file (FILE.py:FACTORY)."""
    target = spec.strip().rpartition(":")[0]
    return bool(target) and (target.endswith(".py") or "/" in target or "\\" in target)


def anchored(spec: str, base: str | Path | None) -> str:
    """`spec` with a relative rule file made relative to `base` (the folder
    of the file that names it), so it names the same file from any folder."""
    spec = spec.strip()
    if base is None or not names_file(spec):
        return spec
    target, _, attr = spec.rpartition(":")
    path = Path(target)
    return spec if path.is_absolute() else f"{(Path(base) / path).absolute()}:{attr}"


def resolve(spec: str) -> RuleInfo:
    """The rule a spec names (see the module docstring); UserInputError
    naming the spec and what is available when it names nothing."""
    spec = spec.strip()
    if spec in _BUILTIN:
        return _BUILTIN[spec]
    if ":" not in spec:
        eps = _entry_points()
        if spec in eps:
            try:
                return _from_factory(eps[spec].load(), spec, "entry point", eps[spec].value)
            except UserInputError:
                raise
            except Exception as exc:
                raise UserInputError(f"entry point {spec!r} ({eps[spec].value}) cannot be loaded: {exc}",
                                     key="--rule") from None
        names = sorted(set(_BUILTIN) | set(eps))
        raise UserInputError(f"unknown stop rule {spec!r}", key="--rule",
                             expected="one of " + ", ".join(names) + ", or FILE.py:FACTORY, or MODULE:FACTORY")
    target, _, attr = spec.rpartition(":")
    if not target or not attr.isidentifier():
        raise UserInputError(f"{spec!r} does not name a factory", key="--rule",
                             expected="FILE.py:FACTORY or MODULE:FACTORY")
    if names_file(spec):
        module = _load_file(Path(target))
        origin = "file"
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise UserInputError(f"cannot import module {target!r}: {exc}", key="--rule") from None
        origin = "module"
    if not hasattr(module, attr):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise UserInputError(f"{target} defines no {attr!r}", file=target if origin == "file" else None,
                             key="--rule", expected="one of " + (", ".join(defined) or "(no callables)"))
    return _from_factory(getattr(module, attr), spec, origin, spec)


def _load_file(path: Path):
    if not path.is_file():
        raise UserInputError("no such rule file", file=str(path), key="--rule", expected="FILE.py:FACTORY")
    # The same file always gets the same module name, so a rule rebuilt in a
    # worker process (tune, compare) is the same module there.
    name = "_imprint_rule_" + hashlib.blake2b(str(path.resolve()).encode(), digest_size=8).hexdigest()
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserInputError("not a Python file", file=str(path), key="--rule")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UserInputError(f"syntax error: {exc.msg}", file=str(path), line=exc.lineno, key="--rule") from None
    except USER_FAILURES as exc:    # sys.exit at import included: the file's mistake
        raise UserInputError(f"the rule file failed while loading: {type(exc).__name__}: {exc}", file=str(path),
                             key="--rule") from None
    sys.modules[name] = module
    return module


def param_key(key: str, name: str) -> str:
    """How an error names parameter `name` given under `key`: `--param
    threshold`, or `loop.stop_rule_params.threshold` where `key` ends in a dot."""
    return key + name if key.endswith(".") else f"{key} {name}"


def convert(info: RuleInfo, name: str, value: Any, key: str = "--param", *, file: str | None = None,
            line: int | None = None) -> Any:
    """`value` (text from the command line, or a TOML or YAML value) as
    parameter `name` of `info`, of its type (`params.convert`, the one
    converter); UserInputError naming the key, and the file and line when given."""
    if name not in info.params:
        if info.open_params:
            return value
        raise UserInputError(f"rule {info.name!r} has no parameter {name!r}", file=file, line=line,
                             key=param_key(key, name),
                             expected="one of " + (", ".join(info.params) or "(no parameters)"))
    typ = info.types.get(name) or typed.type_of_default(info.params[name])
    try:
        return typed.convert(value, typ)
    except typed.ParamError as exc:
        default = info.params[name]
        raise UserInputError(f"{name}: {exc.message}", file=file, line=line, key=param_key(key, name),
                             expected=exc.expected + (f", like the default {typed.show(default)}"
                                                      if default is not None else "")) from None


def build(spec: str | RuleInfo, params: Mapping[str, Any] | None = None, key: str = "--param", *,
          defaults: Mapping[str, Any] | None = None, file: str | None = None,
          lines: Mapping[str, int | None] | None = None) -> Rule:
    """The rule `spec` names, built with `params` (checked and converted),
    and each of `defaults` that it takes and `params` does not give (the
    loop's patience and novelty config, for the record's rule and rules
    built on it)."""
    info = resolve(spec) if isinstance(spec, str) else spec
    params = dict(params or {})
    for name, value in (defaults or {}).items():
        if name in info.params:
            params.setdefault(name, value)
    lines = lines or {}
    kwargs = {n: convert(info, n, v, key, file=file, line=lines.get(n)) for n, v in params.items()}
    where = next((lines[n] for n in params if lines.get(n)), None)
    # A user's rule runs behind one boundary (guard.py): what it raises is their mistake, named, exit 2.
    own = info.origin != "built-in"
    files = user_files(info.factory, info.spec) if own else set()
    try:
        made = call_factory(info.factory, kwargs, info.spec or info.name, files) if own else info.factory(**kwargs)
    except UserInputError:
        raise
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"rule {info.name!r}: {exc}", key=key.rstrip("."), file=file, line=where,
                             expected="parameters " + (", ".join(f"{k}={v!r}" for k, v in info.params.items())
                                                       or "(none)")) from None
    try:
        rule = as_rule(made, info.name)
    except TypeError as exc:
        raise UserInputError(f"rule {info.name!r}: its factory returned {exc}", key="--rule", file=file,
                             expected="an object with observe(round) and reset()") from None
    return Guarded(rule, info.spec or info.name, files) if own else rule


def parse_params(items: list[str] | None, key: str = "--param") -> dict[str, str]:
    """`name=value` items (repeatable `--param`) as a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserInputError(f"{item!r} is not name=value", key=key, expected="NAME=VALUE, e.g. threshold=3")
        out[name.strip()] = value
    return out
