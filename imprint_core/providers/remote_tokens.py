"""Exact prompt counts for remote providers: the server's template and tokenizer.

`TemplateTokenCounter` counts a request the way the server will see it: the
wire messages and tools (`openai_message`, `openai_tool`, exactly what
`RemoteProvider.body` sends) rendered with the server's own chat template,
then tokenized with the server's tokenizer. Two ways to get both:

- local template (`hf_template`): the chat template and tokenizer of a model
  folder, through transformers' `apply_chat_template(..., tools=...)`
  (imported lazily). transformers serve renders our model folder's
  template, so this is its exact count.
- ask the server (`LlamaCppTokenize`, `LlamaServerTokenize`): llama-cpp-python's
  server has `POST /extras/tokenize`; it renders with the handler of its
  `--chat_format`, of which `chatml-function-calling` is reproduced here
  (`chatml_function_calling`: tool results are left out of its prompt, a
  forced tool call is prefilled). llama.cpp's own server has `POST
  /apply-template` and `POST /tokenize` and needs no template here. The
  HTTP calls go through the provider's transport (so a recorded session
  replays them), and `probe()` checks the endpoint once, before the
  research time budget starts.

A failed count raises `CountingUnavailable`; the caller falls back to the
next counter and traces it. Counts are cached by the rendered text, so a
prompt counted for the reservation and again for the report costs one call.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from ..errors import CountingUnavailable
from ..types import Message, TokenCounter, ToolSpec
from .openai_format import openai_message, openai_tool

Render = Callable[[list[dict[str, Any]], list[dict[str, Any]]], str]
Encode = Callable[[str], Sequence[int]]

# llama-cpp-python 0.3.x, llama_chat_format.chatml_function_calling (MIT licence):
# the prompt its server builds for --chat_format chatml-function-calling.
CHATML_FUNCTION_CALLING = (
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n"
    "{% if message.role == 'system' %}"
    "{{ message.content }}"
    "{% if tool_calls %}"
    "\n\nYou have access to the following functions:\n"
    "{% for tool in tools %}"
    "\nfunctions.{{ tool.function.name }}:\n"
    "{{ tool.function.parameters | tojson }}"
    "\n{% endfor %}"
    "\n\nYou can respond to users messages with either a single message or one or more function calls."
    "\n\nTo respond with a message begin the message with 'message:', use the following format:"
    "\n\nmessage:"
    "\n<message>"
    "\n\nTo respond with one or more function calls begin the message with 'functions.<function_name>:', "
    "use the following format:"
    "\n\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
    "\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if message.role == 'user' %}"
    "{{ message.content }}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if message.role == 'assistant' %}"
    "{% if message.content and message.content | length > 0 %}"
    "{% if tool_calls %}"
    "message:\n"
    "{% endif %}"
    "{{ message.content }}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% if 'tool_calls' in message %}"
    "{% for tool_call in message.tool_calls %}"
    "functions.{{ tool_call.function.name }}:\n"
    "{{ tool_call.function.arguments }}"
    "{% endfor %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chatml_function_calling(tool_choice: Any) -> Render:
    """The prompt llama-cpp-python builds for `tool_choice` (None, "auto",
    "none" or a forced function): a forced call is prefilled after the
    generation prompt, and that is part of the prompt it reports. ("auto"
    with tools is counted as its first pass, the prompt without prefill.)"""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    template = ImmutableSandboxedEnvironment(autoescape=jinja2.select_autoescape(["html", "xml"]),
                                             undefined=jinja2.StrictUndefined).from_string(CHATML_FUNCTION_CALLING)

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if not tools or tool_choice is None or tool_choice == "none":
            return template.render(messages=messages, tools=[], tool_calls=None, add_generation_prompt=True)
        prompt = template.render(messages=messages, tools=tools, tool_calls=True, add_generation_prompt=True)
        if isinstance(tool_choice, dict):
            prompt += f"functions.{tool_choice['function']['name']}:\n"
        return prompt
    return render


def hf_template(folder: str, chat_template_kwargs: dict[str, Any] | None = None) -> tuple[Render, Encode]:
    """Render and encode with a model folder's chat template and tokenizer
    (transformers, imported here and only here)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder)
    kwargs = dict(chat_template_kwargs or {})

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return tok.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                       tokenize=False, **kwargs)

    def encode(text: str) -> Sequence[int]:
        return tok(text, add_special_tokens=False)["input_ids"]
    return render, encode


