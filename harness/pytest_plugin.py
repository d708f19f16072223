"""The `pytest11` entry point's name; the plugin lives with the scenarios.

pytest loads this plugin wherever the package is installed, the core alone
too (`pip install imprint-testbed` without the `harness` extra): there,
without the scenario model's packages, it adds nothing rather than stop
pytest from starting."""
from importlib.util import find_spec

HARNESS_INSTALLED = all(find_spec(name) is not None for name in ("pydantic", "yaml"))
"""Whether the `harness` extra's scenario packages are there."""

if HARNESS_INSTALLED:
    from .scenarios.pytest_plugin import (ScenarioFailed, ScenarioFile, ScenarioItem, pytest_collect_file,
                                          pytest_report_collectionfinish)

    __all__ = ["ScenarioFailed", "ScenarioFile", "ScenarioItem", "pytest_collect_file",
               "pytest_report_collectionfinish"]
