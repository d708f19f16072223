"""What a stop rule sees and answers: the public shape a user's rule is written against.

A stop rule is built by a factory, `make(**params) -> rule`, and then:

- `rule.observe(round)` once per round, in order: `None` to go on, or a
  reason (a short string) to stop research;
- `rule.reset()` at the start of a new reply (a user turn), as the loop
  starts each reply with fresh patience and a fresh novelty store.

`round` is a `RoundView`: `.index` (1-based, within the run), `.kind`
(`read`, `write`, `ask`, or `error` for a coordinator turn that failed or
brought neither text nor calls) and `.calls`, each a `CallView` with `.tool`,
`.args` (a dict, read-only: every rule sees the same), `.kind`, `.status` (`ok`, `empty`, `error`, or
`not_executed` for a call the deadline suppressed) and `.result` (the text).

The loop and every replay of a round log hand the rule the same views, so
the rule judged on recorded runs is the code that runs live. Budgets (time,
token reservations) are not a rule's business: they hold under every rule,
and a rule can only add stops.
"""
from __future__ import annotations

import functools
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

from ..rounds import RoundKind, classify_round

ROUND_KINDS: tuple[str, ...] = typing.get_args(RoundKind)


def _read_only(self, *args: Any, **kwargs: Any) -> None:
    raise TypeError("a stop rule sees a call's arguments read-only: every rule is handed the same ones, so a "
                    "change would reach the others (copy them to change them: dict(call.args))")


class FrozenDict(dict):
    """A dict that cannot be changed: the arguments every rule is handed.
    A dict still (json.dumps, isinstance(..., dict) and equality as before)."""
    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only  # type: ignore

    def __reduce__(self):
        return FrozenDict, (dict(self),)

    def __copy__(self) -> "FrozenDict":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenDict":
        return self


class FrozenList(list):
    """A list that cannot be changed (inside frozen arguments)."""
    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = remove = pop = clear = sort = reverse = \
        __iadd__ = __imul__ = _read_only  # type: ignore

    def __reduce__(self):
        return FrozenList, (list(self),)

    def __copy__(self) -> "FrozenList":
        return self

    def __deepcopy__(self, memo: dict) -> "FrozenList":
        return self


def frozen(value: Any) -> Any:
    """`value` with every dict and list in it read-only (recursively)."""
    if isinstance(value, (FrozenDict, FrozenList)):
        return value
    if isinstance(value, dict):
        if any(isinstance(v, (dict, list)) for v in value.values()):
            return FrozenDict((k, frozen(v)) for k, v in value.items())
        return FrozenDict(value)     # flat, as most arguments are: one copy
    if isinstance(value, list):
        return FrozenList(frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class CallView:
    tool: str
    args: dict[str, Any]
    kind: str                      # read | write | ask
    status: str                    # ok | empty | error | not_executed
    result: str
    segments: tuple[str, ...] | None = None   # evidence units, where the tool gave them

    def __post_init__(self) -> None:
        # Every rule (compare's, the loop's `any`) is handed the same arguments:
        # read-only, so that one rule cannot change what another sees.
        if type(self.args) is not FrozenDict:
            object.__setattr__(self, "args", frozen(self.args))

    @functools.cached_property
    def action(self) -> str:
        """The call's identity for repetition rules: tool and arguments, as
        Gemini CLI keys a call (name, then the arguments' JSON in their order);
        made once, for every rule shown the same view."""
        return self.tool + ":" + json.dumps(self.args, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class RoundView:
    index: int
    kind: str
    calls: tuple[CallView, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, index: int, calls: Iterable[CallView], kind: str | None = None) -> "RoundView":
        """A round of `calls`; its kind as the record defines it
        (`rounds.classify_round`) unless given."""
        calls = tuple(calls)
        if kind is None:
            kind, _ = classify_round(((c.kind, c.status) for c in calls), novelty_progress=False)
        return cls(index, kind, calls)


@runtime_checkable
class StopRule(Protocol):
    """The protocol a user's rule implements (see the module docstring)."""

    def observe(self, round: RoundView) -> str | None: ...

    def reset(self) -> None: ...


class Rule:
    """A convenience base for rules. Besides the protocol it offers `notes()`:
    what the rule wants written beside each round in the trace (the record's
    rule: its novelty verdicts and patience counter). A rule that does not
    subclass it is adapted (`as_rule`) with no notes."""

    name = ""

    def observe(self, round: RoundView) -> str | None:
        raise NotImplementedError

    def reset(self) -> None:
        pass

    def notes(self) -> dict[str, Any]:
        """Figures of the last observed round, for the trace; {} by default."""
        return {}


class _Adapted(Rule):
    def __init__(self, inner: StopRule, name: str):
        self.inner, self.name = inner, name

    def observe(self, round: RoundView) -> str | None:
        return self.inner.observe(round)

    def reset(self) -> None:
        self.inner.reset()


def as_rule(obj: Any, name: str = "") -> Rule:
    """`obj` as a `Rule`: itself when it is one, else wrapped, so the loop
    and replays call `notes()` on every rule alike. Raises TypeError when
    `obj` lacks `observe` or `reset`."""
    if isinstance(obj, Rule):
        if name and not obj.name:
            obj.name = name
        return obj
    if not isinstance(obj, StopRule):
        raise TypeError(f"{type(obj).__name__} is not a stop rule: it needs observe(round) and reset()")
    return _Adapted(obj, name)


def calls_of(round: RoundView, kinds: Sequence[str] | None = None) -> list[CallView]:
    """The calls a rule judges: those that ran (not suppressed by a deadline),
    optionally of some kinds only."""
    return [c for c in round.calls if c.status != "not_executed" and (kinds is None or c.kind in kinds)]
