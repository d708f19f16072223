"""One exception root. Budget errors are typed; user mistakes are separate."""
from __future__ import annotations

import re
import sys


class ImprintError(Exception):
    """Root of every error this project raises on purpose."""


class BudgetExceeded(ImprintError):
    """A fixed limit would be passed; the message quotes limit and value."""


class TokenBudgetExceeded(BudgetExceeded):
    def __init__(self, *, limit: int, used: int, requested: int):
        self.limit, self.used, self.requested = limit, used, requested
        super().__init__(
            f"token budget: reserving {requested} tokens would bring reservations to "
            f"{used + requested}, over the limit of {limit} ({limit - used} left)"
        )


class ProviderError(ImprintError):
    """A model request failed. `processed` says whether the provider may have
    processed the prompt (it is then charged); `retryable` and `retry_after`
    drive the loop's retries."""

    def __init__(self, kind: str, message: str, *, processed: bool = True,
                 retryable: bool = False, retry_after: float | None = None,
                 status: int | None = None):
        self.kind, self.processed, self.retryable = kind, processed, retryable
        self.retry_after, self.status = retry_after, status
        super().__init__(f"{kind}: {message}")


class ScriptExhausted(ImprintError):
    """The scripted provider was asked for a turn its script does not have."""


class ToolAbandoned(ImprintError):
    """A background read stopped at the deadline or on cancellation."""


class UserInputError(ImprintError):
    """A mistake in something a person wrote: a setting, a scenario, a log.

    `where` names the file (and line) and `key` the offending key, so the CLI
    can print one clear line instead of a traceback."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 key: str | None = None, expected: str | None = None):
        self.file, self.line, self.key, self.expected = file, line, key, expected
        self.message = message
        super().__init__(self.describe())

    @classmethod
    def from_os_error(cls, exc: OSError, *, doing: str, key: str | None = None, expected: str | None = None,
                      file: str | None = None) -> "UserInputError":
        """A file system refusal (a file where a folder should be, a folder
        that cannot be written) as a mistake in the input it names."""
        what = ("a file stands where a folder should be" if isinstance(exc, (FileExistsError, NotADirectoryError))
                else exc.strerror or str(exc) or type(exc).__name__)
        return cls(f"cannot {doing}: {what}", file=str(exc.filename) if exc.filename else file, key=key,
                   expected=expected)

    def describe(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        key = f"{self.key}: " if self.key else ""
        exp = f" (expected {self.expected})" if self.expected else ""
        return f"{where}{key}{self.message}{exp}"


class UserInputErrors(UserInputError):
    """Several mistakes in one input, all said at once (a scenario file with
    four typos takes one run to fix, not five). Its own file, line and key are
    the first problem's; `problems` holds each, and `describe()` names every
    one with its file, line and key, a line each."""

    def __init__(self, problems: "list[UserInputError]"):
        self.problems = list(problems)
        first = self.problems[0]
        super().__init__(first.message, file=first.file, line=first.line, key=first.key, expected=first.expected)

    def describe(self) -> str:
        files = {p.file for p in self.problems}
        where = f" in {next(iter(files))}" if len(files) == 1 and None not in files else ""
        return f"{len(self.problems)} problems{where}:\n" + "\n".join("  " + p.describe() for p in self.problems)


def digits_exceeded(exc: BaseException) -> bool:
    """Whether `exc` is Python's refusal of an integer written with more
    digits than `sys.get_int_max_str_digits()` (a plain ValueError, from
    int(), json, tomllib and PyYAML alike): a mistake in the input."""
    return (isinstance(exc, ValueError) and type(exc).__name__ != "JSONDecodeError"
            and str(exc).startswith("Exceeds the limit (") and "integer string conversion" in str(exc))


def too_many_digits() -> str:
    """The one wording of an integer past Python's digit limit."""
    return f"an integer of more than {sys.get_int_max_str_digits():,} digits, more than Python reads"


def long_number_line(text: str) -> int | None:
    """The line of the first integer in `text` past Python's digit limit."""
    limit = sys.get_int_max_str_digits()
    m = re.search(rf"[0-9]{{{limit + 1},}}", text) if limit else None
    return text.count("\n", 0, m.start()) + 1 if m else None


class SettingsError(UserInputError):
    pass


class ModelUnavailable(UserInputError):
    """A local model folder that is missing or cannot be loaded."""


class CountingUnavailable(ImprintError):
    """A token counter could not count this request (a tokenize call failed,
    no calibration yet for this kind of request). The caller falls back to
    the next counter and traces why."""
