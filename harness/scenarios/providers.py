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

from imprint_core.calibration import CalibratedCounter, CalibrationStore
from imprint_core.clock import VirtualClock
from imprint_core.counting import ByteEstimateCounter, RegexTokenCounter
from imprint_core.errors import ProviderError, UserInputError
from imprint_core.providers.scripted import Chunk, ScriptedProvider, Turn
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
    spec = scn.provider
    if isinstance(spec, StubProviderSpec):
        counter = RegexTokenCounter() if spec.counter == "exact" else ByteEstimateCounter(spec.bytes_per_token)
        return ScriptedProvider(_turns(spec.script), clock=clock, workers=_turns(spec.workers),
                                final=_turns(spec.final), context_window=spec.context_window, counter=counter)
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
    recording, the cassette's URL and model while replaying)."""
    from imprint_core.providers.remote import RemoteProvider
    from ..live import recording
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
    provider = RemoteProvider(target.base_url, target.model, clock=clock, stream=spec.stream,
                              transport=recording.transport(), context_window=spec.context_window,
                              counter=ByteEstimateCounter(spec.bytes_per_token), name=f"remote:{spec.server}",
                              temperature=spec.temperature, tool_choice=tool_choice, on_chunk=on_chunk,
                              extra_body=extra_body or None)
    # A scenario never reads the user's calibration cache: a fresh store per
    # run, so a session learns from its own measurements only.
    provider.calibrated_counter = CalibratedCounter(CalibrationStore(None), provider.name, target.model,
                                             spec.bytes_per_token)
    provider.exact_counter = scenario_tokenizer(spec, provider, tool_choice, extra_body)
    return provider


def scenario_tokenizer(spec: RemoteProviderSpec, provider: RemoteProvider, tool_choice, extra_body: dict):
    """The exact counter of a remote scenario's server (`provider.exact_counter`),
    set up here, before the research time budget starts; None where there is
    none (the loop then falls back and traces it)."""
    from imprint_core.errors import CountingUnavailable, ModelUnavailable
    from imprint_core.providers import remote_tokens as rt
    from ..live.model_folder import ensure_model_dir
    if spec.tokenizer == "none":
        return None
    try:
        folder = ensure_model_dir()
    except ModelUnavailable:
        return None
    if spec.server == "transformers":
        # transformers serve renders our model folder's template: render it here.
        render, encode = rt.hf_template(str(folder), extra_body.get("chat_template_kwargs"))
        return rt.TemplateTokenCounter("local-template/transformers", encode, render)
    render = rt.chatml_function_calling(tool_choice)
    if spec.tokenizer == "local":
        # The GGUF's vocabulary is the model folder's tokenizer.json.
        return rt.TemplateTokenCounter("local-template/chatml-function-calling",
                                       rt.tokenizer_file_encoder(str(folder / "tokenizer.json")), render)
    counter = rt.LlamaCppTokenize(provider.client, provider.base_url, provider.model, render)
    try:
        counter.probe()
    except CountingUnavailable:
        return None
    return counter


def _tool_choice(value: str | None):
    if value is None or value in ("auto", "required", "none"):
        return value
    return {"type": "function", "function": {"name": value}}


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
    provider = build_provider(scn, clock)
    try:
        yield provider
    finally:
        close = getattr(provider, "close", None)
        if close is not None:
            close()
