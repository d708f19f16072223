"""The evaluation harness and simulation testbed around imprint_core.

    scenarios/  scenario files run on the virtual clock, judged against `expect`
    realruns/   real runs of other agents as round logs, labels, replay
    live/       the local model folder, real servers, vcrpy cassettes
    analysis/   traces and round logs as DataFrames: report, tune, gate
    cli/        `imprint` and its commands

Its packages are the `harness` extra (`pip install 'imprint-testbed[harness]'`).
The names below are imported when first used, so that importing a module of
the package (pytest's entry point, `harness.pytest_plugin`) does not need
them all.
"""
from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"ReplayResult": ".realruns.roundlogs", "RoundLog": ".realruns.roundlogs",
          "read_round_log": ".realruns.roundlogs", "replay": ".realruns.roundlogs",
          "Scenario": ".scenarios", "load_scenario": ".scenarios", "parse_scenario": ".scenarios",
          "ScenarioRun": ".scenarios.runner", "run_scenario": ".scenarios.runner"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
