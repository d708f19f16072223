"""A provider with its counting, built from its spec in one call.

`build_provider(spec, clock=...)` takes the data that says which provider
to run (`ScriptedSpec`: the stub's turns and its counter; `RemoteSpec`: an
OpenAI-compatible server and where its exact count comes from; `LocalSpec`:
the local model's folder and dtype, which counts with its own tokenizer) and returns
the provider with every counter it offers assembled: the byte estimate, the
calibrated estimate and the server's template and tokenizer
(`remote_tokens`). A caller such as the testbed's scenario runner states
what it wants; it never wires counters into a provider itself.

Built before the research time budget starts: a tokenizer that asks the
server is probed here (through the provider's own transport, so a recorded
session replays the probe too)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping

from ..clock import VirtualClock
from ..counting import DEFAULT_BYTES_PER_TOKEN, ByteEstimateCounter, RegexTokenCounter
from ..types import Clock, Provider, TokenCounter
from .scripted import ScriptedProvider, TurnSource

if TYPE_CHECKING:
    from .local import Dtype, LocalProvider, ToolChoice
    from .remote import RemoteProvider

__all__ = ["LocalSpec", "RemoteSpec", "ScriptedSpec", "build_provider"]


@dataclass(frozen=True)
class ScriptedSpec:
    """The scripted stub: its turns per role and how it counts (`bytes`:
    the byte estimate at `bytes_per_token`; `exact`: the stand-in tokenizer)."""
    turns: TurnSource
    workers: TurnSource = None
    final: TurnSource = None
    context_window: int = 8192
    counter: Literal["bytes", "exact"] = "bytes"
    bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN


@dataclass(frozen=True)
class RemoteSpec:
    """An OpenAI-compatible server. `tool_choice`: auto, required, none or
    the name of a tool to force. `chunk_delay`: simulated seconds per stream
    chunk on a virtual clock. `tokenizer`: where the exact count comes from
    (`local`: the server's chat template with `model_folder`'s tokenizer;
    `server`: asked of the server; `none`); without a `model_folder` there
    is none. `calibration_path`: where the calibrated estimate keeps its
    measurements (None: in memory, for this provider only)."""
    base_url: str
    model: str
    server: Literal["transformers", "llamacpp"]
    stream: bool = True
    context_window: int = 4096
    bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN
    tool_choice: str | None = None
    temperature: float | None = None
    chunk_delay: float = 0.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    tokenizer: Literal["local", "server", "none"] = "local"
    model_folder: Path | None = None
    transport: Any = None            # an httpx transport (a recording's, a mock); None: a plain client
    calibration_path: Path | None = None


@dataclass(frozen=True)
class LocalSpec:
    """The local model (`LocalProvider`, torch and transformers loaded when
    it is built): its folder and options, as LocalProvider names them.
    `dtype`: auto, bfloat16, float32 or int8. Its counting is its own
    tokenizer's exact count, whatever `chat.token_counting` says. A folder
    that is missing or does not load raises ModelUnavailable, naming it."""
    model_path: Path
    dtype: Dtype = "auto"
    context_window: int | None = None
    tool_choice: ToolChoice = "auto"
    max_tool_calls: int = 1
    temperature: float = 0.0
    seed: int = 0
    max_cached_contexts: int = 8
    threads: int | None = None


def build_provider(spec: ScriptedSpec | RemoteSpec | LocalSpec, *, clock: Clock) -> Provider:
    """The provider `spec` describes, with its counting assembled."""
    if isinstance(spec, ScriptedSpec):
        counter = RegexTokenCounter() if spec.counter == "exact" else ByteEstimateCounter(spec.bytes_per_token)
        return ScriptedProvider(spec.turns, clock=clock, workers=spec.workers, final=spec.final,
                                context_window=spec.context_window, counter=counter)
    if isinstance(spec, LocalSpec):
        return _local(spec, clock)
    return _remote(spec, clock)


def _local(spec: LocalSpec, clock: Clock) -> LocalProvider:
    from .local import LocalProvider
    return LocalProvider(spec.model_path, clock=clock, dtype=spec.dtype, context_window=spec.context_window,
                         tool_choice=spec.tool_choice, max_tool_calls=spec.max_tool_calls,
                         temperature=spec.temperature, seed=spec.seed, max_cached_contexts=spec.max_cached_contexts,
                         threads=spec.threads)


def _wire_tool_choice(value: str | None) -> str | dict | None:
    """A tool choice as the wire takes it: a tool's name becomes the forced function."""
    if value is None or value in ("auto", "required", "none"):
        return value
    return {"type": "function", "function": {"name": value}}


def _remote(spec: RemoteSpec, clock: Clock) -> RemoteProvider:
    from ..calibration import CalibratedCounter, CalibrationStore
    from .remote import RemoteProvider
    on_chunk = None
    if spec.chunk_delay and isinstance(clock, VirtualClock):
        on_chunk = lambda n: clock.sleep(spec.chunk_delay)  # noqa: E731
    tool_choice, extra_body = _wire_tool_choice(spec.tool_choice), dict(spec.extra_body or {})
    if spec.server == "transformers" and tool_choice is not None:
        # transformers serve ignores the `tool_choice` field; the model folder's
        # chat template reads it from the request's chat_template_kwargs instead.
        kwargs = dict(extra_body.get("chat_template_kwargs") or {})
        kwargs.setdefault("tool_choice", tool_choice)
        extra_body["chat_template_kwargs"], tool_choice = kwargs, None
    provider = RemoteProvider(spec.base_url, spec.model, clock=clock, stream=spec.stream, transport=spec.transport,
                              context_window=spec.context_window, counter=ByteEstimateCounter(spec.bytes_per_token),
                              name=f"remote:{spec.server}", temperature=spec.temperature, tool_choice=tool_choice,
                              on_chunk=on_chunk, extra_body=extra_body or None)
    calibrated = CalibratedCounter(CalibrationStore(spec.calibration_path), provider.name, spec.model,
                                   spec.bytes_per_token)
    provider.counting_modes = replace(provider.counting_modes, calibrated=calibrated,
                                      tokenizer=_server_tokenizer(spec, provider, tool_choice, extra_body))
    return provider


def _server_tokenizer(spec: RemoteSpec, provider: RemoteProvider, tool_choice: str | dict | None,
                      extra_body: dict) -> TokenCounter | None:
    """The exact counter of the server's prompts; None where there is none
    (the loop then falls back and traces it)."""
    from ..errors import CountingUnavailable
    from . import remote_tokens as rt
    folder = spec.model_folder
    if spec.tokenizer == "none" or folder is None:
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
