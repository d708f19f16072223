"""Scenarios with `provider: remote`: replay from a cassette, or record one
against a live server (`imprint record`).

A recorded session runs on the virtual clock, so a replay is exact: the
clock moves only by the tools' simulated durations and the scenario's
`chunk_delay` per stream chunk, the same while recording and replaying."""
from __future__ import annotations

import argparse
import contextlib
import re
import sys
from pathlib import Path
from typing import Iterator

from imprint_core.clock import VirtualClock
from imprint_core.counting import ByteEstimateCounter
from imprint_core.errors import UserInputError
from imprint_core.providers.remote import RemoteProvider
from imprint_core.types import Clock

from . import recording
from .scenario import RemoteProviderSpec, Scenario, load_scenario, parse_scenario

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


_TOP_KEY = re.compile(r"^[^\s#][^:]*:")  # a top-level key: the line that ends a block


def recorded_expect(trace_path: Path) -> dict:
    """What `--pin` writes into `expect`: the expectations a recording meets
    exactly, its run_end figures and the event counts a reader checks first."""
    from imprint_core.trace import read_trace
    trace = read_trace(trace_path)
    ends = trace.of_type("run_end")
    if not ends:
        raise UserInputError(f"the recorded trace {trace_path} has no run_end: the session did not finish")
    end = ends[-1]
    settled = trace.of_type("request_settled")
    events = {"request_settled[outcome=error]": sum(e.outcome == "error" for e in settled),
              "request_settled[outcome=cut]": sum(e.outcome == "cut" for e in settled),
              "final_settled": len(trace.of_type("final_settled")),
              "tool_call": len(trace.of_type("tool_call"))}
    if trace.of_type("empty_reply"):
        events["empty_reply"] = len(trace.of_type("empty_reply"))
    keys = ("stop_reason", "final_mode", "rounds", "requests", "reserved", "charged", "refunded")
    return {k: getattr(end, k) for k in keys} | {"events": events}


def pin_expect(path: Path, pinned: dict) -> None:
    """Rewrite the top-level `expect:` block of a scenario file with
    `pinned` (merged over the keys it already has), leaving every other line
    as it was; the file is replaced atomically and only if it still loads."""
    import yaml
    from imprint_core.settings import atomic_write_text
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^expect\s*:", line)), None)
    if start is None:
        start = end = len(lines)
        old: dict = {}
    else:
        end = next((j for j in range(start + 1, len(lines)) if _TOP_KEY.match(lines[j])), len(lines))
        old = (yaml.safe_load("".join(lines[start:end])) or {}).get("expect") or {}
    merged = {**old, **pinned, "events": {**(old.get("events") or {}), **pinned["events"]}}
    block = yaml.safe_dump({"expect": merged}, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if lines[:start] and not lines[start - 1].endswith("\n"):
        lines[start - 1] += "\n"
    text = "".join(lines[:start]) + block + "".join(lines[end:])
    parse_scenario(text, str(path))  # never write a scenario that no longer loads
    atomic_write_text(path, text)


def cli_record(args: argparse.Namespace) -> int:
    from .scenario import scenario_files
    scenarios = [load_scenario(f) for f in scenario_files(args.scenarios)]
    failed = 0
    for scn in scenarios:
        run = record(scn, server=args.server, base_url=args.url)
        if getattr(args, "pin", False) and run.error is None and scn.source:
            from .runner import run_scenario
            pin_expect(Path(scn.source), recorded_expect(cassette_path(scn).with_suffix(".trace.jsonl")))
            scn = load_scenario(scn.source)
            run = run_scenario(scn)  # the replay of the new cassette must meet what was pinned
            print(f"{scn.source}: expect pinned to the recording; offline replay "
                  f"{'passes' if run.passed else 'FAILS'}", file=sys.stderr)
        r = run.result
        verdict = "pass" if run.passed else "FAIL " + "; ".join([str(f) for f in run.failures] +
                                                              ([run.error] if run.error else []))
        print(f"{scn.name}: {r.stop_reason.value if r else '-'} / {r.final_mode.value if r else '-'}, "
              f"{r.rounds if r else '-'} rounds, {r.research_requests if r else '-'} requests -> "
              f"{cassette_path(scn).relative_to(REPO_ROOT)}: {verdict}")
        failed += not run.passed
    return 1 if failed else 0
