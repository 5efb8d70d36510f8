"""Assertions on the shape of one run's trace, as an OTLP receiver got it."""

from __future__ import annotations

import json
from typing import Any

from tests.support.otlp import ReceivedSpan

ERROR = 2  # OTLP status code
MAX_DEPTH = 3

QUEUE_ATTRIBUTES = (
    "messaging.system",
    "messaging.operation.name",
    "messaging.operation.type",
    "messaging.destination.name",
    "messaging.message.id",
)
CONTENT_ATTRIBUTES = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
)


def run_spans(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def has_root(spans: list[ReceivedSpan]) -> bool:
    return any(s.name.startswith("invoke_agent") for s in spans)


# What an OpenInference reader (Arize Phoenix) files each span of a run under.
OPENINFERENCE_KINDS = {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}


def assert_openinference_kinds(spans: list[ReceivedSpan]) -> None:
    """Every span names its OpenInference kind: the agent, LLM and tool spans theirs,
    the queue's and the doors' plumbing CHAIN (none UNKNOWN in a trace viewer)."""
    for s in spans:
        expected = OPENINFERENCE_KINDS.get(s.name.split()[0], "CHAIN")
        assert s.attributes.get("openinference.span.kind") == expected, (s.name, s.service)


def assert_flat_trace(spans: list[ReceivedSpan]) -> ReceivedSpan:
    """One root, no orphans, every job a child of the run linked to its send span,
    nothing deeper than MAX_DEPTH below the root, every span of a known OpenInference
    kind. Returns the root."""
    assert_openinference_kinds(spans)
    assert len({s.trace_id for s in spans}) == 1, {(s.name, s.trace_id) for s in spans}
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_id]
    assert [r.name.split()[0] for r in roots] == ["invoke_agent"], [r.name for r in roots]
    (root,) = roots
    for s in spans:
        depth, node = 0, s
        while node.parent_id:
            assert node.parent_id in by_id, f"{s.name}: parent {node.parent_id} never recorded"
            node, depth = by_id[node.parent_id], depth + 1
        assert depth <= MAX_DEPTH, f"{s.name} is {depth} deep"
    sends = {s.span_id: s for s in spans if s.name.startswith("send ")}
    for s in spans:
        if s.name.startswith("process "):
            assert s.parent_id == root.span_id, s.name
            assert s.kind == 5  # CONSUMER
            (link,) = s.links
            assert link[1] in sends, f"{s.name} links to a send span never recorded"
            send = sends[link[1]]
            assert send.kind == 4  # PRODUCER
            assert send.attributes["messaging.message.id"] == s.attributes["messaging.message.id"]
            assert send.name.split()[1] == s.name.split()[1]
        if s.name.split()[0] in ("send", "process"):
            for key in QUEUE_ATTRIBUTES:
                assert key in s.attributes, (s.name, key)
            assert s.attributes["messaging.operation.type"] == s.name.split()[0]
    return root


def assert_genai_attributes(spans: list[ReceivedSpan], run_id: str) -> None:
    """The attributes the GenAI conventions require (and the recommended ones we know)."""
    for s in spans:
        op = s.name.split()[0]
        if op in ("invoke_agent", "chat", "execute_tool"):
            assert s.attributes["gen_ai.operation.name"] == op, s.name
            assert s.attributes["gen_ai.conversation.id"] == run_id, s.name
        if op in ("invoke_agent", "chat"):
            assert s.attributes["gen_ai.provider.name"], s.name
            assert "gen_ai.request.model" in s.attributes, s.name
        if op == "invoke_agent":
            assert s.attributes["gen_ai.agent.name"]
        if op == "chat":
            assert s.kind == 3  # CLIENT
            if s.status_code == ERROR:  # no answer: no usage, no finish reason
                assert s.attributes["error.type"]
                continue
            for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
                assert key in s.attributes, (s.name, key)
            assert s.attributes["gen_ai.response.finish_reasons"][0] in (
                "stop",
                "tool_call",
                "length",
                "content_filter",
                "error",
                "other",
            )
        if op == "execute_tool":
            assert s.attributes["gen_ai.tool.type"] in ("function", "extension", "datastore")
            for key in ("gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.description"):
                assert key in s.attributes, (s.name, key)
        if s.scope == "agentq":
            assert s.scope_version
            assert s.schema_url.startswith("https://opentelemetry.io/schemas/")


def assert_no_content(spans: list[ReceivedSpan]) -> None:
    for s in spans:
        for key in CONTENT_ATTRIBUTES:
            assert key not in s.attributes, (s.name, key)


def exception_events(span: ReceivedSpan) -> list[dict[str, Any]]:
    return [attrs for name, attrs in span.events if name == "exception"]


def parts(span: ReceivedSpan, key: str) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = json.loads(span.attributes[key])
    return value
