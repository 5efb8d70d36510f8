from __future__ import annotations

import threading
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
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.models import ProviderContext, make_provider
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.retry import RetryPolicy, generate_with_retries
from tests.support.fake_http import Recorded, Reply
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn, rate_limited, server_error
from tests.support.sinks import ListSink

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

KEY = "sk-test-secret-key-0123456789"
ADD = OfferedTool(
    name="add",
    description="Add two numbers",
    input_schema={"type": "object", "properties": {"a": {"type": "number"}}},
)


def model(base_url: str, **options: Any) -> ModelRef:
    return ModelRef(provider="openai", name="gpt-test", base_url=base_url, options=options)


def request(ref: ModelRef, messages: list[Message] | None = None, **kw: Any) -> ModelRequest:
    return ModelRequest(
        model=ref, messages=messages or [UserMessage(content="hi")], timeout_s=10, **kw
    )


async def generate(
    http: httpx.AsyncClient, ref: ModelRef, req: ModelRequest | None = None, env: Any = None
) -> tuple[Any, ListSink]:
    provider = make_provider(
        ref, ProviderContext(http=http, env={"OPENAI_API_KEY": KEY} if env is None else env)
    )
    sink = ListSink()
    return await provider.generate(req or request(ref), sink), sink


async def test_streams_text_deltas_and_usage(http: httpx.AsyncClient) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    with FakeOpenAI([Turn(text="Hello there, world", usage=usage)]) as server:
        response, sink = await generate(http, model(server.base_url))
        sent = server.requests[0]
    assert response.text == "Hello there, world"
    assert len(sink.deltas) > 3
    assert sink.text == "Hello there, world"
    assert response.finish_reason == "stop"
    assert response.tool_calls == []
    assert (response.usage.input_tokens, response.usage.output_tokens) == (100, 20)
    assert (response.usage.cached_input_tokens, response.usage.reasoning_tokens) == (64, 12)
    assert response.usage.total_tokens == 120
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["model"] == "gpt-test"


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("byte_split", [None, 7])
async def test_parallel_tool_calls_with_fragmented_arguments(
    http: httpx.AsyncClient, interleave: bool, byte_split: int | None
) -> None:
    turn = Turn(
        text="Let me add.",
        tool_calls=[
            ToolCall("add", {"a": 1, "b": 2}, id="call_A"),
            ToolCall("add", {"a": 30, "b": 12, "note": "ünïcode ✓"}, id="call_B"),
        ],
        fragment_chars=3,
        interleave=interleave,
        byte_split=byte_split,
    )
    with FakeOpenAI([turn]) as server:
        response, _ = await generate(
            http, model(server.base_url), request(model(server.base_url), tools=[ADD])
        )
    assert response.finish_reason == "tool-calls"
    assert [(c.id, c.name) for c in response.tool_calls] == [("call_A", "add"), ("call_B", "add")]
    assert response.tool_calls[0].arguments == '{"a": 1, "b": 2}'
    assert (
        response.tool_calls[1].arguments
        == '{"a": 30, "b": 12, "note": "\\u00fcn\\u00efcode \\u2713"}'
    )
    assert response.text == "Let me add."


async def test_non_streaming(http: httpx.AsyncClient) -> None:
    turn = Turn(text="thinking", tool_calls=[ToolCall("add", '{"a":1}', id="c1")])
    with FakeOpenAI([turn]) as server:
        ref = model(server.base_url, stream=False, temperature=0.2)
        response, sink = await generate(http, ref, request(ref, tools=[ADD]))
        sent = server.requests[0].body
    assert "stream" not in sent
    assert "stream_options" not in sent
    assert sent["temperature"] == 0.2
    assert response.text == "thinking"
    assert sink.deltas == ["thinking"]
    assert response.tool_calls[0].arguments == '{"a":1}'
    assert response.finish_reason == "tool-calls"
    assert response.usage.input_tokens == 11


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content-filter"),
        ("odd", "other"),
    ],
)
async def test_finish_reasons(http: httpx.AsyncClient, finish: str, expected: str) -> None:
    with FakeOpenAI([Turn(text="x", finish_reason=finish)]) as server:
        response, _ = await generate(http, model(server.base_url))
    assert response.finish_reason == expected


