"""Provider `local`: SmolLM2-135M-Instruct through transformers on the CPU.

What it promises, and how:

- **Exact counts.** `TokenizerCounter.prompt_units` renders the request with
  the model folder's own chat template (generation prompt included) and
  tokenizes it: those ids, no more and no fewer, are what `generate` feeds
  the model. `Usage.output_units` is the ids it generated, so the ledger's
  record of what a context has processed is the provider's own.
- **Deadlines and cancellation.** A manual decode loop checks the request's
  deadline (on the injected clock) and its cancel token before every token.
  The prompt prefill is one forward pass and is not interrupted: the record's
  "native prompt prefill is allowed to return". A UsageEvent precedes every
  TextDelta, so a consumer that stops at any event (the loop does, once the
  deadline has passed) knows exactly which ids were generated, and a cut
  reply is charged for those.
- **Prefix cache.** The KV cache of the last request on each `context_id` is
  kept with the ids it covers (prompt + generated). A new request reuses the
  longest common prefix of those ids and its own prompt, the same rule the
  ledger's prefix-refund policy charges by, and prefills only the rest; the
  final hidden state of every cached position is kept too, so a prompt that
  ends inside the cached prefix (a retry) needs no re-prefill at all.
  One detail: the last token of a reply that ended on its own (end of turn or
  output limit) has no KV entry yet, as no forward pass followed it; the next
  request's prefill feeds it together with the new prompt ids. It was
  generated, reported and charged as output by the request that produced it,
  so it is not counted again: `Usage.prompt_tokens` is always the prompt ids
  past the reused prefix, `cached_tokens` the reused ones, and their sum the
  whole prompt, exactly what the ledger estimated. Caches outlive a run:
  call `forget()` when a new run (a new ledger) starts.
- **Tool calls.** When tools are offered, decoding follows an llguidance
  grammar: free text, or text followed by `<tool_call>` blocks; once the
  model writes `<tool_call>`, the rest of the block must be
  `{"name": <an offered tool>, "arguments": <an object valid for its
  schema>}`. The model still chooses between answering and calling. A block
  left unfinished (output limit) becomes a ToolCall with `invalid_arguments`,
  which the executor turns into an error result.

What lives where: this module is the provider (loading, prefill and the
decode loop, usage); `_local_calls.py` holds the tool-call grammar,
parsing calls out of reply text and the reply-text watcher;
`local_tokenizer.py` the tokenizer counter, `local_attention.py` the
attention implementation and `local_kv_cache.py` the per-context prefix
cache. Their public names are importable from here too.

torch, transformers and llguidance are imported when a provider is built,
never when `imprint_core` is imported.
"""
from __future__ import annotations

import inspect
import itertools
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence, get_args

from ..errors import ModelUnavailable, ProviderError
from ..types import (Clock, CountingModes, Done, ModelRequest, ProviderEvent, TextDelta, ToolCallEvent, ToolSpec,
                     Usage, UsageEvent)
from ._local_calls import (NUMBER_BOUND, NUMBER_STEP, SAFE_INTEGER, TOOL_CLOSE, TOOL_OPEN, ReplyText, ToolChoice,
                           parse_tool_calls, tool_call_grammar)
from .local_attention import ATTENTION, attention_implementation
from .local_kv_cache import ContextCache, PrefixCaches, kv_cache
from .local_tokenizer import TokenizerCounter

__all__ = ["ATTENTION", "DEFAULT_DTYPE", "DTYPES", "Dtype", "LocalProvider", "LocalRequestStats", "NUMBER_BOUND",
           "NUMBER_STEP", "SAFE_INTEGER", "TOOL_CLOSE", "TOOL_OPEN", "TokenizerCounter", "ToolChoice",
           "parse_tool_calls", "tool_call_grammar"]

Dtype = Literal["auto", "bfloat16", "float32", "int8"]
DTYPES: tuple[str, ...] = get_args(Dtype)

