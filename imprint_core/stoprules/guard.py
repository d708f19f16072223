"""The one boundary where a user's stop rule runs: its factory, `observe`
and `reset`.

Whatever a user's rule raises there (an exception, `sys.exit`; not
KeyboardInterrupt, which stays the person's own) is their mistake, not
ours: it becomes `RuleFailed`, a `UserInputError` (exit 2) naming the rule
(`file:factory`), the round, the run (added by whoever iterates runs, with
`RuleFailed.in_run`) and the last frame of the traceback in the rule's own
code. Built-in rules are not guarded: their exceptions are our bugs.
"""
from __future__ import annotations

import inspect
import linecache
import traceback
from pathlib import Path
from typing import Any, Callable

from ..errors import UserInputError
from .protocol import RoundView, Rule

USER_FAILURES = (Exception, SystemExit)   # KeyboardInterrupt and GeneratorExit pass through


class RuleFailed(UserInputError):
    """A user's stop rule raised. `file` and `line` are its last frame in the
    rule's own code; the message names the rule, the call, the round and,
    once known, the run."""

    def __init__(self, message: str = "", *, rule: str = "", call: str = "", round: int | None = None,
                 run: str | None = None, error: str = "", code: str = "", file: str | None = None,
                 line: int | None = None):
        self.rule, self.call, self.round, self.run, self.error, self.code = rule, call, round, run, error, code
        super().__init__(message or self._words(), file=file, line=line)

    def _words(self) -> str:
        where = ", ".join(w for w in (f"run {self.run}" if self.run else "",
                                      f"round {self.round}" if self.round is not None else "") if w)
        return (f"stop rule {self.rule} raised {self.error} in {self.call}" + (f" ({where})" if where else "")
                + (f": {self.code}" if self.code else ""))

    def in_run(self, run: str) -> "RuleFailed":
        """The same failure, naming the run it happened in (the first one named stays)."""
        if self.run is None:
            self.run = run
            self.message = self._words()
            self.args = (self.describe(),)
        return self

    def __reduce__(self):   # across processes (compare's and tune's workers) with every field
        return (_rebuild, (self.__dict__,))


def _rebuild(fields: dict[str, Any]) -> RuleFailed:
    err = RuleFailed.__new__(RuleFailed)
    err.__dict__.update(fields)
    err.args = (err.describe(),)
    return err


def user_files(factory: Callable[..., Any], spec: str) -> set[str]:
    """The files of a rule's own code: its file (FILE.py:FACTORY) and the one
    that defines the factory."""
    out = set()
    target = spec.rpartition(":")[0]
    if target.endswith(".py"):
        out.add(str(Path(target).resolve()))
    try:
        out.add(str(Path(inspect.getsourcefile(factory) or "").resolve()))
    except TypeError:
        pass
    return out


def _failure(exc: BaseException, rule: str, files: set[str], call: str, round: int | None) -> RuleFailed:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if str(Path(f.filename).resolve()) in files]
    here = str(Path(__file__).resolve())
    frame = own[-1] if own else next((f for f in reversed(frames) if str(Path(f.filename).resolve()) != here), None)
    error = type(exc).__name__ + (f": {exc}" if str(exc) else "")
    if isinstance(exc, SystemExit):
        error = f"SystemExit({exc.code!r})"
    code = ""
    if frame is not None:
        code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
        code = f"{frame.name}: {code}" if code else frame.name
    return RuleFailed(rule=rule, call=call, round=round, error=error, code=code,
                      file=_shown(frame.filename) if frame else None, line=frame.lineno if frame else None)


def _shown(filename: str) -> str:
    """A file as the person would name it: relative to the current folder where it is below it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename


def call_factory(factory: Callable[..., Any], kwargs: dict[str, Any], rule: str, files: set[str]) -> Any:
    """`factory(**kwargs)`, its failures as `RuleFailed` (UserInputError and
    the TypeError/ValueError of wrong parameters are the caller's to word)."""
    try:
        return factory(**kwargs)
    except (UserInputError, TypeError, ValueError):
        raise
    except USER_FAILURES as exc:
        raise _failure(exc, rule, files, "its factory", None) from None


class Guarded(Rule):
    """A user's rule behind the boundary; everything else is the rule's own."""

    def __init__(self, inner: Rule, rule: str, files: set[str]):
        self.inner, self.rule, self.files, self.last = inner, rule, files, None
        self.name = inner.name

    def observe(self, round: RoundView) -> str | None:
        self.last = round.index
        try:
            return self.inner.observe(round)
        except USER_FAILURES as exc:
            raise _failure(exc, self.rule, self.files, "observe", round.index) from None

    def reset(self) -> None:
        try:
            self.inner.reset()
        except USER_FAILURES as exc:
            raise _failure(exc, self.rule, self.files, "reset",
                           None if self.last is None else self.last + 1) from None

    def notes(self) -> dict[str, Any]:
        try:
            return self.inner.notes()
        except USER_FAILURES as exc:
            raise _failure(exc, self.rule, self.files, "notes", self.last) from None

    def __getattr__(self, name: str) -> Any:    # the rule's own attributes (specs, parameters)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
