"""Assertions about where a stop rule stops a run, for a team's own test
suite (pytest or any other): "this run must not be stopped before round N
under rule R", "rule R stops this loop at round M".

A run is any file `imprint replay` reads: one of our traces, a round log
(`imprint-rounds/1`, plain or `.jsonl.gz`), or another agent's raw
trajectory in a format `imprint import` reads (converted in memory). The
rule is named as on the command line (`record`, `gemini-cli`,
`FILE.py:FACTORY`, `any[rules=record,gemini-cli]`) with its parameters as a
mapping; the run goes through the one replay road that `imprint replay`,
`imprint check` and the tuner take (`realruns.roundlogs.replay`, the rule
built by `imprint_core.stoprules.choice.choose`, reset at each reply), so an
assertion here agrees with what they print.

    >>> from harness.testing import assert_stops, stop_round
    >>> stop_round("tests/fixtures/testing/loop.jsonl", "gemini-cli", {"threshold": 3})
    5
    >>> assert_stops("tests/fixtures/testing/useful.jsonl", "record", {"patience": 4}, not_before=12).stop_round
    >>> assert_stops("tests/fixtures/testing/loop.jsonl", "record", {"patience": 4}, not_before=8)
    Traceback (most recent call last):
    ...
    harness.testing.StopAssertionError: tests/fixtures/testing/loop.jsonl under record, patience=4: stopped at round 7 of 16 (4 consecutive rounds without new evidence); expected no stop before round 8

(The paths are relative to the root of this checkout, where the
README's example and `tests/harness/test_testing.py` run them.) In a
pytest suite the plugin that `pip install` registers also offers them as
the fixture `imprint_stops` (this module).

Failures raise `StopAssertionError` (an `AssertionError`, so pytest shows
it as a failed assertion) naming the run, the rule, where it stopped and
why. A file that is not a run, or a rule that cannot be built, raises
`imprint_core.errors.UserInputError` naming the file and key.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["StopAssertionError", "Stop", "replay_stop", "stop_round", "assert_stops"]


class StopAssertionError(AssertionError):
    """Where a rule stopped a run is not where the test said it must."""


@dataclass(frozen=True)
class Stop:
    """What a rule did with a run: the round it stopped at (None: it never
    stopped), its reason in the rule's words, and the run's rounds."""
    run: str
    rule: str
    stop_round: int | None
    reason: str | None
    rounds: int

    def describe(self) -> str:
        where = (f"stopped at round {self.stop_round} of {self.rounds}" + (f" ({self.reason})" if self.reason else "")
                 if self.stop_round is not None else f"never stopped in its {self.rounds} round(s)")
        return f"{self.run} under {self.rule}: {where}"


def replay_stop(run: str | Path, rule: str = "record", params: Mapping[str, Any] | None = None, *,
                user_turns: str = "reset") -> Stop:
    """`run` replayed through `rule` with `params`, as `imprint replay --rule
    RULE --param NAME=VALUE` replays it. A file holding several runs (a
    tau-bench results file) is refused: name one run's file."""
    from imprint_core.errors import UserInputError
    from imprint_core.stoprules.choice import choose

    from .realruns.roundlogs import replay
    from .realruns.runfiles import load_runs

    if user_turns not in ("reset", "ignore"):
        raise UserInputError(f"{user_turns!r}", key="user_turns", expected="'reset' or 'ignore'")
    choice = choose(rule, dict(params or {}), key="params")
    runs, _ = load_runs([run])
    if len(runs) != 1:
        raise UserInputError(f"{len(runs)} runs in it", file=str(run),
                             expected="one run (a trace, a round log, or one run's raw trajectory)")
    result = replay(runs[0].log, choice, user_turns)
    return Stop(str(run), choice.describe(), result.stop_round, result.detail, result.rounds)


def stop_round(run: str | Path, rule: str = "record", params: Mapping[str, Any] | None = None, *,
               user_turns: str = "reset") -> int | None:
    """The round at which `rule` stops `run` (None: it never stops it)."""
    return replay_stop(run, rule, params, user_turns=user_turns).stop_round


def assert_stops(run: str | Path, rule: str = "record", params: Mapping[str, Any] | None = None, *,
                 at_round: int | None = None, not_before: int | None = None, never: bool = False,
                 user_turns: str = "reset") -> Stop:
    """Assert where `rule` stops `run`, and return the `Stop`.

    `at_round=N`: it stops exactly at round N. `not_before=N`: it does not
    stop before round N (a stop at N or later, or none, passes: the run was
    useful until N). `never=True`: it does not stop at all. With none of
    them: it stops somewhere."""
    if never and (at_round is not None or not_before is not None):
        raise TypeError("assert_stops: never=True cannot be combined with at_round or not_before")
    got = replay_stop(run, rule, params, user_turns=user_turns)
    s = got.stop_round
    if never and s is not None:
        raise StopAssertionError(f"{got.describe()}; expected no stop")
    if at_round is not None and s != at_round:
        raise StopAssertionError(f"{got.describe()}; expected a stop at round {at_round}")
    if not_before is not None and s is not None and s < not_before:
        raise StopAssertionError(f"{got.describe()}; expected no stop before round {not_before}")
    if not never and at_round is None and not_before is None and s is None:
        raise StopAssertionError(f"{got.describe()}; expected a stop")
    return got
