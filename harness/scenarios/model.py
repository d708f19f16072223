"""Scenario files: the model, loading with file:line errors, the JSON schema.

One scenario per YAML file. Unknown keys are errors, so a typo can never
silently change what a scenario tests.
"""
from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from imprint_core.errors import SettingsError, UserInputError
from imprint_core.novelty import NORMALIZATIONS, NoveltyConfig
from imprint_core.novelty.rule import FINGERPRINT_UNITS, NEAR_DUPLICATE
from imprint_core.settings import IGNORED_KEYS, SPECS, validate

from ..conventions import expand_paths
from ..yamlsource import line_of, load_yaml
from .selectors import SelectorError, line_keys, parse_selector

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
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
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
    research_max_output_tokens: int = Field(256, ge=1)
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


# ---- loading --------------------------------------------------------------------------
def _allowed_keys(loc: tuple) -> list[str] | None:
    """Field names of the model at `loc`, walking the annotations."""
    tp: Any = Scenario
    for part in loc:
        tp = _step(tp, part)
        if tp is None:
            return None
    tp = _unwrap(tp, None)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [n for n, f in tp.model_fields.items() if not f.exclude]
    return None


def _unwrap(tp: Any, part: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _unwrap(typing.get_args(tp)[0], part)
    if origin is Union or str(origin) == "types.UnionType":
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        for m in models:  # a discriminated union's tag names the member
            kind = m.model_fields.get("kind")
            if kind is not None and part in typing.get_args(kind.annotation):
                return m
        return models[0] if len(models) == 1 else (members[0] if len(members) == 1 else tp)
    return tp


def _step(tp: Any, part: Any) -> Any:
    tp = _unwrap(tp, part)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if part in tp.model_fields:
            return tp.model_fields[part].annotation
        return tp if any(  # a discriminator tag inside the loc: stay on the chosen member
            part in typing.get_args(f.annotation) for n, f in tp.model_fields.items() if n == "kind") else None
    origin = typing.get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return typing.get_args(tp)[0]
    if origin is dict:
        return typing.get_args(tp)[1]
    return None


def _clean_loc(loc: tuple, lines: dict[tuple, int], keep_last: bool) -> tuple:
    """Drop pydantic's own loc parts (union member names, validator names)
    that are not keys in the file; keep the last part for a missing or
    unknown key."""
    out: tuple = ()
    for i, part in enumerate(loc):
        if out + (part,) in lines or (keep_last and i == len(loc) - 1):
            out += (part,)
    return out


def _key_text(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (("." if text else "") + str(part))
    return text or "(top level)"


def _translate(exc: ValidationError, name: str, lines: dict[tuple, int]) -> UserInputError:
    errors = exc.errors()
    first = errors[0]
    kind = first["type"]
    loc = _clean_loc(tuple(first["loc"]), lines, keep_last=kind in ("extra_forbidden", "missing"))
    # A union reports one error per member at the same place: say them once.
    same = [e for e in errors if _clean_loc(tuple(e["loc"]), lines, kind in ("extra_forbidden", "missing")) == loc]
    expected = None
    if kind == "extra_forbidden":
        allowed = _allowed_keys(tuple(first["loc"])[:-1])
        message = "unknown key"
        expected = "one of " + ", ".join(allowed) if allowed else None
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "union_tag_invalid":
        tag = first["input"].get("kind") if isinstance(first["input"], dict) else first["input"]
        message = f"unknown provider kind {tag!r}"
        expected = "one of stub, local, remote"
    else:
        msgs = list(dict.fromkeys(e["msg"].removeprefix("Value error, ") for e in same))
        message = " or ".join(msgs)
        value = first.get("input")
        if value is not None and not isinstance(value, (dict, list)):
            message += f" (got {value!r})"
    more = len(errors) - len(same)
    if more:
        message += f"; and {more} more problem(s)"
    return UserInputError(message, file=name, line=line_of(lines, loc), key=_key_text(loc), expected=expected)


def parse_scenario(text: str, name: str) -> Scenario:
    data, lines = load_yaml(text, name)
    if not isinstance(data, dict):
        raise UserInputError("a scenario file must be a mapping of keys", file=name, line=1,
                             expected="keys such as name, question, provider, tools, expect")
    try:
        scn = Scenario.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc, name, lines) from None
    _check_calls(scn, name, lines)
    _check_selectors(scn, name, lines)
    for key, value in scn.settings.items():
        where = line_of(lines, ("settings", key))
        if key in IGNORED_KEYS:
            continue  # the legacy round cap: accepted, never applied
        if key not in SPECS:
            raise UserInputError("unknown setting", file=name, line=where, key=f"settings.{key}",
                                 expected="one of " + ", ".join(list(SPECS) + sorted(IGNORED_KEYS)))
        try:
            validate(key, value)
        except SettingsError as exc:
            raise UserInputError(exc.message, file=name, line=where, key=f"settings.{key}",
                                 expected=exc.expected) from None
    return scn.model_copy(update={"source": name})


def _check_calls(scn: Scenario, name: str, lines: dict[tuple, int]) -> None:
    """A scripted call to a tool the scenario does not define would only show
    later as a changed round count: name it when the file loads."""
    spec = scn.provider
    if not isinstance(spec, StubProviderSpec):
        return
    defined = [t.name for t in scn.tools] + (["delegate_sections"] if scn.loop.section_workers else [])
    for part in ("script", "workers", "final"):
        for i, turn in enumerate(getattr(spec, part) or []):
            for j, call in enumerate(turn.calls):
                if call.tool not in defined and not call.undefined:
                    raise UserInputError(
                        f"call to undefined tool {call.tool!r}", file=name,
                        line=line_of(lines, ("provider", part, i, "calls", j, "tool")),
                        key=f"provider.{part}[{i}].calls[{j}].tool",
                        expected=("one of " + ", ".join(defined) if defined else "a tool defined under `tools`")
                                 + ", or `undefined: true` for a deliberate call to a missing tool")


def _check_selectors(scn: Scenario, name: str, lines: dict[tuple, int]) -> None:
    """Unknown event types and keys: a misspelled selector counts 0 events, so
    `: 0` could never fail."""
    for selector in scn.expect.events:
        try:
            parse_selector(selector)
        except SelectorError as exc:
            raise UserInputError(exc.message, file=name, line=line_of(lines, ("expect", "events", selector)),
                                 key=f"expect.events.{selector}", expected=exc.expected) from None
    cancel = scn.cancel
    if cancel is not None and cancel.on_event is not None:
        try:
            allowed = line_keys(parse_selector(cancel.on_event).type)
        except SelectorError as exc:
            raise UserInputError(exc.message, file=name, line=line_of(lines, ("cancel", "on_event")),
                                 key="cancel.on_event", expected=exc.expected) from None
        for key in cancel.where:
            if allowed is not None and key not in allowed:
                raise UserInputError(f"unknown key {key!r} of {cancel.on_event} events", file=name,
                                     line=line_of(lines, ("cancel", "where", key)), key=f"cancel.where.{key}",
                                     expected="one of " + ", ".join(sorted(allowed)))


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(p)) from None
    except OSError as exc:
        raise UserInputError(f"cannot read: {exc.strerror}", file=str(p)) from None
    return parse_scenario(text, str(p))


