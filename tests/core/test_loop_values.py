"""What the loop hands on as values: the round a stop rule sees (its number,
kind, and each call's tool and arguments), the call ids it makes distinct,
and the worker contexts a fan-out opens, as the trace shows them."""
from __future__ import annotations

from imprint_core import Chunk, LoopConfig, ToolCall, Turn, call
from imprint_core.stoprules import RoundView, as_rule

from helpers import doc, make_run, read_tool, searches


class Seen:
    """A user's rule that never stops and remembers every round it saw."""

    def __init__(self) -> None:
        self.rounds: list[RoundView] = []

    def observe(self, round: RoundView) -> str | None:
        self.rounds.append(round)
        return None

    def reset(self) -> None:
        self.rounds.clear()


def test_the_rule_sees_each_round_by_number_with_its_calls_tools_and_arguments():
    """Round 2 is a reply with neither text nor a call: an error round, still numbered."""
    run = make_run([searches("a", "b"), Turn(chunks=[Chunk("", 1.0)]), searches("c"), "done"], [read_tool()])
    seen = Seen()
    run.loop.stop_rule = as_rule(seen, "seen")
    run.run()
    assert [(v.index, v.kind) for v in seen.rounds] == [(1, "read"), (2, "error"), (3, "read")]
    assert [[(c.tool, c.args) for c in v.calls] for v in seen.rounds] == [
        [("search", {"q": "a"}), ("search", {"q": "b"})], [], [("search", {"q": "c"})]]
    assert seen.rounds[0].calls[1].result == doc("b")
    assert run.events("run_start")[0].stop_rule == "seen", "the trace names the rule that judged, not the setting"


def test_duplicate_and_empty_call_ids_get_their_round_and_place():
    batch = Turn(tool_calls=[ToolCall("x", "search", {"q": "a"}), ToolCall("x", "search", {"q": "b"}),
                             ToolCall("", "search", {"q": "c"})])
    run = make_run([searches("first"), batch, "done"], [read_tool()])
    result = run.run()
    round2 = [m for m in result.messages if m.role == "assistant" and m.tool_calls][1]
    assert [c.id for c in round2.tool_calls] == ["x", "x~r2.1", "call~r2.2"]
    assert [e.call_id for e in run.events("tool_result")][1:] == ["x", "x~r2.1", "call~r2.2"]


def worker_notes(request, index):
    return Turn(chunks=[Chunk("Notes: " + doc(request.messages[-1].content), 1.0)])


def test_each_fan_out_of_a_round_opens_worker_contexts_named_by_round_and_fan_out():
    two = Turn(tool_calls=[call("delegate_sections", sections=["p", "q"]), call("delegate_sections", sections=["r"])])
    one = Turn(tool_calls=[call("delegate_sections", sections=["s"])])
    run = make_run([two, one, "done"], [], config=LoopConfig(section_workers=True), workers=worker_notes)
    run.run()
    assert [t.name for t in run.provider.requests[0].tools] == ["delegate_sections"], "the model is offered the tool"
    contexts = [e.context_id for e in run.events("request_reserved") if e.role == "worker"]
    assert contexts == ["w1-0", "w1-1", "w1.2-0", "w2-0"]
