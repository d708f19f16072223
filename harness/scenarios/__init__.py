"""Scenario files: the model (`model`), reading them with file:line errors
(`loading`) and their JSON schema (`schema`), simulated tools, the provider a
scenario names, the runner, the verdict against `expect`, recording a remote
scenario's cassette, the fault matrix, and scenario files as pytest items."""
from .loading import load_scenario, parse_scenario, scenario_files
from .model import Scenario
from .schema import json_schema, json_schema_text

__all__ = ["Scenario", "json_schema", "json_schema_text", "load_scenario", "parse_scenario", "scenario_files"]
