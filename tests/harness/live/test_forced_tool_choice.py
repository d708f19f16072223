"""Forcing a tool call on transformers serve, which ignores the `tool_choice`
field: the scenario's tool_choice travels as a chat-template variable, the
model folder's template prefills the call, and transformers' response parser
reads the prefilled part from the prompt. Needs the model folder's tokenizer
(CI builds it); no server."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.live import model_folder as models
from harness.live.recording import Target
from harness.scenarios.providers import make_provider
from harness.scenarios import parse_scenario
from imprint_core import CancelToken, Message, ModelRequest, ToolSpec, VirtualClock

SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}
FETCH = {"type": "function", "function": {
    "name": "fetch", "description": "Read a document.",
    "parameters": {"type": "object", "properties": {"doc_id": {"type": "integer"}}, "required": ["doc_id"]}}}
PING = {"type": "function", "function": {"name": "ping", "description": "No arguments.",
                                         "parameters": {"type": "object", "properties": {}}}}
QUESTION = [{"role": "user", "content": "How do tides work?"}]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(models.ensure_model_dir())


def prompt(tokenizer, tools, **kw) -> str:
    return tokenizer.apply_chat_template(QUESTION, tools=tools, add_generation_prompt=True, tokenize=False, **kw)


@pytest.mark.parametrize("choice, tail", [
    ("required", '<|im_start|>assistant\n<tool_call>\n{"name": "'),
    ("search", '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {"query": "'),
    ({"type": "function", "function": {"name": "fetch"}},
     '<|im_start|>assistant\n<tool_call>\n{"name": "fetch", "arguments": {"doc_id": '),
    ("ping", '<|im_start|>assistant\n<tool_call>\n{"name": "ping", "arguments": '),
])
def test_a_forced_choice_prefills_the_call_as_far_as_the_schema_fixes_it(tokenizer, choice, tail):
    free = prompt(tokenizer, [SEARCH, FETCH, PING])
    forced = prompt(tokenizer, [SEARCH, FETCH, PING], tool_choice=choice)
    assert free.endswith("<|im_start|>assistant\n")
    assert forced.endswith(tail) and forced == free + tail.removeprefix("<|im_start|>assistant\n")


@pytest.mark.parametrize("choice", [None, "auto", "none", "search"])
def test_without_tools_or_without_forcing_the_prompt_is_unchanged(tokenizer, choice):
    plain = tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    kw = {} if choice is None else {"tool_choice": choice}
    # The tools-free final request keeps the forcing kwarg and must still answer.
    assert tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False, **kw) == plain
    if choice in (None, "auto", "none"):
        assert prompt(tokenizer, [SEARCH], **kw) == prompt(tokenizer, [SEARCH])


def test_the_response_parser_reads_the_prefilled_call_streamed_or_not(tokenizer):
    from transformers.utils.chat_parsing import ResponseParser
    prefix = prompt(tokenizer, [SEARCH], tool_choice="search")
    reply = 'tides moon"}}\n</tool_call><|im_end|>'
    want = {"type": "function", "function": {"name": "search", "arguments": {"query": "tides moon"}}}
    assert tokenizer.parse_response(reply, prefix=prefix)["tool_calls"] == [want]
    parser = ResponseParser(tokenizer.response_template, prefix=prefix)
    events = [e for i in range(0, len(reply), 3) for e in parser.feed(reply[i:i + 3])]
    message, tail = parser.finalize()
    closed = [e["value"] for e in events + tail if e["type"] == "region_close" and e.get("field") == "tool_calls"]
    assert closed == [want] and message["tool_calls"] == [want]


def remote_scenario(server: str, tool_choice: str | None, extra: str = "") -> str:
    choice = f"\n  tool_choice: {tool_choice}" if tool_choice else ""
    return (f"name: forced\nquestion: q\nprovider:\n  kind: remote\n  server: {server}{choice}{extra}\n"
            "tools:\n  - name: search\n    description: Search.\n"
            "    parameters: {type: object, properties: {query: {type: string}}, required: [query]}\n"
            "    default: {text: found}\n")


def body(server: str, tool_choice: str | None, extra: str = "", tools=True) -> dict:
    scn = parse_scenario(remote_scenario(server, tool_choice, extra), "forced.yaml")
    clock = VirtualClock()
    provider = make_provider(scn, clock, Target("http://127.0.0.1:9/v1", "m", server))
    try:
        spec = [ToolSpec("search", "Search.", {"type": "object", "properties": {"query": {"type": "string"}}})]
        return provider.body(ModelRequest([Message("user", "q")], spec if tools else [], 16, 60.0, CancelToken()))
    finally:
        provider.close()


def test_transformers_gets_the_choice_as_a_template_kwarg_llamacpp_as_the_field():
    tf = body("transformers", "search", extra="\n  extra_body: {stop: ['</tool_call>']}")
    assert "tool_choice" not in tf
    assert tf["chat_template_kwargs"] == {"tool_choice": {"type": "function", "function": {"name": "search"}}}
    assert tf["stop"] == ["</tool_call>"]
    assert body("transformers", "required")["chat_template_kwargs"] == {"tool_choice": "required"}
    assert "chat_template_kwargs" not in body("transformers", None)
    llama = body("llamacpp", "search")
    assert llama["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert "chat_template_kwargs" not in llama
    # A kwarg the scenario sets itself wins, and other kwargs are kept.
    own = body("transformers", "search",
               extra="\n  extra_body: {chat_template_kwargs: {tool_choice: required, enable_thinking: false}}")
    assert own["chat_template_kwargs"] == {"tool_choice": "required", "enable_thinking": False}


def test_a_folder_with_an_older_template_is_refreshed_without_reconverting(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    with open(folder / "model.safetensors", "wb") as fh:  # sparse: only its size is checked
        fh.truncate(120_000_000)
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192,
                                                              "response_template": {"old": True}}))
    (folder / models.BUILD_MARKER).write_text(json.dumps({"format": models.BUILD_FORMAT}))
    found = models.problems(folder)
    assert len(found) == 2 and all(models.STALE_TEMPLATE in p for p in found), found
    with pytest.raises(models.ModelNotBuilt, match="imprint model build"):
        models.ensure_model_dir(folder)
    monkeypatch.setenv(models.MODEL_DIR_ENV, str(folder))
    monkeypatch.setattr(models, "gguf_path", lambda: pytest.fail("a template refresh must not reconvert"))
    said: list[str] = []
    assert models.build_model_dir(progress=said.append) == folder
    assert models.problems(folder) == [] and "refreshed its templates" in said[-1]
    assert (folder / "chat_template.jinja").read_text() == models.CHAT_TEMPLATE
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg == {"model_max_length": 8192, "response_template": models.RESPONSE_TEMPLATE}
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["config.json", "tokenizer.json", "model.safetensors", "chat_template.jinja", "tokenizer_config.json",
         models.BUILD_MARKER])  # no temporary files left behind
