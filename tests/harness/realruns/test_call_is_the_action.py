"""A call is the action the agent took (issue 42, item 4): for every importer,
on a real file, the first call's arguments are text the agent itself emitted
(found verbatim in the source file), and only Magentic-One, whose
Orchestrator words a request that its agents then act on, keeps that request
apart, as the call's `request`."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.realruns.importers import import_file

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data" / "raw"
FILES = {
    "mini-swe-agent": SHARED / "mini-swe-agent" / "deepseek_chat_dev" / "pvlib__pvlib-python-1072.traj.json.gz",
    "tau-bench": SHARED / "tau-bench" / "gpt-4o-airline.json.gz",
    "who-and-when (AG2)": SHARED / "who-and-when" / "Algorithm-Generated" / "1.json",
    "who-and-when (Magentic-One)": SHARED / "who-and-when" / "Hand-Crafted" / "1.json",
    "fireact": ROOT / "tests" / "fixtures" / "outcomes" / "fireact" / "hotpotqa_dev_0_500_llama-2-7b-mini.json",
    "reflexion": ROOT / "tests" / "fixtures" / "outcomes" / "reflexion" / "100_questions_7_trials-mini.txt",
    "react-webshop": ROOT / "tests" / "fixtures" / "outcomes" / "webshop-mini.ipynb",
    "intercode": ROOT / "tests" / "fixtures" / "intercode" / "ic_sql_multiturn_gpt-3.5_10_turns.json",
    "tau-bench retail (AgentRx)": ROOT / "tests" / "fixtures" / "outcomes" / "tau-retail-mini.json",
    "inspect": ROOT / "tests" / "fixtures" / "interop" / "inspect" / "research.eval",
    "otel": ROOT / "tests" / "fixtures" / "interop" / "otel" / "genai.otlp.jsonl",
}
WITH_REQUEST = {"who-and-when (Magentic-One)"}


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _raw(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if path.suffix == ".eval":            # a zip archive: its members' text
        import zipfile
        with zipfile.ZipFile(path) as z:
            return "\n".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())
    return data.decode("utf-8")


@pytest.mark.parametrize("source", list(FILES))
def test_the_first_call_is_what_the_agent_emitted(source):
    path = FILES[source]
    if not path.exists():
        pytest.skip(f"{path} is not here (shared data beside the checkout)")
    logs = import_file(path)
    raw = _raw(path)
    call = next(c for log in logs for r in log.rounds for c in r.calls)
    values = [v for v in _strings(call.args) if v.strip()]
    assert values, f"{source}: the call carries no action"
    for v in values:
        forms = {v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1]}
        assert any(f in raw for f in forms), f"{source}: {v[:60]!r} is not in the source"
    requests = {c.request is not None for log in logs for r in log.rounds for c in r.calls}
    assert requests == ({True} if source in WITH_REQUEST else {False})
