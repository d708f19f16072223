"""The scenario files' JSON schema, for editors: the model's own schema with a
description beside every key."""
from __future__ import annotations

import json

from .model import Scenario

# What an editor shows beside each key (Field descriptions in the classes win):
# one table, so the descriptions read as a whole and a test can require one for every key.
DOCS: dict[str, dict[str, str]] = {
    "Scenario": {
        "": "One scenario of the library: a question, a scripted or real provider, tools, and what must happen.",
        "name": "The scenario's name, shown in `imprint run`'s table and the report",
        "description": "What the scenario tests and which rule of the spec it pins",
        "question": "The user's question the research loop answers",
        "policy": "How the token ledger settles: reserve (no refund) or prefix-refund",
        "clock": "virtual (simulated time, exact) or real (wall clock, for the local model)",
        "loop": "The loop's own parameters: output allowance, section workers, the novelty rule",
        "provider": "The model: a scripted stub, the local model, or a recorded remote server",
        "tools": "The tools offered to the model, with their simulated results",
        "answers": "The user's answers to ask tools, in order",
        "cancel": "Cancel the run at a virtual time or on a trace event",
        "expect": "What the run must do; every key given is checked",
    },
    "Range": {"": "An inclusive range; either end may be left open", "min": "Lowest allowed value",
              "max": "Highest allowed value"},
    "CallSpec": {"": "A tool call the scripted model makes; `${i}` in string arguments is the repeat index"},
    "ErrorSpec": {"": "The provider fails this request", "message": "The error's message",
                  "retryable": "Whether the loop may retry the request",
                  "retry_after": "Seconds the provider asks to wait before a retry (Retry-After)"},
    "ChunkSpec": {"": "One streamed piece of a reply", "text": "The chunk's text",
                  "delay": "Simulated seconds before this chunk arrives"},
    "TurnSpec": {"calls": "Tool calls of this reply (a reply with calls is a research round)",
                 "answer": "The reply's text; a reply without calls is an answer",
                 "chunks": "The reply streamed in chunks with delays, instead of `answer`",
                 "error": "The request fails with this provider error",
                 "usage": "auto: the stub reports usage; none: it reports none"},
    "StubProviderSpec": {"": "A scripted model: replies taken from `script` in order, on the virtual clock",
                         "kind": "stub", "context_window": "Context window in tokens",
                         "bytes_per_token": "The byte estimate's bytes per token",
                         "script": "The coordinator's replies, in order (the run fails loudly if they run out)",
                         "workers": "Section workers' replies, in order", "final": "Replies to the final request"},
    "LocalProviderSpec": {"kind": "local", "dtype": "Weights' dtype (float32: the exact reference; int8: float32 "
                                                   "with torch's dynamic int8 linear layers)",
                          "context_window": "Context window in tokens (default: the model's)",
                          "seed": "Sampling seed"},
    "RemoteProviderSpec": {"kind": "remote", "server": "Which recorded server: transformers serve or llama.cpp",
                           "stream": "Stream the replies (server-sent events)",
                           "context_window": "Context window in tokens",
                           "bytes_per_token": "The byte estimate's bytes per token",
                           "temperature": "Sampling temperature sent to the server"},
    "Hit": {"": "One search hit, rendered as title, url, date, score and snippet lines", "title": "Hit title",
            "url": "Hit address", "snippet": "Hit text", "score": "Similarity score (volatile: not evidence)",
            "date": "Date shown with the hit (volatile: not evidence)"},
    "ResultSpec": {"text": "The result's text", "hits": "Search hits, rendered one per block",
                   "empty": "The call returns nothing (not evidence)", "error": "The call fails with this message"},
    "MatchRule": {"": "A result for calls whose arguments include `args`", "result": "What such a call returns"},
    "ToolSpecYaml": {"": "A simulated tool", "name": "The tool's name, as the model calls it",
                     "kind": "read (evidence), write (side effect; never deduplicated) or ask (asks the user)",
                     "description": "Shown to the model", "parameters": "JSON schema of the arguments",
                     "duration": "Simulated seconds a call takes", "default": "The result when nothing else applies"},
    "AnswerSpec": {"": "The user's answer to one ask call", "text": "The answer's text"},
    "CancelSpec": {"": "Cancel the run: at a virtual time, or on the n-th trace event of a type"},
    "LoopSpec": {"": "The research loop's parameters",
                 "research_max_output_tokens": "Output allowance of each research request (reserved in full)",
                 "section_workers": "Offer the delegate_sections tool (concurrent section workers)",
                 "max_retries": "Retries of a retryable provider error",
                 "final_deadline_sec": "Deadline of the final answer request, in seconds"},
    "StopReason": {"": "Why research stopped (imprint_core.types.StopReason)"},
    "FinalMode": {"": "How the reply was produced (imprint_core.types.FinalMode)"},
    "ExpectSpec": {"": "What the run must do; keys left out are not checked",
                   "stop_reason": "Why research stopped", "final_mode": "How the reply was produced",
                   "rounds": "Research rounds (a number or {min, max})", "reserved": "Tokens reserved in total",
                   "charged": "Tokens charged in total", "refunded": "Tokens refunded in total",
                   "writes_executed": "Write calls that ran",
                   "answer_contains": "Strings the final answer must contain"},
}


def json_schema() -> dict:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Imprint scenario"
    schema.setdefault("properties", {}).pop("source", None)
    for name, model in [("Scenario", schema), *schema.get("$defs", {}).items()]:
        docs = DOCS.get(name, {})
        if "" in docs:
            model.setdefault("description", docs[""])
        for key, prop in model.get("properties", {}).items():
            if key in docs:
                prop.setdefault("description", docs[key])
    schema["description"] = DOCS["Scenario"][""]
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
