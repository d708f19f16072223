"""The one place that builds a scenario's provider: the scripted stub from
its turns, the local model, or a remote server replayed from its cassette
(and, while recording, the same remote provider against a live server).

A recorded session runs on the virtual clock, so a replay is exact: the
clock moves only by the tools' simulated durations and the scenario's
`chunk_delay` per stream chunk, the same while recording and replaying."""
from __future__ import annotations

import contextlib
import string
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from imprint_core import providers as core_providers
from imprint_core.errors import ProviderError, UserInputError
from imprint_core.providers.scripted import Chunk, Turn
from imprint_core.types import Clock, Provider, ToolCall

from ..conventions import workdir
from .model import RemoteProviderSpec, Scenario, StubProviderSpec, TurnSpec

if TYPE_CHECKING:
    from imprint_core.providers.remote import RemoteProvider

    from ..live.recording import Target


def _turns(specs: list[TurnSpec] | None) -> list[Turn] | None:
    if specs is None:
        return None
    out: list[Turn] = []
    serial = 0
    for spec in specs:
        for i in range(1, spec.repeat + 1):
            calls = []
            for c in spec.calls:
                serial += 1
                args = {k: string.Template(v).safe_substitute(i=i) if isinstance(v, str) else v
                        for k, v in c.args.items()}
                calls.append(ToolCall(f"call_{serial}", c.tool, args if c.raw_args is None else {},
                                      invalid_arguments=c.raw_args))
            chunks = None
            if spec.chunks is not None:
                chunks = [Chunk(ch.text, ch.delay) for ch in spec.chunks]
            elif spec.answer is not None and spec.chunk_delay:
                words = spec.answer.split(" ")
                chunks = [Chunk(w + (" " if j < len(words) - 1 else ""), spec.chunk_delay) for j, w in enumerate(words)]
            error = None
            if spec.error is not None:
                e = spec.error
                error = ProviderError(e.kind, e.message, processed=e.processed, retryable=e.retryable,
                                      retry_after=e.retry_after)
            out.append(Turn(text=spec.answer or "", tool_calls=calls, chunks=chunks, latency=spec.latency,
                            error=error, usage="auto" if spec.usage == "auto" else None))
    return out


def build_provider(scn: Scenario, clock: Clock) -> Provider:
    """A stub or local scenario's provider (a remote one replays its cassette: `replay_provider`)."""
    spec = scn.provider
    if isinstance(spec, StubProviderSpec):
        return core_providers.build_provider(core_providers.ScriptedSpec(
            _turns(spec.script), workers=_turns(spec.workers), final=_turns(spec.final),
            context_window=spec.context_window, counter=spec.counter,
            bytes_per_token=spec.bytes_per_token), clock=clock)
    if spec.kind == "local":
        from ..live.model_folder import load_local_provider
        return load_local_provider(clock=clock, dtype=spec.dtype, context_window=spec.context_window,
                             tool_choice=spec.tool_choice, temperature=spec.temperature, seed=spec.seed)
    raise UserInputError(f"unknown provider kind {spec.kind!r}", file=scn.source, key="provider.kind")


def checkout_of(scn: Scenario) -> Path:
    """The checkout a scenario belongs to: the folder above its `scenarios/`
    folder, else the current folder; never the installed package's checkout,
    so a second clone replays and records its own cassettes."""
    if scn.source:
        folder = Path(scn.source).resolve().parent
        if folder.name == "scenarios":
            return folder.parent
    return workdir()


def cassette_path(scn: Scenario) -> Path:
    spec = scn.provider
    assert isinstance(spec, RemoteProviderSpec)
    root = checkout_of(scn)
    if spec.cassette:
        return root / spec.cassette
    stem = Path(scn.source).stem if scn.source else scn.name
    return root / "traces" / "cassettes" / spec.server / f"{stem}.yaml"


def make_provider(scn: Scenario, clock: Clock, target: Target) -> RemoteProvider:
    """A remote scenario's provider against `target` (a live server while
    recording, the cassette's URL and model while replaying), with its
    counting, from one call into the core. A scenario never reads the user's
    calibration cache (a session learns from its own measurements only), and
    its exact count comes from the model folder where it is built."""
    from ..live import recording
    spec = scn.provider
    assert isinstance(spec, RemoteProviderSpec)
    return core_providers.build_provider(core_providers.RemoteSpec(
        target.base_url, target.model, spec.server, stream=spec.stream, context_window=spec.context_window,
        bytes_per_token=spec.bytes_per_token, tool_choice=spec.tool_choice, temperature=spec.temperature,
        chunk_delay=spec.chunk_delay, extra_body=dict(spec.extra_body or {}), tokenizer=spec.tokenizer,
        model_folder=_model_folder(spec), transport=recording.transport(), calibration_path=None),
        clock=clock)  # type: ignore[return-value]


def _model_folder(spec: RemoteProviderSpec) -> Path | None:
    """The model folder a scenario's exact count comes from; None where it
    needs none or there is none (the loop then falls back and traces it)."""
    from imprint_core.errors import ModelUnavailable
    from ..live.model_folder import ensure_model_dir
    if spec.tokenizer == "none":
        return None
    try:
        return ensure_model_dir()
    except ModelUnavailable:
        return None


@contextlib.contextmanager
def replay_provider(scn: Scenario, clock: Clock) -> Iterator[RemoteProvider]:
    from ..live import recording
    path = cassette_path(scn)
    key = "provider.cassette"
    if not path.is_file():
        raise UserInputError(f"cassette {path} does not exist; record it with `imprint record {scn.source} "
                             f"--server {scn.provider.server}`", file=scn.source, key=key)  # type: ignore[union-attr]
    try:
        target = recording.cassette_target(path, scn.provider.server)  # type: ignore[union-attr]
    except recording.CassetteError as exc:  # not YAML, no interactions, not a chat completion
        raise UserInputError(f"unusable cassette: {exc}", file=scn.source, key=key) from None
    with recording.cassette(path, mode="none"):
        # Built under the cassette: a counter that asks the server probes it
        # here, as it did while recording.
        provider = make_provider(scn, clock, target)
        try:
            yield provider
        finally:
            provider.close()


@contextlib.contextmanager
def provider_session(scn: Scenario, clock: Clock) -> Iterator[Provider]:
    """The scenario's provider, for the length of one run: a recorded remote
    session replays from its cassette, which must be played exactly."""
    if isinstance(scn.provider, RemoteProviderSpec):
        with replay_provider(scn, clock) as provider:
            yield provider
        return
    # A stub or the local model: neither holds a connection or a file to
    # close (the remote provider, which does, is closed by replay_provider).
    yield build_provider(scn, clock)
