"""A rule choice: one value, a rule and its parameters, however it was named.

The command line (`--rule`, `--param`, `--params`, and the record's
shorthand `--patience`, `--normalization`, `--novelty FIELD=VALUE`), a
scenario (`chat.research_stop_rule` and `loop.stop_rule_params`),
`gate.toml` (`premature_stops`) and the tuner all end in `choose`: the rule
resolved, each parameter typed by the one converter (`imprint_core.params`),
the rule built once so that its own checks speak before any run. Two
spellings of one rule give equal choices, and every replay builds a choice
the same way (`RuleChoice.build`), so they cannot disagree.
"""
from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserInputError
from ..novelty import NoveltyConfig
from ..settings import SPECS
from . import registry
from .protocol import Rule

DEFAULT_RULE = SPECS["chat.research_stop_rule"].default
"""The rule a choice names when none is given: the shipped default."""
RECORD_SHORTHAND = ("patience",) + tuple(f.name for f in dataclasses.fields(NoveltyConfig) if f.init)
"""The record rule's parameters the command line also takes as their own
flags (`--patience`, `--normalization`, `--novelty FIELD=VALUE`)."""


@dataclass(frozen=True, eq=True)
class RuleChoice:
    """A resolved rule (`spec`: what names it, a rule file by a path that
    holds from any folder) and its parameters, typed and read-only."""
    spec: str
    params: Mapping[str, Any] = field(default_factory=lambda: types.MappingProxyType({}))
    info: registry.RuleInfo | None = field(default=None, compare=False, repr=False)

    __hash__ = None  # type: ignore[assignment]  (params is a mapping)

    @property
    def name(self) -> str:
        return self._info().name

    def _info(self) -> registry.RuleInfo:
        return self.info or registry.resolve(self.spec)

    def build(self) -> Rule:
        """A fresh rule (its state at the start of a run)."""
        return registry.build(self._info(), dict(self.params))

    def describe(self) -> str:
        """`record, patience=4` for messages and summaries."""
        shown = [f"{k}={v}" for k, v in self.params.items() if not isinstance(v, NoveltyConfig)]
        cfg = next((v for v in self.params.values() if isinstance(v, NoveltyConfig)), None)
        if cfg is not None and cfg != NoveltyConfig():
            shown += [f"{f.name}={getattr(cfg, f.name)}" for f in dataclasses.fields(cfg)
                      if f.init and getattr(cfg, f.name) != getattr(NoveltyConfig(), f.name)]
        return ", ".join([self.name, *shown])


def choose(spec: str | None = None, params: Mapping[str, Any] | None = None, *,
           defaults: Mapping[str, Any] | None = None, key: str = "--param", file: str | None = None,
           lines: Mapping[str, int | None] | None = None, spec_key: str = "--rule", spec_line: int | None = None,
           base: str | Path | None = None) -> RuleChoice:
    """The choice of rule `spec` (default: the shipped default, DEFAULT_RULE) with `params`.

    `defaults` fill the parameters the rule takes and `params` leave out
    (the loop's patience and novelty config). `file`, `lines` (parameter ->
    line), `spec_line`, `key` and `spec_key` say where the choice was written,
    for errors; a rule file named by a relative path is found from `base`
    (the folder of the file that names it)."""
    spec = registry.anchored(spec or DEFAULT_RULE, base)
    try:
        info = registry.resolve(spec)
    except UserInputError as exc:
        raise _placed(exc, file, spec_line, spec_key) from None
    typed = {n: registry.convert(info, n, v, key, file=file, line=(lines or {}).get(n))
             for n, v in (params or {}).items()}
    for n, v in (defaults or {}).items():
        if n in info.params and n not in typed:
            typed[n] = registry.convert(info, n, v, key, file=file, line=spec_line)
    try:
        registry.build(info, typed, key, file=file, lines={n: (lines or {}).get(n) or spec_line for n in typed})
    except UserInputError as exc:
        raise _placed(exc, file, spec_line, spec_key if exc.key == "--rule" else exc.key) from None
    return RuleChoice(spec, types.MappingProxyType(typed), info)


def _placed(exc: UserInputError, file: str | None, line: int | None, key: str | None) -> UserInputError:
    """`exc` said of where the choice was written (`file`, `line`, `key`)
    rather than of a `--rule` flag nobody gave. A mistake inside a rule file
    keeps that file and line, and says which file named the rule."""
    if file is None:
        return exc
    if exc.file is not None and exc.file != file:
        if Path(exc.file).is_file():
            return UserInputError(exc.message, file=exc.file, line=exc.line,
                                  key=f"{key} (named at {file}:{line})" if line else f"{key} (named in {file})",
                                  expected=exc.expected)
        return UserInputError(f"{exc.message}: {exc.file}", file=file, line=line, key=key, expected=exc.expected)
    return UserInputError(exc.message, file=file, line=exc.line or line, key=key, expected=exc.expected)