def scenario_files(paths: list[str | Path]) -> list[Path]:
    """The scenario files `paths` name: a folder's *.yaml files directly in it
    (its `labels/` are not scenarios), in `natural_order`; missing paths are errors."""
    return [f.path for f in expand_paths(paths, lambda name: name.endswith(".yaml"), recursive=False)]


# What an editor shows beside each key (Field descriptions in the classes win):
# one table, so the descriptions read as a whole and a test can require one for every key.
DOCS: dict[str, dict[str, str]] = {
    "Scenario": {
        "": "One scenario of the library: a question, a scripted or real provider, tools, and what must happen.",
        "name": "The scenario's name, shown in `imprint run`'s table and the report",
        "description": "What the scenario tests and which rule of the spec it pins",
        "question": "The user's question the research loop answers",
        "policy": "How the token ledger settles: reserve (no refund) or prefix-refund",
        "clock": "virtual (simulated time, exact) or real (wall clock, for the local model)",
        "loop": "The loop's own parameters: output allowance, section workers, the novelty rule",
        "provider": "The model: a scripted stub, the local model, or a recorded remote server",
        "tools": "The tools offered to the model, with their simulated results",
        "answers": "The user's answers to ask tools, in order",
        "cancel": "Cancel the run at a virtual time or on a trace event",
        "expect": "What the run must do; every key given is checked",
    },
    "Range": {"": "An inclusive range; either end may be left open", "min": "Lowest allowed value",
              "max": "Highest allowed value"},
    "CallSpec": {"": "A tool call the scripted model makes; `${i}` in string arguments is the repeat index"},
    "ErrorSpec": {"": "The provider fails this request", "message": "The error's message",
                  "retryable": "Whether the loop may retry the request",
                  "retry_after": "Seconds the provider asks to wait before a retry (Retry-After)"},
    "ChunkSpec": {"": "One streamed piece of a reply", "text": "The chunk's text",
                  "delay": "Simulated seconds before this chunk arrives"},
    "TurnSpec": {"calls": "Tool calls of this reply (a reply with calls is a research round)",
                 "answer": "The reply's text; a reply without calls is an answer",
                 "chunks": "The reply streamed in chunks with delays, instead of `answer`",
                 "error": "The request fails with this provider error",
                 "usage": "auto: the stub reports usage; none: it reports none"},
    "StubProviderSpec": {"": "A scripted model: replies taken from `script` in order, on the virtual clock",
                         "kind": "stub", "context_window": "Context window in tokens",
                         "bytes_per_token": "The byte estimate's bytes per token",
                         "script": "The coordinator's replies, in order (the run fails loudly if they run out)",
                         "workers": "Section workers' replies, in order", "final": "Replies to the final request"},
    "LocalProviderSpec": {"kind": "local", "dtype": "Weights' dtype",
                          "context_window": "Context window in tokens (default: the model's)",
                          "seed": "Sampling seed"},
    "RemoteProviderSpec": {"kind": "remote", "server": "Which recorded server: transformers serve or llama.cpp",
                           "stream": "Stream the replies (server-sent events)",
                           "context_window": "Context window in tokens",
                           "bytes_per_token": "The byte estimate's bytes per token",
                           "temperature": "Sampling temperature sent to the server"},
    "Hit": {"": "One search hit, rendered as title, url, date, score and snippet lines", "title": "Hit title",
            "url": "Hit address", "snippet": "Hit text", "score": "Similarity score (volatile: not evidence)",
            "date": "Date shown with the hit (volatile: not evidence)"},
    "ResultSpec": {"text": "The result's text", "hits": "Search hits, rendered one per block",
                   "empty": "The call returns nothing (not evidence)", "error": "The call fails with this message"},
    "MatchRule": {"": "A result for calls whose arguments include `args`", "result": "What such a call returns"},
    "ToolSpecYaml": {"": "A simulated tool", "name": "The tool's name, as the model calls it",
                     "kind": "read (evidence), write (side effect; never deduplicated) or ask (asks the user)",
                     "description": "Shown to the model", "parameters": "JSON schema of the arguments",
                     "duration": "Simulated seconds a call takes", "default": "The result when nothing else applies"},
    "AnswerSpec": {"": "The user's answer to one ask call", "text": "The answer's text"},
    "CancelSpec": {"": "Cancel the run: at a virtual time, or on the n-th trace event of a type"},
    "LoopSpec": {"": "The research loop's parameters",
                 "research_max_output_tokens": "Output allowance of each research request (reserved in full)",
                 "section_workers": "Offer the delegate_sections tool (concurrent section workers)",
                 "max_retries": "Retries of a retryable provider error",
                 "shingle_words": "Words per shingle of the novelty fingerprints",
                 "containment_threshold": "Share of a unit's shingles already seen that makes it old",
                 "min_new_shingles": "New shingles a unit needs to count as new evidence",
                 "min_new_share": "Share of new shingles a unit needs to count as new evidence",
                 "fingerprint_unit": "Fingerprint paragraphs or lines",
                 "near_duplicate": "Near-duplicate matching of whole results: off, jaccard or containment",
                 "near_duplicate_threshold": "Similarity above which a whole result is a near duplicate",
                 "final_deadline_sec": "Deadline of the final answer request, in seconds"},
    "ExpectSpec": {"": "What the run must do; keys left out are not checked",
                   "stop_reason": "Why research stopped", "final_mode": "How the reply was produced",
                   "rounds": "Research rounds (a number or {min, max})", "reserved": "Tokens reserved in total",
                   "charged": "Tokens charged in total", "refunded": "Tokens refunded in total",
                   "writes_executed": "Write calls that ran",
                   "answer_contains": "Strings the final answer must contain"},
}


def json_schema() -> dict:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Imprint scenario"
    schema.setdefault("properties", {}).pop("source", None)
    for name, model in [("Scenario", schema), *schema.get("$defs", {}).items()]:
        docs = DOCS.get(name, {})
        if "" in docs:
            model.setdefault("description", docs[""])
        for key, prop in model.get("properties", {}).items():
            if key in docs:
                prop.setdefault("description", docs[key])
    schema["description"] = DOCS["Scenario"][""]
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