# "auto" (the default) is bfloat16 where the CPU computes in it natively
# (AVX512-BF16 or AMX) and float32 elsewhere. With native bf16 it prefilled
# 1.7-2.2x as fast as float32 on the 2-core machines of earlier runs (a
# shorter uninterruptible stretch before the first token) and needs half the
# memory (reports/bench/local.json, section "dtype"). Without it (AVX2 only)
# torch emulates bf16: prefill measured 5-6x slower than float32 (52-62
# against 273-366 tokens/s on 650 tokens), and each bf16 decode step upcast
# the whole KV cache, which grows with the context (measured in
# reports/bench/peers-profile.md).
#
# "int8": float32 weights whose linear layers (lm_head included, the MLPs'
# down_proj not) torch's dynamic quantization turns into int8 matrices
# (`quantize_linear_layers`); activations and the KV cache stay float32. A
# decode step reads under half the weights' bytes: measured in
# reports/bench/local.json ("dtype") and peers.json ("local-int8"). Its
# replies differ from float32's where greedy choices were close, and, as a
# call's activations are quantized by their own largest value, a prompt
# prefilled in two parts (after a cached prefix) gets slightly different
# logits than one prefilled whole. Counts are the tokenizer's either way;
# float32 stays the exact reference.
DEFAULT_DTYPE: Dtype = "auto"


# The CPU flags (Linux /proc/cpuinfo) of the instructions that compute bfloat16 natively.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "amx_tile"})


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """This CPU's flags, from /proc/cpuinfo's first `flags` line (none where it cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and ":" in line:
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def resolve_dtype(dtype: str, flags: frozenset[str] | None = None) -> str:
    """The dtype "auto" stands for on this CPU (bfloat16 where it computes
    it natively, else float32); others as they are."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if BF16_FLAGS & (cpu_flags() if flags is None else flags) else "float32"


# Linear layers int8 leaves in float32, by the end of their name: the MLP's
# output projection, whose inputs carry the few huge activations of this
# model. Dynamic quantization scales a call's activations by their largest
# value, so with down_proj in int8 those outliers cost every other position
# its precision: greedy next-token choices along a 1,262-token prompt agreed
# with float32's at 81% of positions, against 91% with it left in float32,
# for 25% more time per decode step (40 against 50 ms, measured in one run).
FLOAT32_LINEAR = ("down_proj",)


def quantize_linear_layers(torch: Any, model: Any) -> None:
    """The nn.Linear layers of `model` (in place, lm_head included, those
    FLOAT32_LINEAR names excepted) as torch's dynamically quantized int8
    linear layer: int8 weights with a scale per output channel (81% against
    78% per tensor, at no measurable cost), activations quantized per call
    (fbgemm/x86 kernels on x86). torch 2.13 marks torch.ao.quantization
    deprecated in favour of torchao, which is not installed here; its
    warnings are silenced for this call only."""
    import warnings
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    spec = {name: per_channel_dynamic_qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and not name.endswith(FLOAT32_LINEAR)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)


@dataclass
class LocalRequestStats:
    """What one request did, measured (for tests, traces and benchmarks)."""
    context_id: str
    prompt_ids: int
    reused: int                 # prompt ids covered by the context's cache
    prefilled: int              # prompt ids past the reused prefix (= Usage.prompt_tokens)
    fed: int                    # ids the prefill pass processed (prefilled, plus a deferred reply token)
    generated: int = 0
    stop: str = ""              # eos | max_tokens | deadline | cancelled | grammar | closed (consumer stopped)
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    first_token_at: float | None = None  # clock time the first token was chosen
    stopped_at: float | None = None
    deadline: float | None = None
    tool_calls: int = 0
    invalid_tool_calls: int = 0


