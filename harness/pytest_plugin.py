"""The `pytest11` entry point's name; the plugin lives with the scenarios."""
from .scenarios.pytest_plugin import (ScenarioFailed, ScenarioFile, ScenarioItem, pytest_collect_file,
                                      pytest_report_collectionfinish)

__all__ = ["ScenarioFailed", "ScenarioFile", "ScenarioItem", "pytest_collect_file", "pytest_report_collectionfinish"]
