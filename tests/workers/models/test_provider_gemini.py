from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.core.model_io import ModelResponse
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.models.base import OfferedTool
from tests.support.fake_gemini import FakeGemini, Turn
from tests.support.fake_openai import ToolCall
from tests.support.sinks import ListSink, generate_once

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

KEY = "AIza-test-0123456789"
ADD = OfferedTool(
    name="add",
    description="Add",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"a": {"type": "number"}},
        "additionalProperties": False,
    },
)


def model(base_url: str, **options: Any) -> ModelRef:
    return ModelRef(provider="gemini", name="gemini-test", base_url=base_url, options=options)


async def generate(
    http: httpx.AsyncClient, ref: ModelRef, **kw: Any
) -> tuple[ModelResponse, ListSink]:
    return await generate_once(http, ref, {"GEMINI_API_KEY": KEY}, **kw)


@pytest.mark.parametrize("stream", [True, False])
async def test_parallel_function_calls_get_stable_ids(
    http: httpx.AsyncClient, stream: bool
) -> None:
    turn = Turn(
        text="Adding now.",
        tool_calls=[ToolCall("add", {"a": 1}), ToolCall("add", {"a": 2})],
        thought_signature="c2lnbmF0dXJl",
        byte_split=9,
    )
    with FakeGemini([turn, turn]) as server:
        ref = model(server.base_url, stream=stream)
        first, sink = await generate(http, ref, tools=[ADD], step=3)
        again, _ = await generate(http, ref, tools=[ADD], step=3)
        sent = server.requests[0]
    expected_path = "/v1beta/models/gemini-test:" + (
        "streamGenerateContent" if stream else "generateContent"
    )
    assert sent.path == expected_path
    assert sent.query == ({"alt": ["sse"]} if stream else {})
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in str(sent.query)
    assert sink.text == "Adding now."
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_3_0", "add", '{"a": 1}'),
        ("call_3_1", "add", '{"a": 2}'),
    ]
    assert [c.id for c in again.tool_calls] == [c.id for c in first.tool_calls]
    assert first.finish_reason == "tool-calls"
    # The response's id and model version, for the chat span, beside the signatures.
    assert first.provider_metadata == {
        "gemini": {"signatures": {"call_3_0": "c2lnbmF0dXJl"}, "id": "r1", "model": "gemini-fake"}
    }
    usage = first.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (40, 13, 53)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (16, 5)


async def test_request_shape(http: httpx.AsyncClient) -> None:
    history: list[Message] = [
        UserMessage(content="add"),
        AssistantMessage(
            content=[
                TextPart(text="ok"),
                ToolCallPart(tool_call_id="call_0_0", tool_name="add", input={"a": 1}),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(
                    tool_call_id="call_0_0", tool_name="add", output="nope", is_error=True
                )
            ]
        ),
        UserMessage(content="again"),
    ]
    with FakeGemini([Turn(text="done")]) as server:
        await generate(
            http,
            model(server.base_url, generationConfig={"temperature": 0}),
            messages=history,
            system="sys",
            tools=[ADD],
            tool_choice=ToolChoiceTool(tool="add"),
        )
        body = server.requests[0].body
    assert body["systemInstruction"] == {"parts": [{"text": "sys"}]}
    assert body["generationConfig"] == {"temperature": 0}
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["add"]}
    }
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "add",
                    "description": "Add",
                    "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
                }
            ]
        }
    ]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "add"}]},
        {
            "role": "model",
            "parts": [{"text": "ok"}, {"functionCall": {"name": "add", "args": {"a": 1}}}],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "add", "response": {"error": "nope"}}},
                {"text": "again"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "content-filter"), ("OTHER", "other")],
)
async def test_finish_reasons(http: httpx.AsyncClient, reason: str, expected: str) -> None:
    with FakeGemini([Turn(text="x", finish_reason=reason)]) as server:
        response, _ = await generate(http, model(server.base_url))
    assert response.finish_reason == expected


async def test_truncated_stream_is_an_error(http: httpx.AsyncClient) -> None:
    with (
        FakeGemini([Turn(text="cut short", truncate=True)]) as server,
        pytest.raises(ProviderError, match="finishReason") as caught,
    ):
        await generate(http, model(server.base_url))
    assert caught.value.retryable


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (429, True), (503, True)])
async def test_http_errors(http: httpx.AsyncClient, status: int, retryable: bool) -> None:
    with (
        FakeGemini([Turn(status=status, error=f"gemini says {status}")]) as server,
        pytest.raises(ProviderError, match=f"gemini says {status}") as caught,
    ):
        await generate(http, model(server.base_url))
    assert caught.value.retryable is retryable
    assert KEY not in str(caught.value)
