"""The scenario model: what a scenario file may say, as strict pydantic models.

One scenario per YAML file (`loading.py` reads it, `schema.py` is its JSON
schema). Unknown keys are errors, so a typo can never silently change what
a scenario tests.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator, model_validator

from imprint_core.budget import MIN_OUTPUT_TOKENS, POLICIES
from imprint_core.loop import LoopConfig
from imprint_core.novelty import NoveltyConfig
from imprint_core.novelty.config import check_field, json_bounds
from imprint_core.types import FinalMode, StopReason, ToolKind

NonNeg = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Strict):
    """An inclusive range; either end may be left open."""
    min: float | None = None
    max: float | None = None

    def contains(self, value: float) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def __str__(self) -> str:
        lo = "" if self.min is None else f"{self.min:g}"
        hi = "" if self.max is None else f"{self.max:g}"
        return f"{lo}..{hi}"


Count = Union[int, Range]


# ---- the provider's script ----------------------------------------------------------
class CallSpec(_Strict):
    """A tool call the scripted model makes. `${i}` in string arguments is
    the repeat index (1-based)."""
    tool: str = Field(description="The name of one of the scenario's `tools` (or delegate_sections with "
                                  "`loop.section_workers`)")
    args: dict[str, Any] = Field({}, description="The call's arguments, a JSON object")
    raw_args: str | None = Field(None, description="Arguments exactly as the model produced them, when not valid JSON")
    undefined: bool = Field(False, description="The tool is deliberately not among `tools` (the loop must answer "
                                               "the call with an error result); otherwise such a call is an error "
                                               "when the file loads")


class ErrorSpec(_Strict):
    kind: str = Field("http_500", description="A provider error kind, for example http_429, http_500, connection")
    message: str = "scripted failure"
    retryable: bool = False
    retry_after: NonNeg | None = None
    processed: bool = Field(True, description="Whether the provider processed the prompt (it is then charged)")


class ChunkSpec(_Strict):
    text: str
    delay: NonNeg = 0.0


class TurnSpec(_Strict):
    """One scripted reply: tool calls, or an answer; optionally streamed in
    chunks with simulated delays, or failing with an error."""
    repeat: int = Field(1, ge=1, description="Use this turn this many times in a row")
    calls: list[CallSpec] = []
    answer: str | None = None
    chunks: list[ChunkSpec] | None = None
    chunk_delay: NonNeg = Field(0.0, description="Stream `answer` word by word with this delay per word")
    latency: NonNeg = Field(0.0, description="Simulated seconds before the first chunk (prefill)")
    error: ErrorSpec | None = None
    usage: Literal["auto", "none"] = "auto"

    @model_validator(mode="after")
    def _one_thing(self) -> "TurnSpec":
        if self.answer is not None and self.chunks is not None:
            raise ValueError("give either `answer` or `chunks`, not both")
        return self


class StubProviderSpec(_Strict):
    kind: Literal["stub"]
    context_window: int = Field(8192, ge=64)
    counter: Literal["bytes", "exact"] = Field("bytes", description="bytes: the UTF-8 estimate; exact: a tokenizer")
    bytes_per_token: float = Field(3.0, gt=0)
    script: list[TurnSpec]
    workers: list[TurnSpec] | None = None
    final: list[TurnSpec] | None = None


class LocalProviderSpec(_Strict):
    """SmolLM2-135M-Instruct through transformers (`imprint model build`)."""
    kind: Literal["local"]
    dtype: Literal["bfloat16", "float32", "int8"] = "bfloat16"
    context_window: int | None = Field(None, ge=64)
    tool_choice: Literal["auto", "required", "none"] = Field(
        "auto", description="required: every reply with tools offered is a (grammar-constrained) call")
    temperature: float = Field(0.0, ge=0, description="0 decodes greedily (deterministic)")
    seed: int = 0


class RemoteProviderSpec(_Strict):
    """A recorded session of a real OpenAI-compatible server. Tests replay
    the cassette offline; `imprint record` records it anew."""
    kind: Literal["remote"]
    server: Literal["transformers", "llamacpp"]
    cassette: str | None = Field(None, description="The recording, relative to the checkout the scenario file is in "
                                                   "(default traces/cassettes/<server>/<file stem>.yaml)")
    stream: bool = True
    context_window: int = Field(4096, ge=64)
    bytes_per_token: float = Field(3.0, gt=0)
    tool_choice: str | None = Field(None, description="auto, required, none, or the name of a tool to force")
    temperature: float | None = Field(None, ge=0)
    chunk_delay: NonNeg = Field(0.0, description="Simulated seconds per stream chunk on the virtual clock, "
                                                  "so a deadline can fall inside a recorded stream")
    extra_body: dict[str, Any] = Field({}, description="Extra request fields for the server, e.g. transformers "
                                                       "serve's generation_config")
    tokenizer: Literal["local", "server", "none"] = Field(
        "local", description="Where the exact count of `chat.token_counting: tokenizer`/`auto` comes from: "
                             "`local` renders the server's chat template with the model folder's tokenizer, "
                             "`server` asks the server (llama.cpp: POST /extras/tokenize, recorded in the "
                             "cassette), `none`: no tokenizer")


ProviderSpec = Annotated[Union[StubProviderSpec, LocalProviderSpec, RemoteProviderSpec], Field(discriminator="kind")]


# ---- tools ------------------------------------------------------------------------------
class Hit(_Strict):
    title: str
    url: str = ""
    snippet: str = ""
    score: float | None = None
    date: str | None = None

    def render(self) -> str:
        parts = [self.title]
        if self.url:
            parts.append(self.url)
        if self.date:
            parts.append(f"date: {self.date}")
        if self.score is not None:
            parts.append(f"score: {self.score}")
        if self.snippet:
            parts.append(self.snippet)
        return "\n".join(parts)


class ResultSpec(_Strict):
    """What one call returns: exactly one of text, hits, empty, error, raises.
    `${name}` in text is replaced by the call's argument `name`, `${n}` by the
    call number."""
    text: str | None = None
    hits: list[Hit] | None = None
    empty: bool = False
    error: str | None = None
    raises: str | None = Field(None, description="The tool raises an exception with this message")
    duration: NonNeg | None = Field(None, description="Simulated seconds, overriding the tool's duration")

    @model_validator(mode="after")
    def _exactly_one(self) -> "ResultSpec":
        given = [k for k in ("text", "hits", "error", "raises") if getattr(self, k) is not None] + \
            (["empty"] if self.empty else [])
        if len(given) != 1:
            raise ValueError("a result needs exactly one of text, hits, empty, error, raises"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self


class MatchRule(_Strict):
    args: dict[str, Any] = Field(description="Argument values the call must have (a subset)")
    result: ResultSpec


class ToolSpecYaml(_Strict):
    name: str
    kind: ToolKind = "read"
    description: str = ""
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    blocking: bool = Field(True, description="A blocking tool runs to completion past the deadline; "
                                             "a background read is abandoned at the deadline")
    duration: NonNeg = 0.0
    results: list[ResultSpec] = Field([], description="Results by call index (1st call, 2nd call, ...)")
    cycle: bool = Field(False, description="Cycle through `results` instead of running out")
    match: list[MatchRule] = Field([], description="Results chosen by matching arguments; checked first")
    default: ResultSpec | None = None


class AnswerSpec(_Strict):
    text: str
    wait: NonNeg = Field(0.0, description="Simulated seconds the user takes to answer")


class CancelSpec(_Strict):
    at: NonNeg | None = Field(None, description="Cancel when the virtual clock reaches this time")
    on_event: str | None = Field(None, description="Cancel after this trace event type, e.g. tool_call")
    where: dict[str, Any] = Field({}, description="Fields the event must have, e.g. {role: final}")
    count: int = Field(1, ge=1, description="Cancel at the n-th matching event")

    @model_validator(mode="after")
    def _one(self) -> "CancelSpec":
        if (self.at is None) == (self.on_event is None):
            raise ValueError("give exactly one of `at` or `on_event`")
        return self


_LOOP = LoopConfig()
"""The loop's own defaults: a scenario states only where it departs from them."""

