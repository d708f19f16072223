"""The scenario model: what a scenario file may say, as strict pydantic models.

One scenario per YAML file (`loading.py` reads it, `schema.py` is its JSON
schema). Unknown keys are errors, so a typo can never silently change what
a scenario tests.
"""
from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from imprint_core.budget import MIN_OUTPUT_TOKENS
from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig
from imprint_core.novelty.rule import FINGERPRINT_UNITS, NEAR_DUPLICATE

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
    kind: Literal["read", "write", "ask"] = "read"
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


_SHIPPED = NoveltyConfig()   # the novelty defaults live in one place, imprint_core/novelty/rule.py


class LoopSpec(_Strict):
    research_max_output_tokens: int = Field(256, ge=MIN_OUTPUT_TOKENS)
    section_workers: bool = False
    max_retries: int = Field(2, ge=0)
    normalization: Literal["none", "basic", "default", "logs", "ocr", "all"] = Field(
        _SHIPPED.normalization, description="none, basic, or a profile of volatile-token masks")
    shingle_words: int = Field(_SHIPPED.shingle_words, ge=1, le=32)
    containment_threshold: float = Field(_SHIPPED.containment_threshold, gt=0, le=1)
    min_new_shingles: int = Field(_SHIPPED.min_new_shingles, ge=1)
    min_new_share: float = Field(_SHIPPED.min_new_share, ge=0, le=1)
    fingerprint_unit: Literal["paragraph", "line"] = _SHIPPED.fingerprint_unit
    near_duplicate: Literal["off", "jaccard", "containment"] = _SHIPPED.near_duplicate
    near_duplicate_threshold: float = Field(_SHIPPED.near_duplicate_threshold, gt=0, le=1)
    final_deadline_sec: NonNeg = 120.0
    system_prompt: str | None = Field(None, description="Replaces the default research system prompt")
    stop_rule_params: dict[str, Any] = Field(
        {}, description="Parameters of the stop rule that `settings: {chat.research_stop_rule: NAME}` selects "
                        "(`imprint rules` lists each rule's), e.g. {threshold: 3} for gemini-cli")

    def novelty(self) -> NoveltyConfig:
        """The novelty config these fields set (the others at their shipped values)."""
        return NoveltyConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(NoveltyConfig)
                                if f.name in type(self).model_fields})


StopReasonName = Literal["answered", "time_budget", "token_budget", "no_progress", "context_full", "cancelled"]
FinalModeName = Literal["answered", "synthesized", "fallback", "cancelled"]


class ExpectSpec(_Strict):
    stop_reason: StopReasonName | None = None
    final_mode: FinalModeName | None = None
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
    policy: Literal["reserve", "prefix-refund"] = "prefix-refund"
    clock: Literal["virtual", "real"] = "virtual"
    loop: LoopSpec = LoopSpec()
    provider: ProviderSpec
    tools: list[ToolSpecYaml] = []
    answers: list[AnswerSpec] = []
    cancel: CancelSpec | None = None
    expect: ExpectSpec = ExpectSpec()

    # Set by the loader, not by the file.
    source: str | None = Field(None, exclude=True)


# Keep LoopSpec's Literals in step with the rule's choices.
assert NORMALIZATIONS == ("none", "basic", "default", "logs", "ocr", "all")
assert FINGERPRINT_UNITS == ("paragraph", "line") and NEAR_DUPLICATE == ("off", "jaccard", "containment")
