"""The evaluation harness and simulation testbed around imprint_core.

    scenarios/  scenario files run on the virtual clock, judged against `expect`
    realruns/   real runs of other agents as round logs, labels, replay
    live/       the local model folder, real servers, vcrpy cassettes
    analysis/   traces and round logs as DataFrames: report, tune, gate
    cli/        `imprint` and its commands
"""
from .realruns.roundlogs import ReplayResult, RoundLog, read_round_log, replay
from .scenarios import Scenario, load_scenario, parse_scenario
from .scenarios.runner import ScenarioRun, run_scenario

__all__ = ["ReplayResult", "RoundLog", "Scenario", "ScenarioRun", "load_scenario", "parse_scenario",
           "read_round_log", "replay", "run_scenario"]