SCENARIO_RESEARCH_MAX_OUTPUT = 256
"""The scenario library's research output allowance, on purpose smaller than
the loop's (`LoopConfig.research_max_output_tokens`): scripted replies are a
few dozen tokens, and the library's pinned token figures (`expect: reserved,
charged`, the budget scenarios' stop rounds) are written against this value."""

_NOVELTY = {f.name: f for f in dataclasses.fields(NoveltyConfig) if f.init}
_NOVELTY_TYPES = typing.get_type_hints(NoveltyConfig)


def _check_novelty(value: Any, info: ValidationInfo) -> Any:
    """NoveltyConfig's own check of the field (its bounds are its metadata)."""
    check_field(info.field_name, value, _NOVELTY[info.field_name].metadata.get("check"))
    return value


_NoveltyFields = create_model(
    "NoveltyFields", __base__=_Strict,
    __validators__={"_novelty": field_validator(*_NOVELTY)(_check_novelty)},
    **{name: (_NOVELTY_TYPES[name], Field(f.default, description=f.metadata.get("help", f.name),
                                          json_schema_extra=json_bounds(f.metadata.get("check"))))
       for name, f in _NOVELTY.items()})
"""Every NoveltyConfig field as a scenario key: its type, default, bounds and
description are NoveltyConfig's (imprint_core/novelty/config.py), checked by
its own validator."""


