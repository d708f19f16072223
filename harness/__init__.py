"""The evaluation harness and simulation testbed around imprint_core."""
from .rounds import ReplayResult, RoundLog, read_round_log, replay
from .runner import ScenarioRun, run_scenario
from .scenario import Scenario, load_scenario, parse_scenario

__all__ = ["ReplayResult", "RoundLog", "Scenario", "ScenarioRun", "load_scenario", "parse_scenario",
           "read_round_log", "replay", "run_scenario"]
