"""Trace events: one frozen dataclass per line type, the file's format version.

The loop writes these and the harness reads them back, so both sides of a
trace file share one definition. Every line is `{"type", "t", "wall",
**fields}`; `t` is the run's clock and `wall` UTC, both stamped by the
writer. `from_line` is strict about what a reader relies on (a missing field
names the key) and ignores fields it does not know, so a newer writer's
extra fields do not break an older reader.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Sequence

from .budget import RequestRecord

TRACE_FORMAT = "imprint-trace/1"


@dataclass(frozen=True, kw_only=True)
class Event:
    TYPE: ClassVar[str] = ""
    t: float | None = None      # stamped by the writer
    wall: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The line as written: type, t, wall, then the fields in order."""
        out = {"type": self.TYPE}
        out.update((name, getattr(self, name)) for name in _field_names(type(self)))
        return out

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> "Event":
        kwargs = {}
        for f in fields(cls):
            if f.name in data:
                kwargs[f.name] = data[f.name]
            elif f.default is MISSING and f.default_factory is MISSING:
                raise KeyError(f.name)
        return cls(**kwargs)

    def stamped(self, t: float, wall: str) -> "Event":
        # replace(self, t=t, wall=wall) without its field-by-field rebuild
        # (several events a round): events have no __post_init__ and no
        # init=False fields, so copying the instance dict is the same.
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__, t=t, wall=wall)
        return out


_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


EVENT_TYPES: dict[str, type[Event]] = {}


def _event(type_name: str):
    def register(cls):
        cls = dataclass(frozen=True, kw_only=True)(cls)
        cls.TYPE = type_name
        EVENT_TYPES[type_name] = cls
        return cls
    return register


@_event("header")
class Header(Event):
    """First line of every trace; `meta` is whatever the writer's caller
    adds (scenario, server, run id …), written flat beside `format`."""
    format: str = TRACE_FORMAT
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "t": self.t, "wall": self.wall, "format": self.format, **self.meta}

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> "Header":
        meta = {k: v for k, v in data.items() if k not in ("type", "t", "wall", "format")}
        return cls(t=data.get("t"), wall=data.get("wall"), format=data.get("format"), meta=meta)


@_event("run_start")
class RunStart(Event):
    question: str
    settings: dict[str, int]
    policy: str
    provider: str
    counter: str
    context_window: int
    deadline: float | None
    normalization: str
    tools: list[dict[str, Any]]
    # How prompts are counted: the `chat.token_counting` mode, what
    # it resolved to, whether it is exact and whether usage settles the ledger
    # (`Counting.describe()`); None in traces written before it.
    counting: dict[str, Any] | None = None
    stop_rule: str | None = None   # `chat.research_stop_rule`; None in traces written before it


@_event("tool_call")
class ToolCallStarted(Event):
    round: int
    index: int
    call_id: str
    tool: str
    kind: str
    arguments: dict[str, Any]
    blocking: bool


@_event("tool_result")
class ToolResultRecorded(Event):
    round: int
    call_id: str
    tool: str
    kind: str
    status: str
    chars: int
    after_deadline: bool
    started: float | None
    finished: float | None
    arguments: dict[str, Any]
    text: str
    segments: list[str] | None = None
    novelty: dict[str, Any] | None = None


@_event("empty_reply")
class EmptyReply(Event):
    round: int
    chars: int


@_event("round_end")
class RoundEnd(Event):
    """A round's end as the stop rule saw it. The novelty figures, patience
    and per-call verdicts are the record's rule's (None under another rule);
    `verdicts` maps a call id to its novelty verdict (older traces carry it
    on the `tool_result` line instead)."""
    round: int
    kind: str                   # read | write | ask | error
    progress: bool | None = None
    new_paragraphs: int | None = None
    new_shingles: int | None = None
    patience_counter: int | None = None
    patience: int | None = None
    reserved: int = 0
    charged: int = 0
    deadline: float | None = None
    rule: str = "record"
    rule_notes: dict | None = None
    verdicts: dict | None = None

    @classmethod
    def judged(cls, round: int, kind: str, rule: str, notes: dict, call_ids: Sequence[str], **figures: Any
               ) -> "RoundEnd":
        """The line of a round a rule judged: the record's notes in their own
        fields, any other note in `rule_notes`, and each verdict (keyed by
        the call's index in the batch) under its call's id."""
        verdicts = notes.get("verdicts") or {}
        return cls(round=round, kind=kind, progress=notes.get("progress"), new_paragraphs=notes.get("new_paragraphs"),
                   new_shingles=notes.get("new_shingles"), patience_counter=notes.get("patience_counter"),
                   patience=notes.get("patience"), rule=rule,
                   rule_notes={k: v for k, v in notes.items() if k not in _ROUND_END_NOTES},
                   verdicts={call_ids[i]: v.to_dict() for i, v in verdicts.items()} if verdicts else None, **figures)


