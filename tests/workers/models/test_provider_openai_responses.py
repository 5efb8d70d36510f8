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
from tests.support.fake_openai import ToolCall
from tests.support.fake_responses import FakeResponses, Turn
from tests.support.sinks import ListSink, generate_once

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

KEY = "sk-resp-test-0123456789"
ADD = OfferedTool(name="add", description="Add", input_schema={"type": "object"})


def model(base_url: str, **options: Any) -> ModelRef:
    return ModelRef(provider="openai-responses", name="gpt-r", base_url=base_url, options=options)


async def generate(
    http: httpx.AsyncClient, ref: ModelRef, **kw: Any
) -> tuple[ModelResponse, ListSink]:
    return await generate_once(http, ref, {"OPENAI_API_KEY": KEY}, **kw)


@pytest.mark.parametrize(("stream", "terse"), [(True, False), (True, True), (False, False)])
async def test_parallel_function_calls_reasoning_and_usage(
    http: httpx.AsyncClient, stream: bool, terse: bool
) -> None:
    turn = Turn(
        text="Adding.",
        reasoning="The user wants sums.",
        tool_calls=[ToolCall("add", {"a": 1}, id="call_A"), ToolCall("add", {"b": 2}, id="call_B")],
        terse_completed=terse,
        byte_split=11,
    )
    with FakeResponses([turn]) as server:
        response, sink = await generate(http, model(server.base_url, stream=stream), tools=[ADD])
        sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sink.text == "Adding."
    assert response.text == "Adding."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_A", "add", '{"a": 1}'),
        ("call_B", "add", '{"b": 2}'),
    ]
    assert response.finish_reason == "tool-calls"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (30, 12, 42)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (10, 4)
    reasoning = response.provider_metadata["openai-responses"]["reasoning"]
    assert reasoning == [
        {
            "type": "reasoning",
            "id": "rs_0",
            "summary": [{"type": "summary_text", "text": "The user wants sums."}],
        }
    ]


async def test_request_shape_and_history_items(http: httpx.AsyncClient) -> None:
    history: list[Message] = [
        UserMessage(content="add"),
        AssistantMessage(
            content=[
                TextPart(text="ok"),
                ToolCallPart(tool_call_id="call_1", tool_name="add", input={"a": 1}),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id="call_1", tool_name="add", output="boom", is_error=True)
            ]
        ),
    ]
    with FakeResponses([Turn(text="done")]) as server:
        await generate(
            http,
            model(server.base_url, store=False),
            messages=history,
            system="be nice",
            tools=[ADD],
            tool_choice=ToolChoiceTool(tool="add"),
        )
        body = server.requests[0].body
    assert body["instructions"] == "be nice"
    assert body["store"] is False
    assert body["stream"] is True
    assert body["tool_choice"] == {"type": "function", "name": "add"}
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["input"] == [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "ok"},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "boom"},
    ]


async def test_reasoning_items_are_replayed_before_the_calls(http: httpx.AsyncClient) -> None:
    """The loop carries `ModelResponse.provider_metadata` onto the assistant message."""
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    metadata = {"openai-responses": {"reasoning": [reasoning]}}
    call = ToolCallPart(tool_call_id="c", tool_name="add", input={})
    assistant = AssistantMessage(content=[call])
    if "provider_metadata" in AssistantMessage.model_fields:
        assistant = AssistantMessage(content=[call], provider_metadata=metadata)
    else:  # until the field exists: the provider reads it with getattr
        object.__setattr__(assistant, "provider_metadata", metadata)
    with FakeResponses([Turn(text="done")]) as server:
        await generate(http, model(server.base_url), messages=[UserMessage(content="x"), assistant])
        items = server.requests[0].body["input"]
    assert items[1] == reasoning
    assert items[2]["type"] == "function_call"


async def test_web_search_is_provider_executed(http: httpx.AsyncClient) -> None:
    search = OfferedTool(name="web_search", provider_executed=True)
    with FakeResponses([Turn(text="Found.", web_search="agentq")]) as server:
        response, _ = await generate(http, model(server.base_url), tools=[search])
        assert server.requests[0].body["tools"] == [{"type": "web_search"}]
    call = response.tool_calls[0]
    assert call.provider_executed
    assert call.name == "web_search"
    assert call.arguments == {"type": "search", "query": "agentq"}
    assert response.finish_reason == "stop"


@pytest.mark.parametrize("stream", [True, False])
async def test_incomplete_is_length(http: httpx.AsyncClient, stream: bool) -> None:
    with FakeResponses([Turn(text="trunc", incomplete="max_output_tokens")]) as server:
        response, _ = await generate(http, model(server.base_url, stream=stream))
    assert response.finish_reason == "length"


async def test_failed_response_raises(http: httpx.AsyncClient) -> None:
    with (
        FakeResponses([Turn(failed="upstream broke")]) as server,
        pytest.raises(ProviderError, match="upstream broke") as caught,
    ):
        await generate(http, model(server.base_url))
    assert caught.value.retryable


async def test_http_error_message(http: httpx.AsyncClient) -> None:
    with (
        FakeResponses(
            [Turn(status=400, error="No tool output found for function call call_9.")]
        ) as server,
        pytest.raises(ProviderError, match="No tool output found") as caught,
    ):
        await generate(http, model(server.base_url))
    assert not caught.value.retryable