def tokenizer_file_encoder(path: str) -> Encode:
    """Encode with a `tokenizer.json` (the tokenizers package), no special tokens added."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(path))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


class TemplateTokenCounter(TokenCounter):
    """A remote request counted as the server renders and tokenizes it.
    `render` is None for a server that renders itself (`encode_messages`)."""
    exact = True

    def __init__(self, name: str, encode: Encode, render: Render | None = None, *,
                 encode_messages: Callable[[list[dict], list[dict]], Sequence[int]] | None = None):
        if render is None and encode_messages is None:
            raise ValueError("a template counter needs a renderer or a server that renders")
        self.name, self._render, self._encode, self._encode_messages = name, render, encode, encode_messages
        self._cache: dict[str, tuple[int, ...]] = {}

    def _ids(self, key: str, compute: Callable[[], Sequence[int]]) -> tuple[int, ...]:
        hit = self._cache.get(key)
        if hit is None:
            try:
                hit = tuple(compute())
            except CountingUnavailable:
                raise
            except Exception as exc:  # a template error, a tokenize call that failed
                raise CountingUnavailable(f"{self.name} could not count the request: "
                                          f"{type(exc).__name__}: {exc}") from exc
            if len(self._cache) >= 256:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def prompt_units(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> tuple[int, ...]:
        wire = [openai_message(m, json_arguments=True) for m in messages]
        wire_tools = [openai_tool(t) for t in tools]
        if self._render is None:
            key = json.dumps([wire, wire_tools], sort_keys=True, ensure_ascii=False)
            return self._ids(key, lambda: self._encode_messages(wire, wire_tools))  # type: ignore[misc]
        text = self._render(wire, wire_tools)
        return self._ids(text, lambda: self._encode(text))

    def output_units(self, reply: Message) -> tuple[int, ...]:
        # What the reply added, for prefix reuse and output charges when the
        # server reports no usage: its text and calls as the model wrote them.
        text = reply.content + "".join(f"{c.name}:\n{json.dumps(c.arguments, ensure_ascii=False)}"
                                       for c in reply.tool_calls)
        return self._ids("\x00out\x00" + text, lambda: self._encode(text)) if text else ()

    def to_tokens(self, units: int) -> int:
        return units


class _ServerCalls:
    """POSTs to a server's own endpoints, on the provider's client."""

    def __init__(self, client: Any, root: str, model: str, timeout: float = 10.0):
        self.client, self.root, self.model, self.timeout = client, root.rstrip("/"), model, timeout

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx
        try:
            r = self.client.post(self.root + path, json=body, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise CountingUnavailable(f"{path} failed: {type(exc).__name__}: {exc}") from exc
        if r.status_code != 200:
            raise CountingUnavailable(f"{path} answered HTTP {r.status_code}")
        try:
            data = r.json()
        except ValueError:
            raise CountingUnavailable(f"{path} answered with a body that is not JSON") from None
        if not isinstance(data, dict):
            raise CountingUnavailable(f"{path} answered with a body that is not a JSON object")
        return data


def server_root(base_url: str) -> str:
    """The server's root for its own endpoints: the API root without `/v1`."""
    return base_url[:-3] if base_url.endswith("/v1") else base_url


class LlamaCppTokenize(TemplateTokenCounter):
    """llama-cpp-python's server: our rendering of its chat format, its
    `POST /extras/tokenize` for the ids."""

    def __init__(self, client: Any, base_url: str, model: str, render: Render):
        self.calls = _ServerCalls(client, server_root(base_url), model)
        super().__init__("server-tokenize/llama-cpp-python", self._tokenize, render)

    def _tokenize(self, text: str) -> Sequence[int]:
        tokens = self.calls.post("/extras/tokenize", {"input": text, "model": self.calls.model}).get("tokens")
        if not isinstance(tokens, list):
            raise CountingUnavailable("/extras/tokenize answered without a token list")
        return tokens

    def probe(self) -> None:
        """One tokenize call: raises CountingUnavailable if the server has no such endpoint."""
        self._tokenize("probe")


class LlamaServerTokenize(TemplateTokenCounter):
    """llama.cpp's own server (llama-server): `POST /apply-template` renders
    with its template (tools included), `POST /tokenize` counts."""

    def __init__(self, client: Any, base_url: str, model: str):
        self.calls = _ServerCalls(client, server_root(base_url), model)
        super().__init__("server-tokenize/llama-server", self._tokenize, encode_messages=self._messages)

    def _tokenize(self, text: str) -> Sequence[int]:
        tokens = self.calls.post("/tokenize", {"content": text, "add_special": True, "parse_special": True}
                                 ).get("tokens")
        if not isinstance(tokens, list):
            raise CountingUnavailable("/tokenize answered without a token list")
        return [t["id"] if isinstance(t, dict) else t for t in tokens]

    def _messages(self, messages: list[dict], tools: list[dict]) -> Sequence[int]:
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        prompt = self.calls.post("/apply-template", body).get("prompt")
        if not isinstance(prompt, str):
            raise CountingUnavailable("/apply-template answered without a prompt")
        return self._tokenize(prompt)

    def probe(self) -> None:
        self._tokenize("probe")