class LoopSpec(_NoveltyFields):
    # The loop's parameters: LoopConfig's fields by their names, the novelty
    # rule's fields (`_NoveltyFields`) flat beside them. (The schema's
    # description is schema.py's.)
    research_max_output_tokens: int = Field(SCENARIO_RESEARCH_MAX_OUTPUT, ge=MIN_OUTPUT_TOKENS)
    section_workers: bool = _LOOP.section_workers
    max_retries: int = Field(_LOOP.max_retries, ge=0)
    final_deadline_sec: NonNeg = _LOOP.final_deadline_sec
    system_prompt: str | None = Field(None, description="Replaces the default research system prompt")
    stop_rule_params: dict[str, Any] = Field(
        {}, description="Parameters of the stop rule that `settings: {chat.research_stop_rule: NAME}` selects "
                        "(`imprint rules` lists each rule's), e.g. {threshold: 3} for gemini-cli")

    def novelty(self) -> NoveltyConfig:
        """The novelty config these fields set."""
        return NoveltyConfig(**{name: getattr(self, name) for name in _NOVELTY})

    def config(self, policy: str) -> LoopConfig:
        """The LoopConfig this spec sets: its fields by name (a system prompt
        left out keeps the loop's), the novelty config, the settlement policy."""
        given = self.model_dump(exclude=set(_NOVELTY), exclude_none=True)
        return LoopConfig(policy=policy, novelty=self.novelty(), **given)


class ExpectSpec(_Strict):
    stop_reason: StopReason | None = None
    final_mode: FinalMode | None = None
    rounds: Count | None = None
    requests: Count | None = Field(None, description="Research requests sent or attempted (reserved)")
    reserved: Count | None = None
    charged: Count | None = None
    refunded: Count | None = None
    writes_executed: Count | None = None
    events: dict[str, Count] = Field({}, description="Counts of trace events: `type` or `type[key=value,...]`")
    answer_contains: list[str] = []
    no_lost_writes: bool = Field(True, description="Every executed write has exactly one recorded result")


class Scenario(_Strict):
    name: str
    description: str = ""
    question: str
    settings: dict[str, Any] = Field({}, description="Overrides of chat.* settings, validated like `imprint settings set`")
    policy: Literal[POLICIES] = _LOOP.policy
    clock: Literal["virtual", "real"] = "virtual"
    loop: LoopSpec = LoopSpec()
    provider: ProviderSpec
    tools: list[ToolSpecYaml] = []
    answers: list[AnswerSpec] = []
    cancel: CancelSpec | None = None
    expect: ExpectSpec = ExpectSpec()

    # Set by the loader, not by the file.
    source: str | None = Field(None, exclude=True)
