"""Record a `provider: remote` scenario against a live server into its
cassette (`imprint record`), and `--pin` its `expect` to what the recording
did. Replaying a cassette is `providers.replay_provider`."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from imprint_core.clock import MonotonicClock, VirtualClock
from imprint_core.errors import UserInputError

from ..live import recording
from .loading import parse_scenario
from .model import RemoteProviderSpec, Scenario
from .providers import cassette_path, make_provider
from .runner import run_scenario


RECORD_TIMEOUT_SEC = 900.0


def record(scn: Scenario, *, server: str, base_url: str | None = None,
           progress=lambda m: print(m, file=sys.stderr)):
    """Record one scenario against a live server; its trace goes beside the
    cassette. Returns the ScenarioRun."""
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
        clock = VirtualClock() if scn.clock == "virtual" else MonotonicClock()
        provider = make_provider(scn, clock, target)
        # A CPU server on a loaded machine can take minutes for one reply: its
        # slowness must not be recorded as a timeout fault (the wait is wall
        # time, which a session on the virtual clock never sees in replay).
        provider.request_timeout = RECORD_TIMEOUT_SEC
        if isinstance(clock, VirtualClock):
            provider.deadline_bounds_timeout = False
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
    from imprint_core.files import atomic_write_text
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
