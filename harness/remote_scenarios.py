"""Scenarios with `provider: remote`: replay from a cassette, or record one
against a live server (`imprint record`).

A recorded session runs on the virtual clock, so a replay is exact: the
clock moves only by the tools' simulated durations and the scenario's
`chunk_delay` per stream chunk, the same while recording and replaying."""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Iterator

from imprint_core.clock import VirtualClock
from imprint_core.counting import ByteEstimateCounter
from imprint_core.errors import UserInputError
from imprint_core.providers.remote import RemoteProvider
from imprint_core.types import Clock

from . import recording
from .scenario import RemoteProviderSpec, Scenario, load_scenario

REPO_ROOT = Path(__file__).resolve().parent.parent


def cassette_path(scn: Scenario) -> Path:
    spec = scn.provider
    assert isinstance(spec, RemoteProviderSpec)
    if spec.cassette:
        return REPO_ROOT / spec.cassette
    stem = Path(scn.source).stem if scn.source else scn.name
    return REPO_ROOT / "traces" / "cassettes" / spec.server / f"{stem}.yaml"


def make_provider(scn: Scenario, clock: Clock, target: recording.Target) -> RemoteProvider:
    spec = scn.provider
    assert isinstance(spec, RemoteProviderSpec)
    on_chunk = None
    if spec.chunk_delay and isinstance(clock, VirtualClock):
        on_chunk = lambda n: clock.sleep(spec.chunk_delay)  # noqa: E731
    tool_choice, extra_body = _tool_choice(spec.tool_choice), dict(spec.extra_body or {})
    if spec.server == "transformers" and tool_choice is not None:
        # transformers serve ignores the `tool_choice` field; the model folder's
        # chat template reads it from the request's chat_template_kwargs instead.
        kwargs = dict(extra_body.get("chat_template_kwargs") or {})
        kwargs.setdefault("tool_choice", tool_choice)
        extra_body["chat_template_kwargs"], tool_choice = kwargs, None
    return RemoteProvider(target.base_url, target.model, clock=clock, stream=spec.stream,
                          transport=recording.transport(), context_window=spec.context_window,
                          counter=ByteEstimateCounter(spec.bytes_per_token), name=f"remote:{spec.server}",
                          temperature=spec.temperature, tool_choice=tool_choice, on_chunk=on_chunk,
                          extra_body=extra_body or None)


def _tool_choice(value: str | None):
    if value is None or value in ("auto", "required", "none"):
        return value
    return {"type": "function", "function": {"name": value}}


@contextlib.contextmanager
def replay_provider(scn: Scenario, clock: Clock) -> Iterator[RemoteProvider]:
    path = cassette_path(scn)
    key = "provider.cassette"
    if not path.is_file():
        raise UserInputError(f"cassette {path} does not exist; record it with `imprint record {scn.source} "
                             f"--server {scn.provider.server}`", file=scn.source, key=key)  # type: ignore[union-attr]
    try:
        target = recording.cassette_target(path, scn.provider.server)  # type: ignore[union-attr]
    except recording.CassetteError as exc:  # not YAML, no interactions, not a chat completion
        raise UserInputError(f"unusable cassette: {exc}", file=scn.source, key=key) from None
    provider = make_provider(scn, clock, target)
    try:
        with recording.cassette(path, mode="none"):
            yield provider
    finally:
        provider.close()


def record(scn: Scenario, *, server: str, base_url: str | None = None,
           progress=lambda m: print(m, file=sys.stderr)):
    """Record one scenario against a live server; its trace goes beside the
    cassette. Returns the ScenarioRun."""
    from .runner import run_scenario
    spec = scn.provider
    if not isinstance(spec, RemoteProviderSpec):
        raise UserInputError("only scenarios with provider kind remote can be recorded", file=scn.source,
                             key="provider.kind", expected="remote")
    if spec.server != server:
        raise UserInputError(f"the scenario is for server {spec.server!r}, not {server!r}", file=scn.source,
                             key="provider.server", expected=server)
    path = cassette_path(scn)
    trace = path.with_suffix(".trace.jsonl")
    work_trace = trace.with_name(trace.name + ".recording")

    def session(target: recording.Target):
        clock = VirtualClock() if scn.clock == "virtual" else None
        from imprint_core.clock import MonotonicClock
        clock = clock or MonotonicClock()
        provider = make_provider(scn, clock, target)
        try:
            return run_scenario(scn, work_trace, provider=provider, clock=clock)
        finally:
            provider.close()

    try:
        rec = recording.record_session(path, server, session, base_url=base_url, progress=progress)
    except BaseException:
        work_trace.unlink(missing_ok=True)
        raise
    work_trace.replace(trace)
    return rec.result


def cli_record(args: argparse.Namespace) -> int:
    from .scenario import scenario_files
    scenarios = [load_scenario(f) for f in scenario_files(args.scenarios)]
    failed = 0
    for scn in scenarios:
        run = record(scn, server=args.server, base_url=args.url)
        r = run.result
        verdict = "pass" if run.passed else "FAIL " + "; ".join([str(f) for f in run.failures] +
                                                              ([run.error] if run.error else []))
        print(f"{scn.name}: {r.stop_reason.value if r else '-'} / {r.final_mode.value if r else '-'}, "
              f"{r.rounds if r else '-'} rounds, {r.research_requests if r else '-'} requests -> "
              f"{cassette_path(scn).relative_to(REPO_ROOT)}: {verdict}")
        failed += not run.passed
    return 1 if failed else 0