# ---- the provider ------------------------------------------------------------------------------
class LocalProvider:
    """SmolLM2-135M-Instruct (or any llama-family folder built the same way).

    `model_path`: the converted model folder (default: the one
    `imprint model build` makes). `dtype`: auto (default: bfloat16 where
    the CPU has native bf16, else float32), bfloat16, float32 or int8
    (float32 with int8 linear layers).
    `tool_choice`: auto (the model decides), required (every reply with tools
    offered is a call), none (tools are shown but never called).
    `max_tool_calls`: calls per reply (default 1: allowed more, this model
    followed a call with a newline, which can only open another call, and
    left that one unfinished).
    `temperature` 0 decodes greedily (deterministic); above 0 samples with a
    generator seeded by `seed`. `max_cached_contexts`: how many contexts keep
    their KV cache (least recently used go first; a context whose cache was
    dropped is prefilled whole, and its Usage says so). Loading the model is
    setup: build the provider before the research time budget starts."""

    name = "local"
    # Counts with its own tokenizer, exactly: `chat.token_counting` does not apply.
    counting_modes: CountingModes | None = None

    def __init__(self, model_path: str | Path, *, clock: Clock, dtype: Dtype = DEFAULT_DTYPE,
                 context_window: int | None = None, tool_choice: ToolChoice = "auto", max_tool_calls: int = 1,
                 temperature: float = 0.0, seed: int = 0, max_cached_contexts: int = 8,
                 threads: int | None = None):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        if tool_choice not in ("auto", "required", "none"):
            raise ValueError(f"tool_choice must be auto, required or none, got {tool_choice!r}")
        started = time.perf_counter()
        self.model_path = Path(model_path).expanduser()
        if not (self.model_path / "config.json").is_file():
            raise ModelUnavailable(f"the local model folder {self.model_path} does not exist or holds no "
                                   f"config.json", file=str(self.model_path))
        if "torch" not in sys.modules:
            # Busy-waiting OpenMP workers made each decode step 10-20x slower
            # whenever another process wanted a core (2.3 s against 0.1 s per
            # token, measured on two shared cores). Only takes effect before
            # torch is first imported; an explicit setting wins.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()  # a weights bar per scenario buries the run's own output
        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self.clock = clock
        self.dtype = dtype = resolve_dtype(dtype)  # the one loaded: bfloat16, float32 or int8
        self.tool_choice: ToolChoice = tool_choice
        self.max_tool_calls = max_tool_calls
        self.temperature = float(temperature)
        self._generator = torch.Generator().manual_seed(seed)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(
                self.model_path, dtype=torch.bfloat16 if dtype == "bfloat16" else torch.float32, local_files_only=True,
                attn_implementation=attention_implementation(torch))
        except (OSError, ValueError) as exc:
            # local_files_only: never the hub, whatever the process environment says.
            raise ModelUnavailable(f"the local model folder {self.model_path} could not be loaded ({exc})",
                                   file=str(self.model_path)) from exc
        self.model.eval()
        if dtype == "int8":
            quantize_linear_layers(torch, self.model)
        self.config = self.model.config
        window = int(self.config.max_position_embeddings)
        self.context_window = min(window, int(context_window)) if context_window else window
        self.counter = TokenizerCounter(self.tokenizer, name=f"hf-tokenizer/{self.model_path.name}")
        # End of turn (<|im_end|>), and end of text should the model write it.
        self.stop_ids = {int(i) for i in _as_list(self.config.eos_token_id)}
        vocab = self.tokenizer.get_vocab()
        if "<|endoftext|>" in vocab:
            self.stop_ids.add(int(vocab["<|endoftext|>"]))
        self._cache_kw = "cache" if "cache" in inspect.signature(self.model.model.forward).parameters \
            else "past_key_values"
        self._model_lock = threading.Lock()
        self.prefix_caches = PrefixCaches(max_cached_contexts)
        # The constrained-decoding tokenizer is setup too: built here, before
        # the research time budget starts, not inside the first request.
        import llguidance
        self._lltok = llguidance.LLTokenizer(self.counter._backend.to_str(), eos_token=self.tokenizer.eos_token_id)
        self._grammars: dict[str, str] = {}
        self._call_ids = itertools.count(1)
        self.stats: list[LocalRequestStats] = []
        self.load_seconds = time.perf_counter() - started

    # -- cache management ---------------------------------------------------------------------
    def forget(self, context_id: str | None = None) -> None:
        """Drop one context's cache (all, with None).

        Call it when a new run starts with a new ledger: the ledger knows
        nothing of an earlier run, so a cache kept from one would make the
        provider prefill less than the new ledger charges."""
        self.prefix_caches.forget(context_id)

    def cached_ids(self, context_id: str) -> tuple[int, ...]:
        return self.prefix_caches.cached_ids(context_id)

    # -- model calls ----------------------------------------------------------------------------
    def _forward(self, cache: Any, ids: Sequence[int]) -> Any:
        torch = self._torch
        with self._model_lock, torch.inference_mode():
            out = self.model.model(input_ids=torch.tensor([list(ids)], dtype=torch.long),
                                   use_cache=True, **{self._cache_kw: cache})
        return out.last_hidden_state[0]

    def _logits(self, hidden_row: Any) -> Any:
        with self._torch.inference_mode():
            return self.model.lm_head(hidden_row)[-1].float()

    def _prefill(self, ctx: ContextCache, prompt: list[int]) -> tuple[Any, int, int]:
        """Bring ctx's KV cache to cover `prompt`; return the next-token
        logits, the reused prefix length and the number of ids fed."""
        reuse, feed = ctx.reuse(prompt, lambda: kv_cache(self._torch, self.config))
        if feed:
            hidden = self._forward(ctx.cache, feed)
            ctx.hidden.append(hidden)
            ctx.kv_len = len(prompt)
            logits = self._logits(hidden[-1:])
        else:  # the prompt ends inside the cache: its last position's state is kept
            logits = self._logits(ctx.hidden.row(reuse - 1))
        return logits, reuse, len(feed)

    def _matcher(self, tools: Sequence[ToolSpec]) -> Any:
        import llguidance
        key = json.dumps([[[t.name, t.parameters] for t in tools], self.tool_choice, self.max_tool_calls],
                         sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = llguidance.grammar_from("lark", tool_call_grammar(tools, choice=self.tool_choice,
                                                                         max_calls=self.max_tool_calls))
            self._grammars[key] = grammar
        matcher = llguidance.LLMatcher(self._lltok, grammar, log_level=0)
        if matcher.is_error():
            raise ProviderError("grammar", f"the tool-call grammar could not be built: {matcher.get_error()}",
                                processed=False)
        return matcher

    def _choose(self, logits: Any, matcher: Any, bitmask: Any) -> int | None:
        torch = self._torch
        if matcher is not None:
            import numpy as np
            import llguidance.numpy as llnp
            llnp.fill_next_token_bitmask(matcher, bitmask)
            allowed = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:logits.shape[-1]]
            if not allowed.any():
                return None
            logits = logits.masked_fill(torch.from_numpy(allowed == 0), float("-inf"))
        if self.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / self.temperature, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self._generator))

    # -- the Provider protocol --------------------------------------------------------------------
    def generate(self, request: ModelRequest) -> Iterator[ProviderEvent]:
        prompt = list(self.counter.prompt_units(request.messages, request.tools))
        if len(prompt) >= self.context_window:
            raise ProviderError("context_overflow", f"prompt of {len(prompt)} tokens does not fit the context "
                                f"window of {self.context_window}", processed=False)
        limit = max(0, min(request.max_output_tokens, self.context_window - len(prompt)))
        if request.cancel.cancelled:
            raise ProviderError("cancelled", "cancelled before the prompt was processed", processed=False)
        if self.clock.now() >= request.deadline:
            raise ProviderError("deadline", "the deadline passed before the prompt was processed", processed=False)
        use_tools = bool(request.tools) and self.tool_choice != "none"
        matcher = self._matcher(request.tools) if use_tools else None
        bitmask = None
        if matcher is not None:
            import numpy as np
            bitmask = np.full((1, (self._lltok.vocab_size + 31) // 32), -1, dtype=np.int32)
        return self._generate(request, prompt, limit, matcher, bitmask)

    def _generate(self, request: ModelRequest, prompt: list[int], limit: int, matcher: Any,
                  bitmask: Any) -> Iterator[ProviderEvent]:
        clock = self.clock
        ctx = self.prefix_caches.take(request.context_id)
        text = ReplyText(self.tokenizer, self.stop_ids, watch_calls=matcher is not None)
        generated: list[int] = []
        stats = LocalRequestStats(request.context_id, len(prompt), 0, 0, 0, deadline=request.deadline)
        keep = False
        try:
            t0 = time.perf_counter()
            try:
                logits, reused, fed = self._prefill(ctx, prompt)
            except Exception as exc:  # a failed forward pass leaves the cache unusable
                raise ProviderError("local_error", f"prefill failed: {type(exc).__name__}: {exc}") from exc
            keep = True
            # Measured by the model, not by the counter: the positions its KV
            # cache holds once the prompt is in (gate condition 2 compares the
            # estimate with this). A prefix-cache mistake shows up here.
            held = int(ctx.cache.get_seq_length())
            stats.reused, stats.prefilled, stats.fed = reused, len(prompt) - reused, fed
            stats.prefill_seconds = time.perf_counter() - t0
            self.stats.append(stats)
            t1 = time.perf_counter()

            def usage() -> Usage:
                # OpenAI's meaning: prompt_tokens counts the whole prompt, cached_tokens
                # the part of it served from the cache (so prefilled = the difference).
                return Usage(prompt_tokens=held, cached_tokens=reused,
                             output_tokens=len(generated), output_units=tuple(generated))

            def halt() -> str | None:
                if request.cancel.cancelled:
                    return "cancelled"
                if clock.now() >= request.deadline:
                    return "deadline"
                if len(generated) >= limit:
                    return "max_tokens"
                return None

            stats.stop = "closed"
            while (stop := halt()) is None:
                token = self._choose(logits, matcher, bitmask)
                if token is None:
                    stop = "grammar"
                    break
                if stats.first_token_at is None:
                    stats.first_token_at = clock.now()
                generated.append(token)
                ctx.ids = prompt + generated  # what the KV cache (plus one pending token) covers
                if matcher is not None and not matcher.consume_token(token):
                    stop = "grammar"
                    break
                delta = text.push(token)
                # Usage first: a consumer that stops at the next event still
                # knows every id generated so far.
                yield UsageEvent(usage())
                if delta:
                    yield TextDelta(delta)
                if token in self.stop_ids:
                    stop = "eos"
                    break
                if (stop := halt()) is not None:
                    break
                try:
                    hidden = self._forward(ctx.cache, [token])
                except Exception as exc:
                    keep = False
                    raise ProviderError("local_error", f"decoding failed: {type(exc).__name__}: {exc}") from exc
                ctx.hidden.append(hidden)
                ctx.kv_len = len(ctx.ids)
                logits = self._logits(hidden)
            stats.stop = stop
            stats.decode_seconds = time.perf_counter() - t1
            stats.stopped_at = clock.now()
            stats.generated = len(generated)
            rest = text.finish()
            if rest:
                yield UsageEvent(usage())  # complete before anything else, as above
                yield TextDelta(rest)
            if matcher is not None and text.in_call:
                calls = parse_tool_calls(text.raw, lambda: f"call_{next(self._call_ids)}")
                stats.tool_calls = len(calls)
                stats.invalid_tool_calls = sum(c.invalid_arguments is not None for c in calls)
                for c in calls:
                    yield ToolCallEvent(c)
            yield UsageEvent(usage())
            yield Done()
        finally:
            stats.generated = len(generated)
            if stats.stopped_at is None:
                stats.stopped_at = clock.now()
            if keep:
                self.prefix_caches.put(request.context_id, ctx)


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]