async def test_history_tools_and_tool_choice_are_sent_in_chat_shape(
    http: httpx.AsyncClient,
) -> None:
    history: list[Message] = [
        UserMessage(content="add 1 and 2, then divide by 0"),
        AssistantMessage(
            content=[
                TextPart(text="calling"),
                ToolCallPart(tool_call_id="c1", tool_name="add", input={"a": 1, "b": 2}),
                ToolCallPart(tool_call_id="c2", tool_name="div", input="{not json"),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id="c1", tool_name="add", output={"sum": 3}),
                ToolResultPart(
                    tool_call_id="c2", tool_name="div", output="invalid JSON", is_error=True
                ),
            ]
        ),
    ]
    with FakeOpenAI([Turn(text="done")]) as server:
        ref = model(server.base_url)
        req = request(
            ref, history, system="be brief", tools=[ADD], tool_choice=ToolChoiceTool(tool="add")
        )
        await generate(http, ref, req)
        body = server.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "add 1 and 2, then divide by 0"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "div", "arguments": "{not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"sum": 3}'},
        {"role": "tool", "tool_call_id": "c2", "content": "invalid JSON"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers",
                "parameters": ADD.input_schema,
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
async def test_tool_choice_strings(http: httpx.AsyncClient, choice: str) -> None:
    with FakeOpenAI([Turn(text="ok")]) as server:
        ref = model(server.base_url)
        await generate(http, ref, request(ref, tools=[ADD], tool_choice=choice))
        assert server.requests[0].body["tool_choice"] == choice


async def test_bad_request_fails_with_the_providers_message_and_no_key(
    http: httpx.AsyncClient,
) -> None:
    turn = Turn(status=400, error=f"Invalid value for 'messages'; key was {KEY}")
    with FakeOpenAI([turn]) as server, pytest.raises(ProviderError) as caught:
        await generate(http, model(server.base_url))
    error = caught.value
    assert error.status == 400
    assert not error.retryable
    assert "Invalid value for 'messages'" in str(error)
    assert KEY not in str(error)


async def test_429_with_retry_after_then_500_then_success(http: httpx.AsyncClient) -> None:
    turns = [rate_limited(retry_after="0"), server_error(), Turn(text="finally")]
    with FakeOpenAI(turns) as server:
        ref = model(server.base_url)
        provider = make_provider(ref, ProviderContext(http=http, env={"OPENAI_API_KEY": KEY}))
        response = await generate_with_retries(
            provider, request(ref), ListSink(), RetryPolicy(base_delay_s=0.01)
        )
        assert len(server.requests) == 3
    assert response.text == "finally"


async def test_429_carries_retry_after(http: httpx.AsyncClient) -> None:
    with (
        FakeOpenAI([rate_limited(retry_after="7")]) as server,
        pytest.raises(ProviderError) as caught,
    ):
        await generate(http, model(server.base_url))
    assert caught.value.status == 429
    assert caught.value.retryable
    assert caught.value.retry_after_s == 7.0
    assert "Rate limit reached" in str(caught.value)


async def test_retry_after_ms_header(http: httpx.AsyncClient) -> None:
    turn = Turn(status=503, error="overloaded", headers={"retry-after-ms": "1500"})
    with FakeOpenAI([turn]) as server, pytest.raises(ProviderError) as caught:
        await generate(http, model(server.base_url))
    assert caught.value.retry_after_s == 1.5


async def test_every_request_has_a_deadline(http: httpx.AsyncClient) -> None:
    release = threading.Event()

    def stall(_: Recorded) -> Turn:
        release.wait(10)
        return Turn(text="late")

    with FakeOpenAI(stall) as server:
        ref = model(server.base_url)
        req = request(ref).model_copy(update={"timeout_s": 0.2})
        try:
            with pytest.raises(ProviderError) as caught:
                await generate(http, ref, req)
        finally:
            release.set()
    assert caught.value.retryable


async def test_connection_refused_is_retryable(http: httpx.AsyncClient) -> None:
    with FakeOpenAI([]) as server:
        base_url = server.base_url
    with pytest.raises(ProviderError, match="connection failed") as caught:
        await generate(http, model(base_url))
    assert caught.value.retryable
    assert caught.value.status is None


async def test_missing_key_is_a_clear_final_error(http: httpx.AsyncClient) -> None:
    ref = ModelRef(provider="openai", name="gpt-test", api_key_env="MY_KEY")
    with pytest.raises(ProviderError, match="MY_KEY") as caught:
        await generate(http, ref, env={"OPENAI_API_KEY": KEY})
    assert not caught.value.retryable


async def test_local_server_needs_no_key(http: httpx.AsyncClient) -> None:
    with FakeOpenAI([Turn(text="ok")]) as server:
        response, _ = await generate(http, model(server.base_url), env={})
        assert "authorization" not in server.requests[0].headers
    assert response.text == "ok"


async def test_error_inside_the_stream(http: httpx.AsyncClient) -> None:
    def broken(_: Recorded) -> Reply:
        return Reply.sse([(None, {"error": {"message": "model overloaded mid-stream"}})])

    with FakeOpenAI([]) as server:
        server.http.responder = broken
        with pytest.raises(ProviderError, match="overloaded mid-stream"):
            await generate(http, model(server.base_url))
