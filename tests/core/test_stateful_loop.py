"""A hypothesis state machine drives the research loop one provider turn at
a time (answers, tool batches, provider errors, slow streams) with random
tool behaviour on the virtual clock, and checks the record's invariants
after every step."""
from __future__ import annotations

import queue
import threading
from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from imprint_core import (Chunk, EventLog, FunctionTool, LoopConfig, ProviderError, ResearchLoop, ResearchSettings,
                          ScriptedProvider, ToolCall, ToolOutput, ToolSpec, Turn, VirtualClock)

OUTCOMES = ["new", "old", "empty", "error", "raise", "slow"]


def _read_tool(args: dict, ctx) -> ToolOutput | str:
    outcome, n = args.get("outcome", "new"), args.get("n", 0)
    ctx.work(float(args.get("duration", 0.0)))
    if outcome == "new":
        return f"fresh finding number {n} about subject {n * 7919} with detail words alpha beta gamma {n}"
    if outcome == "old":
        return "the same old finding repeated about the same subject with the same detail words"
    if outcome == "empty":
        return ""
    if outcome == "error":
        return ToolOutput(f"error: backend failed with code {n}", status="error")
    if outcome == "raise":
        raise RuntimeError(f"tool crashed {n}")
    ctx.work(30.0)  # slow
    return f"slow finding {n}"


def _write_tool(args: dict, ctx) -> str:
    ctx.work(float(args.get("duration", 0.0)))
    return f"saved note {args.get('n', 0)}"


class LoopMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.signals: queue.Queue = queue.Queue()
        self.turns: queue.Queue = queue.Queue()
        self.done = False
        self.result = None
        self.serial = 0
        self.thread: threading.Thread | None = None

    @initialize(policy=st.sampled_from(["reserve", "prefix-refund"]),
                budget=st.integers(1024, 12_000), timeout=st.integers(10, 400), patience=st.integers(2, 6),
                blocking=st.booleans())
    def start(self, policy: str, budget: int, timeout: int, patience: int, blocking: bool) -> None:
        self.policy, self.budget = policy, budget
        self.clock = VirtualClock()
        tools = [FunctionTool(ToolSpec("search", kind="read"), _read_tool, blocking=blocking),
                 FunctionTool(ToolSpec("save", kind="write"), _write_tool, blocking=True)]
        provider = ScriptedProvider(self._next_turn, clock=self.clock, context_window=32_768)
        self.loop = ResearchLoop(provider, tools,
                                 ResearchSettings(research_timeout_sec=timeout, research_token_budget=budget,
                                                  research_no_progress_rounds=patience),
                                 clock=self.clock, config=LoopConfig(policy=policy, research_max_output_tokens=128))
        self.log = EventLog(self.loop.trace)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self._wait()

    # -- plumbing: the loop thread blocks in the provider until a rule feeds it
    def _run(self) -> None:
        try:
            self.signals.put(("done", self.loop.run("what is known?")))
        except BaseException as exc:  # surfaced in the machine's thread
            self.signals.put(("crash", exc))

    def _next_turn(self, request, index):
        self.signals.put(("request", request))
        return self.turns.get()

    def _wait(self) -> None:
        kind, value = self.signals.get(timeout=30)
        if kind == "crash":
            raise value
        if kind == "done":
            self.done, self.result = True, value

    def _feed(self, turn: Turn) -> None:
        self.turns.put(turn)
        self._wait()

    def _call(self, tool: str, **args) -> ToolCall:
        self.serial += 1
        return ToolCall(f"c{self.serial}", tool, {**args, "n": self.serial})

    # -- rules -------------------------------------------------------------------------
    @precondition(lambda self: not self.done)
    @rule(text=st.text(min_size=1, max_size=40))
    def answer(self, text: str) -> None:
        self._feed(Turn(text=text))

    @precondition(lambda self: not self.done)
    @rule(batch=st.lists(st.tuples(st.sampled_from(OUTCOMES + ["write", "unknown"]),
                                   st.floats(0, 60, allow_nan=False)), min_size=1, max_size=4))
    def tool_batch(self, batch) -> None:
        calls = []
        for outcome, duration in batch:
            if outcome == "write":
                calls.append(self._call("save", duration=duration))
            elif outcome == "unknown":
                calls.append(self._call("does_not_exist"))
            else:
                calls.append(self._call("search", outcome=outcome, duration=duration))
        self._feed(Turn(tool_calls=calls, latency=1.0))

    @precondition(lambda self: not self.done)
    @rule(kind=st.sampled_from(["http_429", "http_500", "connection", "malformed_json"]),
          retryable=st.booleans(), processed=st.booleans())
    def provider_error(self, kind: str, retryable: bool, processed: bool) -> None:
        self._feed(Turn(error=ProviderError(kind, "scripted", retryable=retryable, processed=processed,
                                            retry_after=2.0 if kind == "http_429" else None)))

    @precondition(lambda self: not self.done)
    @rule(delays=st.lists(st.floats(0, 40, allow_nan=False), min_size=1, max_size=6), then_call=st.booleans())
    def slow_stream(self, delays, then_call: bool) -> None:
        chunks = [Chunk(f"part{i} ", d) for i, d in enumerate(delays)]
        calls = [self._call("search", outcome="new")] if then_call else []
        self._feed(Turn(chunks=chunks, tool_calls=calls))

    @precondition(lambda self: self.done)
    @rule()
    def finished_run(self) -> None:
        """Once stopped, the run has a defined stop reason and final mode."""
        from imprint_core import FinalMode, StopReason
        assert isinstance(self.result.stop_reason, StopReason) and isinstance(self.result.final_mode, FinalMode)
        if self.result.stop_reason is StopReason.ANSWERED:
            assert self.result.final_mode is FinalMode.ANSWERED and not self.result.final_records
        elif self.result.stop_reason is not StopReason.CANCELLED:
            assert self.result.final_mode in (FinalMode.SYNTHESIZED, FinalMode.FALLBACK)

    # -- invariants after every step -----------------------------------------------------
    @invariant()
    def ledger_balances(self) -> None:
        if not hasattr(self, "loop"):
            return
        ledger = self.loop.ledger
        for r in list(ledger.records):
            assert r.reserved == r.charged + r.refunded and min(r.reserved, r.charged, r.refunded) >= 0
            if self.policy == "reserve":
                assert r.refunded == 0
        t = ledger.totals
        assert t.reserved == t.charged + t.refunded + t.outstanding
        if self.policy == "reserve":
            assert t.charged <= self.budget
        assert t.committed <= self.budget

    @invariant()
    def nothing_after_stop(self) -> None:
        if not hasattr(self, "loop"):
            return
        events = [e.to_dict() for e in self.log.events]
        stops = [i for i, e in enumerate(events) if e["type"] == "stop"]
        if stops:
            after = events[stops[0] + 1:]
            assert not [e for e in after if e["type"] in ("tool_call", "request_reserved", "round_end")]

    @invariant()
    def each_call_one_result(self) -> None:
        if not hasattr(self, "loop"):
            return
        events = [e.to_dict() for e in self.log.events]
        results = Counter(e["call_id"] for e in events if e["type"] == "tool_result")
        assert all(n == 1 for n in results.values())
        for e in events:
            if e["type"] == "tool_call" and e["kind"] == "write":
                assert results[e["call_id"]] == 1, "an executed write must be recorded exactly once"
        if self.done:
            asked = [c.id for m in self.result.messages if m.role == "assistant" for c in m.tool_calls]
            answered = Counter(m.tool_call_id for m in self.result.messages if m.role == "tool")
            assert all(answered[c] == 1 for c in asked)
            assert len(self.result.writes) == sum(1 for e in events if e["type"] == "tool_call" and e["kind"] == "write")

    def teardown(self) -> None:
        while self.thread is not None and not self.done:
            self._feed(Turn(text="enough"))
        if self.thread is not None:
            self.thread.join(timeout=30)


LoopMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
TestLoopStateMachine = LoopMachine.TestCase
