"""A scenario wired to its provider, tools and clock; the trace; the verdict."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from imprint_core.clock import MonotonicClock, VirtualClock
from imprint_core.errors import ImprintError, UserInputError
from imprint_core.loop import LoopConfig, ResearchLoop, ResearchResult
from imprint_core.settings import ResearchSettings
from imprint_core.stoprules.guard import RuleFailed
from imprint_core.events import Event, RunError
from imprint_core.trace import EventLog, TraceWriter
from imprint_core.types import CancelToken, Clock, Provider

from .expectations import Failure, check
from .model import Scenario
from .providers import provider_session
from .simtools import build_tools


@dataclass
class ScenarioRun:
    scenario: Scenario
    trace_path: Path | None = None
    result: ResearchResult | None = None
    failures: list[Failure] = field(default_factory=list)
    error: str | None = None     # the run could not complete
    wall_seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures

    def row(self) -> dict[str, Any]:
        r = self.result
        return {
            "scenario": self.scenario.name, "file": self.scenario.source,
            "stop_reason": r.stop_reason.value if r else None, "final_mode": r.final_mode.value if r else None,
            "rounds": r.rounds if r else None, "requests": r.research_requests if r else None,
            "reserved": r.reserved if r else None, "charged": r.charged if r else None,
            "refunded": r.refunded if r else None, "passed": self.passed,
            "failures": [str(f) for f in self.failures] + ([self.error] if self.error else []),
            "trace": str(self.trace_path) if self.trace_path else None,
        }


def _cancel_token(scn: Scenario, clock: Clock, trace: TraceWriter) -> CancelToken:
    spec = scn.cancel
    if spec is None:
        return CancelToken(clock)
    if spec.at is not None:
        return CancelToken(clock, at=spec.at)
    token = CancelToken(clock)
    seen = [0]

    def watch(event: Event) -> None:
        if event.TYPE != spec.on_event:
            return
        line = event.to_dict()
        if all(str(line.get(k)) == str(v) for k, v in spec.where.items()):
            seen[0] += 1
            if seen[0] == spec.count:
                token.cancel()
    trace.subscribe(watch)
    return token


def loop_config(scn: Scenario) -> LoopConfig:
    return scn.loop.config(scn.policy)


def run_scenario(scn: Scenario, trace_path: str | Path | None = None, *, run_id: str | None = None,
                 provider: Provider | None = None, clock: Clock | None = None,
                 on_answer: Callable | None = None) -> ScenarioRun:
    """Run one scenario; never raises for what the scenario or provider does.
    Settings are the defaults plus the scenario's overrides: a scenario must
    not depend on the user's config file or environment."""
    started = time.perf_counter()
    run = ScenarioRun(scn, Path(trace_path) if trace_path else None)
    clock = clock or (VirtualClock() if scn.clock == "virtual" else MonotonicClock())
    settings = ResearchSettings.from_mapping(scn.settings, source=scn.source)
    meta = {"scenario": scn.name, "file": scn.source, "run_id": run_id, "provider_kind": scn.provider.kind,
            "clock": scn.clock}
    trace = TraceWriter(trace_path, clock, meta=meta)
    log = EventLog(trace)
    try:
        with contextlib.nullcontext(provider) if provider is not None else provider_session(scn, clock) as model:
            loop = ResearchLoop(model, build_tools(scn), settings, clock=clock, config=loop_config(scn), trace=trace,
                                cancel=_cancel_token(scn, clock, trace), on_answer=on_answer)
            run.result = loop.run(scn.question)
        run.failures = check(scn.expect, run.result, [e.to_dict() for e in log.events])
    except RuleFailed as exc:    # a user's rule raised (stoprules/guard.py): say in which scenario
        raise exc.in_run(f"{scn.name} ({scn.source})" if scn.source else scn.name) from None
    except UserInputError:
        raise
    except ImprintError as exc:  # a script that ran out, for instance: the scenario is wrong, not the loop
        run.error = f"{type(exc).__name__}: {exc}"
        trace.write(RunError(error=run.error))
    finally:
        trace.close()
        run.wall_seconds = time.perf_counter() - started
    return run
