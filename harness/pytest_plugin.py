"""The `pytest11` entry point's name; the plugin lives with the scenarios.

pytest loads this plugin wherever the package is installed, the core alone
too (`pip install imprint-testbed` without the `harness` extra): there,
without the scenario model's packages, it adds nothing rather than stop
pytest from starting.

It also offers `harness.testing` as the fixture `imprint_stops`, for a
team's own assertions about where a stop rule stops a run."""
from importlib.util import find_spec

HARNESS_INSTALLED = all(find_spec(name) is not None for name in ("pydantic", "yaml"))
"""Whether the `harness` extra's scenario packages are there."""

if HARNESS_INSTALLED:
    import pytest

    from .scenarios.pytest_plugin import (ScenarioFailed, ScenarioFile, ScenarioItem, pytest_collect_file,
                                          pytest_report_collectionfinish)

    @pytest.fixture()
    def imprint_stops():
        """`harness.testing`: `imprint_stops.assert_stops(run, "record", not_before=12)`."""
        from . import testing
        return testing

    __all__ = ["ScenarioFailed", "ScenarioFile", "ScenarioItem", "imprint_stops", "pytest_collect_file",
               "pytest_report_collectionfinish"]
