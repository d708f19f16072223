"""The `pytest11` entry point's name; the plugin lives with the scenarios.
It also offers `harness.testing` as the fixture `imprint_stops`, for a
team's own assertions about where a stop rule stops a run."""
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
