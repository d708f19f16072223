"""Scripted tools for scenarios: results by call index or matching
arguments, simulated durations, user answers for ask tools."""
from __future__ import annotations

import string
from typing import Any

from imprint_core.errors import UserInputError
from imprint_core.tools import FunctionTool
from imprint_core.types import ToolContext, ToolOutput, ToolSpec

from .model import AnswerSpec, ResultSpec, Scenario, ToolSpecYaml


class ScriptedToolError(RuntimeError):
    """Raised by a scenario's `raises:` result, as a real tool would fail."""


def _fill(text: str, values: dict[str, Any]) -> str:
    return string.Template(text).safe_substitute({k: str(v) for k, v in values.items()})


def _matches(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(k in got and got[k] == v for k, v in want.items())


class ScriptedTool:
    def __init__(self, spec: ToolSpecYaml, answers: list[AnswerSpec], source: str | None):
        self.spec_yaml, self.answers, self.source = spec, answers, source
        self.calls = 0

    def pick(self, args: dict[str, Any]) -> ResultSpec | AnswerSpec:
        self.calls += 1
        s = self.spec_yaml
        for rule in s.match:
            if _matches(rule.args, args):
                return rule.result
        if s.kind == "ask" and not s.results and not s.default:
            if not self.answers:
                raise UserInputError(f"ask tool {s.name!r} was called but the scenario has no user answer left",
                                     file=self.source, key="answers")
            return self.answers.pop(0)
        if s.results:
            i = self.calls - 1
            if i < len(s.results):
                return s.results[i]
            if s.cycle:
                return s.results[i % len(s.results)]
        if s.default is not None:
            return s.default
        raise UserInputError(f"tool {s.name!r} has no scripted result for call {self.calls} "
                             f"(results: {len(s.results)}, no default, cycle off)", file=self.source,
                             key=f"tools.{s.name}")

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        picked = self.pick(args)
        values = {**args, "n": self.calls}
        if isinstance(picked, AnswerSpec):
            ctx.work(picked.wait)
            return ToolOutput(picked.text)
        ctx.work(picked.duration if picked.duration is not None else self.spec_yaml.duration)
        if picked.raises is not None:
            raise ScriptedToolError(_fill(picked.raises, values))
        if picked.error is not None:
            return ToolOutput(_fill(picked.error, values), status="error")
        if picked.empty:
            return ToolOutput("", status="empty")
        if picked.hits is not None:
            hits = [_fill(h.render(), values) for h in picked.hits]
            return ToolOutput("\n\n".join(hits), segments=tuple(hits), status="ok" if hits else "empty")
        return ToolOutput(_fill(picked.text or "", values))


def build_tools(scn: Scenario) -> list[FunctionTool]:
    answers = list(scn.answers)  # shared: answers are given in order across ask tools
    tools = []
    for t in scn.tools:
        st = ScriptedTool(t, answers, scn.source)
        tools.append(FunctionTool(ToolSpec(t.name, t.description, t.parameters, t.kind), st, blocking=t.blocking))
    return tools