# RoundEnd's own fields; whatever else a rule notes goes into `rule_notes`.
_ROUND_END_NOTES = frozenset({"progress", "new_paragraphs", "new_shingles", "patience_counter", "patience", "verdicts"})


@_event("budget_exhausted")
class BudgetExhausted(Event):
    role: str
    context_id: str
    limit: int
    used: int
    requested: int
    message: str


@_event("request_reserved")
class RequestReserved(Event):
    id: int
    role: str
    context_id: str
    attempt: int
    estimated_prompt: int
    max_output: int
    reserved: int
    budget_left: int


@dataclass(frozen=True, kw_only=True)
class _Settled(Event):
    """A settled request: the ledger's record, written flat."""
    record: RequestRecord
    error: str | None = None
    interrupted: str | None = None

    def __getattr__(self, name: str) -> Any:
        # The record's fields read as the event's own (settled.charged), as on the line.
        if name == "record":
            raise AttributeError(name)
        return getattr(self.record, name)

    def to_dict(self) -> dict[str, Any]:
        out = {"type": self.TYPE, "t": self.t, "wall": self.wall, **self.record.to_dict()}
        out.update((name, getattr(self, name)) for name in _field_names(type(self))
                   if name not in ("t", "wall", "record"))
        return out

    @classmethod
    def from_line(cls, data: dict[str, Any]) -> "_Settled":
        record = RequestRecord(**{k: data[k] for k in _record_fields() if k in data})
        rest = {f.name: data[f.name] for f in fields(cls) if f.name != "record" and f.name in data}
        return cls(record=record, **rest)


def _record_fields() -> tuple[str, ...]:
    return _field_names(RequestRecord)


@_event("request_settled")
class RequestSettled(_Settled):
    duration: float = 0.0
    round: int = 0


@_event("count_fallback")
class CountFallback(Event):
    """A prompt counted with another counter than the mode asked for: the
    tokenizer could not count it (a tokenize call failed), or the calibration
    has no measurement yet for such a request, or (role `setup`) the provider
    has no counter of the mode at all. `wanted` and `used` are counter names."""
    role: str
    context_id: str
    wanted: str
    used: str
    reason: str


@_event("request_retry")
class RequestRetry(Event):
    id: int
    attempt: int
    wait: float
    error: str


@_event("stop")
class Stopped(Event):
    reason: str
    detail: str
    round: int
    reserved: int
    charged: int
    refunded: int
    overshoot: float


@_event("final_context")
class FinalFit(Event):
    """Whether the transcript fits for the final request."""
    fits: bool
    estimated_prompt: int
    max_tokens: int
    context_window: int


@_event("condense")
class Condensed(Event):
    chunk: int
    items: int
    ok: bool
    detail: str


@_event("final_request")
class FinalRequest(Event):
    estimated_prompt: int
    max_tokens: int
    deadline: float


@_event("final_settled")
class FinalSettled(_Settled):
    pass


@_event("fallback")
class Fallback(Event):
    reason: str
    evidence: int


@_event("answer")
class Answer(Event):
    mode: str
    text: str


@_event("run_end")
class RunEnd(Event):
    stop_reason: str
    final_mode: str
    rounds: int
    requests: int
    reserved: int
    charged: int
    refunded: int
    writes: int
    evidence: int
    paused: float


# Written by the harness around a run (the loop itself never writes these).
@_event("prompt_bytes")
class PromptBytes(Event):
    """The exact bytes of a request body a recording proxy saw."""
    id: int | str
    bytes: int


@_event("run_error")
class RunError(Event):
    """The run raised instead of returning; the trace says so."""
    error: str


def event_from_line(data: dict[str, Any]) -> Event:
    """A parsed JSON line as its typed event. Raises KeyError naming the
    missing field, or LookupError for a type this version does not know."""
    cls = EVENT_TYPES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise LookupError(f"unknown event type {data.get('type')!r}")
    return cls.from_line(data)


def call_verdicts(events) -> dict[str, dict]:
    """Each judged call's novelty verdict by call id: from `round_end`'s
    `verdicts`, or from the `tool_result` line in traces written before the
    stop-rule interface judged rounds as a whole."""
    out: dict[str, dict] = {}
    for e in events:
        if isinstance(e, ToolResultRecorded) and e.novelty:
            out[str(e.call_id)] = e.novelty
        elif isinstance(e, RoundEnd) and e.verdicts:
            out.update((str(k), v) for k, v in e.verdicts.items())
    return out
