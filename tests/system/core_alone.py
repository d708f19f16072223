"""A scripted research loop on the core alone: run as a script (by
tests/system/test_light_core.py, and in a fresh venv holding only
`pip install .`), it refuses every package of the `harness` extra and the
harness itself, researches one question with a scripted model and a search
tool until the novelty rule stops it, and prints the result as JSON."""
from __future__ import annotations

import importlib.abc
import json
import sys

HARNESS_ONLY = ("harness", "pandas", "matplotlib", "dask", "distributed", "vcr", "rich", "yaml", "pydantic",
                "scipy", "filelock")
"""What the core must run without: the harness and the `harness` extra's packages."""


class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HARNESS_ONLY:
            raise ImportError(f"{name} is not part of the core")
        return None


def main() -> int:
    sys.meta_path.insert(0, Refuse())
    from imprint_core import (FunctionTool, ResearchLoop, ResearchSettings, ScriptedProvider, ToolSpec, Turn,
                              VirtualClock, call)
    clock = VirtualClock()
    pages = {"a": "The tower was finished in 1889.", "b": "It is 330 metres tall."}
    turns = [Turn(tool_calls=[call("search", query=q)]) for q in ("a", "b", "a", "b", "a", "b", "a", "b", "a")]
    provider = ScriptedProvider(turns, clock=clock, final=["Finished in 1889; 330 m tall."])
    search = FunctionTool(ToolSpec("search", "find pages", kind="read"), lambda args, ctx: pages[args["query"]])
    loop = ResearchLoop(provider, [search], ResearchSettings.from_mapping({"chat.research_no_progress_rounds": 2}),
                        clock=clock)
    result = loop.run("When was the tower finished, and how tall is it?")
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(HARNESS_ONLY))
    print(json.dumps({"stop_reason": result.stop_reason.value, "final_mode": result.final_mode.value,
                      "rounds": result.rounds, "answer": result.answer, "loaded": loaded}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
