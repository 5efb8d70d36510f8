from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
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
from tests.support.fake_anthropic import FakeAnthropic, ServerToolUse, Turn
from tests.support.fake_openai import ToolCall
from tests.support.sinks import ListSink, generate_once

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

KEY = "sk-ant-test-0123456789"
ADD = OfferedTool(name="add", description="Add", input_schema={"type": "object"})


def model(base_url: str, **options: Any) -> ModelRef:
    return ModelRef(provider="anthropic", name="claude-test", base_url=base_url, options=options)


async def generate(
    http: httpx.AsyncClient, ref: ModelRef, **kw: Any
) -> tuple[ModelResponse, ListSink]:
    return await generate_once(http, ref, {"ANTHROPIC_API_KEY": KEY}, **kw)


@pytest.mark.parametrize("stream", [True, False])
async def test_parallel_tool_use_with_usage_and_cache_tokens(
    http: httpx.AsyncClient, stream: bool
) -> None:
    turn = Turn(
        text="Adding both.",
        tool_calls=[
            ToolCall("add", {"a": 1, "b": 2}, id="toolu_A"),
            ToolCall("add", {"a": 3}, id="toolu_B"),
        ],
        byte_split=13,
    )
    with FakeAnthropic([turn]) as server:
        response, sink = await generate(http, model(server.base_url, stream=stream), tools=[ADD])
        sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body.get("stream", False) is stream
    assert sink.text == "Adding both."
    assert response.text == "Adding both."
    assert response.finish_reason == "tool-calls"
    assert [(c.id, c.name) for c in response.tool_calls] == [("toolu_A", "add"), ("toolu_B", "add")]
    args = [c.arguments for c in response.tool_calls]
    if stream:
        assert args == ['{"a": 1, "b": 2}', '{"a": 3}']
    else:
        assert args == [{"a": 1, "b": 2}, {"a": 3}]
    usage = response.usage
    # Reads and writes are parts of the whole prompt, each kept apart (billed apart).
    assert (usage.input_tokens, usage.output_tokens) == (125, 9)
    assert (usage.cached_input_tokens, usage.cache_write_tokens) == (100, 5)


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("refusal", "content-filter"),
    ],
)
async def test_stop_reasons(http: httpx.AsyncClient, stop: str, expected: str) -> None:
    with FakeAnthropic([Turn(text="x", stop_reason=stop)]) as server:
        response, _ = await generate(http, model(server.base_url))
    assert response.finish_reason == expected


async def test_request_shape_system_history_and_tool_results(http: httpx.AsyncClient) -> None:
    history: list[Message] = [
        SystemMessage(content="from messages"),
        UserMessage(
            content=[TextPart(text="look"), MediaPart(media_type="image/png", data="iVBOR")]
        ),
        AssistantMessage(
            content=[
                TextPart(text="calling"),
                ToolCallPart(tool_call_id="t1", tool_name="add", input={"a": 1}),
                ToolCallPart(tool_call_id="t2", tool_name="add", input="{broken"),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id="t1", tool_name="add", output=1),
                ToolResultPart(
                    tool_call_id="t2", tool_name="add", output="bad JSON", is_error=True
                ),
            ]
        ),
        UserMessage(content="and now?"),
    ]
    with FakeAnthropic([Turn(text="ok")]) as server:
        await generate(
            http,
            # The shape without cache marks (test_provider_cache_breakpoints.py: with them).
            model(server.base_url, max_tokens=100, temperature=0, cache="off"),
            messages=history,
            system="top",
            tools=[ADD],
            tool_choice=ToolChoiceTool(tool="add"),
        )
        body = server.requests[0].body
    assert body["system"] == "top\n\nfrom messages"
    assert body["max_tokens"] == 100
    assert body["temperature"] == 0
    assert body["tool_choice"] == {"type": "tool", "name": "add"}
    assert body["tools"] == [
        {"name": "add", "description": "Add", "input_schema": {"type": "object"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 1}},
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "add",
                    "input": {"_raw_arguments": "{broken"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": "bad JSON",
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "wire"), [("auto", "auto"), ("required", "any"), ("none", "none")]
)
async def test_tool_choice(http: httpx.AsyncClient, choice: str, wire: str) -> None:
    with FakeAnthropic([Turn(text="ok")]) as server:
        await generate(http, model(server.base_url), tools=[ADD], tool_choice=choice)
        assert server.requests[0].body["tool_choice"] == {"type": wire}


async def test_thinking_blocks_are_returned_for_the_next_request(http: httpx.AsyncClient) -> None:
    turn = Turn(
        thinking="Let me think about adding.", tool_calls=[ToolCall("add", {"a": 1}, id="t1")]
    )
    with FakeAnthropic([turn]) as server:
        response, sink = await generate(http, model(server.base_url), tools=[ADD])
    assert sink.text == ""  # thinking is not answer text
    assert response.provider_metadata["anthropic"]["thinking"] == [
        {"type": "thinking", "thinking": "Let me think about adding.", "signature": "sig-abc"}
    ]


async def test_web_search_is_provider_executed(http: httpx.AsyncClient) -> None:
    result = [{"type": "web_search_result", "url": "https://example.org", "title": "Ex"}]
    turn = Turn(
        text="Found it.",
        server_tools=[ServerToolUse("web_search", {"query": "agentq"}, result, id="srvtoolu_9")],
    )
    search = OfferedTool(name="web_search", provider_executed=True, options={"max_uses": 2})
    with FakeAnthropic([turn]) as server:
        response, _ = await generate(http, model(server.base_url, cache="off"), tools=[search])
        tools = server.requests[0].body["tools"]
    assert tools == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
    call = response.tool_calls[0]
    assert call.provider_executed
    assert (call.id, call.name, call.arguments) == (
        "srvtoolu_9",
        "web_search",
        '{"query": "agentq"}',
    )
    assert call.provider_result == result
    assert response.finish_reason == "stop"


async def test_unknown_provider_tool_is_refused(http: httpx.AsyncClient) -> None:
    tool = OfferedTool(name="teleport", provider_executed=True)
    with FakeAnthropic([]) as server, pytest.raises(ProviderError, match="teleport"):
        await generate(http, model(server.base_url), tools=[tool])


async def test_overloaded_error_event_mid_stream_is_retryable(http: httpx.AsyncClient) -> None:
    turn = Turn(text="partial", stream_error="Overloaded")
    with (
        FakeAnthropic([turn]) as server,
        pytest.raises(ProviderError, match="Overloaded") as caught,
    ):
        await generate(http, model(server.base_url))
    assert caught.value.retryable


async def test_truncated_stream_is_an_error(http: httpx.AsyncClient) -> None:
    turn = Turn(text="cut", truncate=True)
    with FakeAnthropic([turn]) as server, pytest.raises(ProviderError, match="message_stop"):
        await generate(http, model(server.base_url))


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (529, True)]
)
async def test_http_errors_carry_the_providers_message(
    http: httpx.AsyncClient, status: int, retryable: bool
) -> None:
    turn = Turn(status=status, error=f"scripted {status} message", headers={"retry-after": "3"})
    with FakeAnthropic([turn]) as server, pytest.raises(ProviderError) as caught:
        await generate(http, model(server.base_url))
    assert caught.value.status == status
    assert caught.value.retryable is retryable
    assert f"scripted {status} message" in str(caught.value)
    assert caught.value.retry_after_s == 3.0
