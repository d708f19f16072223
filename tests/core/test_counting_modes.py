"""Remote token counting modes, reconciliation with reported usage, the
tokenize fallback and calibration persistence.

Each test pins a behaviour that a plausible wrong implementation breaks:
`auto` that prefers calibration over the tokenizer, a fallback that
drops the trace event or charges zero, a ledger that ignores reported
cached tokens, a calibration that forgets between sessions or fits a line
under what it saw, template counters that miss the tool preamble."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from imprint_core import (ByteEstimateCounter, CountingModes, EventLog, Message, TokenLedger, ToolSpec, Usage,
                          VirtualClock)
from imprint_core.calibration import CalibratedCounter, CalibrationStore, fit_envelope
from imprint_core.counting import COUNTING_MODES, Counting, count_prompt, select_counting
from imprint_core.errors import CountingUnavailable
from imprint_core.providers.remote import RemoteProvider
from imprint_core.providers.remote_tokens import (LlamaCppTokenize, LlamaServerTokenize, TemplateTokenCounter,
                                                  chatml_function_calling)

from helpers import read_tool, settings

REPO = Path(__file__).resolve().parents[2]
SEARCH = ToolSpec("search", "Search the encyclopedia.", {"type": "object", "properties": {"query": {"type": "string"}}})
MSGS = [Message("system", "You are a research assistant."), Message("user", "What is the Eiffel Tower?")]


def words(text: str) -> list[int]:
    return [hash(w) & 0xFFFF for w in text.split()]


def template_counter() -> TemplateTokenCounter:
    return TemplateTokenCounter("test-template", words, chatml_function_calling({"type": "function",
                                                                                  "function": {"name": "search"}}))


# ---- mode selection ------------------------------------------------------------------------------------
class FakeRemote:
    name = "remote:test"

    def __init__(self, tokenizer=None, calibration=None):
        self.counter = ByteEstimateCounter()
        self.counting_modes = CountingModes(tokenizer, calibration, reports_usage=True)


def calibrated(points=()) -> CalibratedCounter:
    c = CalibratedCounter(CalibrationStore(None), "remote:test", "m")
    for b, t, m in points:
        c.store.add(c.key, b, t, m)
    return c


@pytest.mark.parametrize("mode,has_tok,has_cal,used,exact", [
    ("byte", True, True, "byte", False),
    ("calibrated", True, True, "calibrated", False),
    ("tokenizer", True, True, "tokenizer", True),
    ("auto", True, True, "tokenizer", True),
    ("auto", False, True, "calibrated", False),
    ("auto", False, False, "byte", False),
    ("tokenizer", False, True, "byte", False),
    ("calibrated", True, False, "byte", False),
])
def test_every_mode_resolves_to_the_counter_it_names(mode, has_tok, has_cal, used, exact):
    tok, cal = template_counter() if has_tok else None, calibrated() if has_cal else None
    p = FakeRemote(tok, cal)
    c = select_counting(mode, p)
    assert (c.mode, c.used, c.exact, c.reconcile) == (mode, used, exact, True)
    assert c.counter is {"byte": p.counter, "calibrated": cal, "tokenizer": tok}[used]
    # A mode that could not be had says so (the loop traces the note); one that could says nothing.
    fell_back = mode not in ("byte", used) and not (mode == "auto" and used == "tokenizer")
    assert (c.note is not None) == fell_back
    assert set(COUNTING_MODES) == {"byte", "calibrated", "tokenizer", "auto"}


def test_providers_that_count_for_themselves_ignore_the_mode():
    from imprint_core import ScriptedProvider
    p = ScriptedProvider([], clock=VirtualClock())
    p.tokenizer = object()  # a local model holds its tokenizer: that is not a counting mode
    for mode in COUNTING_MODES:
        c = select_counting(mode, p)
        assert c.used == "native" and c.counter is p.counter and not c.reconcile


def test_each_mode_counts_its_own_figure():
    tok = template_counter()
    cal = calibrated([(300, True, 250), (900, True, 400), (200, False, 60)])
    p = FakeRemote(tok, cal)
    byte_units, byte = count_prompt(p.counter, MSGS, [SEARCH])
    assert byte == -(-len(byte_units) // 3)
    _, exact = count_prompt(tok, MSGS, [SEARCH])
    prompt = chatml_function_calling({"type": "function", "function": {"name": "search"}})(
        [{"role": m.role, "content": m.content} for m in MSGS],
        [{"type": "function", "function": SEARCH.to_dict()}])
    assert exact == len(prompt.split()) and "functions.search:" in prompt  # the tool preamble is counted
    _, fitted = count_prompt(cal, MSGS, [SEARCH])
    slope, over = fit_envelope(cal.store.points(cal.key))
    assert fitted == pytest.approx(slope * len(byte_units) + over[True], abs=1)
    assert len({byte, exact, fitted}) == 3


# ---- reconciliation --------------------------------------------------------------------------------------
def _settle(policy: str, usage: Usage | None, *, reconcile: bool = True, prompt=tuple(range(100)),
            ledger: TokenLedger | None = None):
    ledger = ledger or TokenLedger(10_000, policy)  # type: ignore[arg-type]
    ids = TemplateTokenCounter("ids", words, lambda m, t: "")
    r = ledger.reserve(80, 50)  # an estimate below the measured 100: reconciliation charges the measurement
    return ledger, ledger.settle(r, counter=ids, prompt_units=prompt, output_units=(1, 2, 3), outcome="ok",
                                 usage=usage, reconcile=reconcile)


def test_reconciled_prefix_refund_charges_measured_prompt_less_reported_cache_plus_measured_output():
    ledger, rec = _settle("prefix-refund", Usage(prompt_tokens=100, cached_tokens=30, output_tokens=7))
    assert rec.reconciled and (rec.charged_prompt, rec.charged_output, rec.charged) == (70, 7, 77)
    assert (rec.estimated_prompt, rec.reserved, rec.refunded) == (80, 130, 53)  # the reservation is as it was
    assert (rec.measured_prompt, rec.measured_cached, rec.measured_output) == (100, 30, 7)
    assert ledger.totals.charged == 77


def test_reconciled_prefix_refund_without_reported_cache_uses_the_counted_prefix():
    ledger = TokenLedger(10_000, "prefix-refund")
    _settle("prefix-refund", Usage(prompt_tokens=100, output_tokens=3), ledger=ledger)
    # Second request: the first 103 ids (prompt + reply) are the prefix the server already holds.
    _, rec = _settle("prefix-refund", Usage(prompt_tokens=130, output_tokens=5),
                     prompt=tuple(range(100)) + (1, 2, 3) + tuple(range(500, 527)), ledger=ledger)
    assert rec.prefix_reused == 80  # capped at the estimate, as without reconciliation
    assert (rec.charged_prompt, rec.charged_output) == (50, 5)


def test_reconciled_reserve_charges_the_reservation_beside_the_measured_prompt_plus_allowance():
    _, rec = _settle("reserve", Usage(prompt_tokens=100, cached_tokens=30, output_tokens=7))
    # the charge stays the reservation; the measurement's figure stands beside it
    assert rec.reconciled and rec.charged == rec.reserved == 130 and rec.measured_charge == 150
    assert rec.refunded == 0 and rec.overrun == 0


@pytest.mark.parametrize("usage,reconcile", [(None, True), (Usage(output_tokens=4), True),
                                             (Usage(prompt_tokens=100, output_tokens=7), False)])
def test_without_a_measured_prompt_or_reconciliation_the_estimate_is_charged(usage, reconcile):
    _, rec = _settle("reserve", usage, reconcile=reconcile)
    assert not rec.reconciled and rec.charged == rec.reserved == 130


# ---- the tokenize fallback ----------------------------------------------------------------------------------
def _remote(handler, **kw) -> RemoteProvider:
    return RemoteProvider("http://127.0.0.1:9/v1", "m", clock=VirtualClock(), stream=False,
                          transport=httpx.MockTransport(handler), **kw)


def _chat_reply(usage: dict) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": "The answer."}}],
                                     "usage": usage})


def test_a_failed_tokenize_call_falls_back_to_the_byte_estimate_with_a_trace_event():
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/extras/tokenize":
            return httpx.Response(500, json={"error": "tokenizer crashed"})
        return _chat_reply({"prompt_tokens": 61, "completion_tokens": 3})

    p = _remote(handler)
    tokenizer = LlamaCppTokenize(p.client, p.base_url, p.model, chatml_function_calling(None))
    p.counting_modes = replace(p.counting_modes, tokenizer=tokenizer)
    with pytest.raises(CountingUnavailable):
        tokenizer.probe()
    from imprint_core import ResearchLoop
    from imprint_core.trace import TraceWriter
    trace = TraceWriter(None, p.clock)
    log = EventLog(trace)
    loop = ResearchLoop(p, [read_tool()], settings(research_token_budget=4096), clock=p.clock, trace=trace)
    result = loop.run("What is the Eiffel Tower?")
    falls = [e for e in log.events if e.TYPE == "count_fallback"]
    assert falls and falls[0].wanted == "server-tokenize/llama-cpp-python" and falls[0].used == "utf8-bytes/3"
    assert "HTTP 500" in falls[0].reason
    rec = result.records[0]
    byte = count_prompt(p.counter, [Message("system", loop.config.system_prompt),
                                    Message("user", "What is the Eiffel Tower?")], loop.tool_specs)[1]
    assert rec.estimated_prompt == byte and rec.counter == "utf8-bytes/3"
    assert rec.reconciled and rec.charged_prompt == 61  # still settled with what the server measured
    assert "/extras/tokenize" in seen and "/v1/chat/completions" in seen


def test_a_working_tokenize_endpoint_is_the_estimate():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/extras/tokenize":
            text = json.loads(request.content)["input"]
            return httpx.Response(200, json={"tokens": words(text)})
        return _chat_reply({"prompt_tokens": 5, "completion_tokens": 3})

    p = _remote(handler)
    counter = LlamaCppTokenize(p.client, p.base_url, p.model, chatml_function_calling(None))
    counter.probe()
    units, n = count_prompt(counter, MSGS, [])
    rendered = chatml_function_calling(None)([{"role": m.role, "content": m.content} for m in MSGS], [])
    assert n == len(rendered.split()) and tuple(units) == tuple(words(rendered))


def test_llama_server_route_renders_on_the_server():
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/apply-template":
            assert body["tools"][0]["function"]["name"] == "search"
            return httpx.Response(200, json={"prompt": "a b c d e"})
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [1, 2, 3, 4, 5]})
        return httpx.Response(404)

    p = _remote(handler)
    assert count_prompt(LlamaServerTokenize(p.client, p.base_url, p.model), MSGS, [SEARCH])[1] == 5


# ---- calibration ---------------------------------------------------------------------------------------------
def test_the_envelope_never_under_counts_what_it_has_seen():
    pts = [(600, True, 249), (1100, True, 320), (1500, True, 373), (2000, True, 452), (500, False, 58)]
    slope, over = fit_envelope(pts)
    assert all(slope * b + over[t] >= m - 1e-9 for b, t, m in pts)
    assert any(abs(slope * b + over[t] - m) < 1e-6 for b, t, m in pts if t)  # and touches one: an envelope


def test_calibration_persists_in_the_cache_so_a_first_request_is_covered(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "calibration.json"
    monkeypatch.setenv("IMPRINT_CALIBRATION", str(path))
    from imprint_core.calibration import default_calibration_path
    assert default_calibration_path() == path
    first = CalibratedCounter(CalibrationStore(default_calibration_path()), "remote:x", "model-a")
    with pytest.raises(CountingUnavailable):
        first.count(MSGS, [SEARCH])  # nothing measured yet: the caller falls back
    first.observe(MSGS, [SEARCH], 240)
    first.observe(MSGS + [Message("user", "more " * 40)], [SEARCH], 300)
    data = json.loads(path.read_text())
    assert data["format"] == "imprint-calibration/1" and list(data["fits"]) == ["remote:x|model-a"]
    # A new session (a new store on the same file) counts its first request from the fit.
    later = CalibratedCounter(CalibrationStore(path), "remote:x", "model-a")
    assert later.count(MSGS, [SEARCH])[1] == 240
    other = CalibratedCounter(CalibrationStore(path), "remote:x", "model-b")  # per provider and model
    with pytest.raises(CountingUnavailable):
        other.count(MSGS, [SEARCH])
    with pytest.raises(CountingUnavailable):  # requests without tools are another kind
        later.count(MSGS, [])


def test_the_caller_learns_from_usage_and_counts_the_next_request_calibrated():
    sent: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        if len(sent) == 1:  # a search first, then the answer
            call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
            return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [call]}}],
                "usage": {"prompt_tokens": 500, "completion_tokens": 9}})
        return _chat_reply({"prompt_tokens": 600, "completion_tokens": 3})

    p = _remote(handler)
    p.counting_modes = replace(p.counting_modes, calibrated=calibrated())
    from imprint_core import ResearchLoop
    from imprint_core.trace import TraceWriter
    trace = TraceWriter(None, p.clock)
    log = EventLog(trace)
    from imprint_core import ResearchSettings
    s = ResearchSettings(research_token_budget=4096, token_counting="calibrated")
    result = ResearchLoop(p, [read_tool()], s, clock=p.clock, trace=trace).run("q")
    assert [e.TYPE for e in log.events].count("count_fallback") == 1  # the first request only
    first, second = result.records
    assert first.counter == "utf8-bytes/3" and second.counter == "calibrated/3"
    assert second.estimated_prompt >= 500  # learned from the first: a longer prompt is not counted below it
    fitted = p.counting_modes.calibrated
    assert fitted.store.points(fitted.key)[-1][2] == 600
    start = next(e for e in log.events if e.TYPE == "run_start")
    assert start.counting["mode"] == "calibrated" and start.counter == "calibrated/3"


# ---- the exact counters against the recorded servers ----------------------------------------------------------
def _recorded(server: str):
    import yaml
    for f in sorted((REPO / "traces" / "cassettes" / server).glob("*.yaml")):
        for i in yaml.safe_load(f.read_text())["interactions"]:
            if not i["request"]["uri"].endswith("/chat/completions"):
                continue
            body, text = json.loads(i["request"]["body"]), i["response"]["body"]["string"]
            usage = None
            for line in ([text] if text.lstrip().startswith("{") else
                         [ln[5:] for ln in text.splitlines() if ln.startswith("data:") and '"usage"' in ln]):
                try:
                    usage = (json.loads(line).get("usage") or usage)
                except ValueError:
                    pass
            if usage and usage.get("prompt_tokens"):
                yield f.name, body, usage["prompt_tokens"]


@pytest.mark.parametrize("server", ["llamacpp", "transformers"])
def test_the_local_template_counts_every_recorded_prompt_exactly(server):
    """The measured prompt of every recorded request with usage, counted
    from the request body by the counter the scenarios use."""
    from imprint_core.providers import remote_tokens as rt
    from harness.live.model_folder import ensure_model_dir
    folder = ensure_model_dir()
    checked = 0
    for name, body, measured in _recorded(server):
        if server == "transformers":
            render, encode = rt.hf_template(str(folder), body.get("chat_template_kwargs"))
        else:
            render, encode = rt.chatml_function_calling(body.get("tool_choice")), \
                rt.tokenizer_file_encoder(str(folder / "tokenizer.json"))
        assert len(encode(render(body["messages"], body.get("tools") or []))) == measured, name
        checked += 1
    assert checked >= 15


def test_a_recorded_session_that_asked_the_server_replays_its_tokenize_calls():
    """Scenario 56 counted with llama-cpp-python's POST /extras/tokenize while
    recording; its replay answers those calls from the cassette (a provider
    built outside the cassette would find no server and fall back), and the
    server's count is its measured prompt on every request."""
    from harness.scenarios import load_scenario
    from harness.scenarios.runner import run_scenario
    run = run_scenario(load_scenario(REPO / "scenarios" / "56-remote-llamacpp-reserve-policy.yaml"))
    assert run.passed, (run.error, run.failures)
    records = run.result.records + run.result.final_records
    assert records and all(r.counter == "server-tokenize/llama-cpp-python" for r in records)
    assert all(r.estimated_prompt == r.measured_prompt for r in records)
    assert all(r.reconciled and r.charged_prompt == r.measured_prompt for r in run.result.records)  # reserve policy
