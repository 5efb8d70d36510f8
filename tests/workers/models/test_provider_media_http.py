"""Images in tool results over real HTTP: Anthropic and the Responses API get them in the
result; Chat Completions in a user message after the tool messages, Gemini as inlineData
parts in the function response turn, each described in its result by its reference;
prompt mode gets the description and the reference only."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import ProviderContext, make_provider
from agentq.workers.models.base import ModelRequest, OfferedTool
from tests.support import fake_anthropic, fake_gemini, fake_media, fake_openai, fake_responses
from tests.support.sinks import ListSink

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 3064).decode()  # 3 kB
HUGE = base64.b64encode(b"\0" * 20_000).decode()
OUTPUT = {
    "content": [
        {"type": "text", "text": "the chart"},
        {"type": "media", "media_type": "image/png", "data": PNG},
        {"type": "media", "media_type": "image/png", "data": HUGE},
    ]
}
# Without cache marks: the bodies compared here are the media's shape alone.
CAP = {"media": {"max_item_bytes": 10_000}, "cache": "off"}
NOTE = "[image omitted: image/png, 20 kB over the 10 kB cap, call_1#1]"
DESCRIBED = f"the chart\n[image: image/png, 3 kB, call_1#0]\n{NOTE}"
SHOT = OfferedTool(name="shot", input_schema={"type": "object"})


def history(output: Any = OUTPUT) -> list[Message]:
    return [
        UserMessage(content="plot it"),
        AssistantMessage(content=[ToolCallPart(tool_call_id="call_1", tool_name="shot")]),
        ToolMessage(
            content=[ToolResultPart(tool_call_id="call_1", tool_name="shot", output=output)]
        ),
    ]


async def send(http: httpx.AsyncClient, ref: ModelRef, messages: list[Message]) -> None:
    provider = make_provider(ref, ProviderContext(http=http, env={}))
    request = ModelRequest(model=ref, messages=messages, tools=[SHOT], step=1, timeout_s=10)
    await provider.generate(request, ListSink())


def body_without_base64(body: Any) -> str:
    text = json.dumps(body)
    assert HUGE not in text
    return text


async def test_anthropic_gets_image_blocks_in_the_tool_result(http: httpx.AsyncClient) -> None:
    with fake_anthropic.FakeAnthropic([fake_anthropic.Turn(text="ok")]) as server:
        ref = ModelRef(provider="anthropic", name="c", base_url=server.base_url, options=CAP)
        await send(http, ref, history())
        body = server.requests[0].body
    body_without_base64(body)
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [
                    {"type": "text", "text": "the chart"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                    {"type": "text", "text": NOTE},
                ],
            }
        ],
    }
    assert "media" not in body


async def test_responses_gets_input_image_items_in_the_output(http: httpx.AsyncClient) -> None:
    with fake_responses.FakeResponses([fake_responses.Turn(text="ok")]) as server:
        ref = ModelRef(provider="openai-responses", name="m", base_url=server.base_url, options=CAP)
        await send(http, ref, history())
        body = server.requests[0].body
    body_without_base64(body)
    (output,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
    assert output == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "the chart"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            {"type": "input_text", "text": NOTE},
        ],
    }


async def test_chat_completions_gets_the_images_in_a_following_user_message(
    http: httpx.AsyncClient,
) -> None:
    with fake_openai.FakeOpenAI([fake_openai.Turn(text="ok")]) as server:
        ref = ModelRef(provider="openai", name="m", base_url=server.base_url, options=CAP)
        await send(http, ref, history())
        body = server.requests[0].body
    body_without_base64(body)
    assert body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": DESCRIBED},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[image: image/png, 3 kB, call_1#0]"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
    ]


async def test_chat_completions_answers_every_call_before_the_images(
    http: httpx.AsyncClient,
) -> None:
    shot = {"content": [{"type": "media", "media_type": "image/png", "data": PNG}]}
    messages: list[Message] = [
        UserMessage(content="plot both"),
        AssistantMessage(
            content=[
                ToolCallPart(tool_call_id="call_1", tool_name="shot"),
                ToolCallPart(tool_call_id="call_2", tool_name="shot"),
            ]
        ),
        ToolMessage(
            content=[
                ToolResultPart(tool_call_id="call_1", tool_name="shot", output=shot),
                ToolResultPart(tool_call_id="call_2", tool_name="shot", output=shot),
            ]
        ),
    ]
    # The fake refuses a user message between the tool messages, as the API does.
    with fake_openai.FakeOpenAI([fake_openai.Turn(text="ok", echo_media=True)]) as server:
        ref = ModelRef(provider="openai", name="m", base_url=server.base_url)
        provider = make_provider(ref, ProviderContext(http=http, env={}))
        request = ModelRequest(model=ref, messages=messages, tools=[SHOT], step=1, timeout_s=10)
        response = await provider.generate(request, ListSink())
        body = server.requests[0].body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "user"]
    labels = [p["text"] for p in body["messages"][4]["content"] if p["type"] == "text"]
    assert labels == ["[image: image/png, 3 kB, call_1#0]", "[image: image/png, 3 kB, call_2#0]"]
    assert response.text.splitlines()[1:] == [fake_media.seen("image/png", PNG)] * 2


async def test_gemini_gets_inline_data_in_the_function_response_turn(
    http: httpx.AsyncClient,
) -> None:
    with fake_gemini.FakeGemini([fake_gemini.Turn(text="ok")]) as server:
        ref = ModelRef(provider="gemini", name="g", base_url=server.base_url, options=CAP)
        await send(http, ref, history())
        body = server.requests[0].body
    body_without_base64(body)
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "shot", "response": {"result": DESCRIBED}}},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
        ],
    }


def test_the_fakes_refuse_what_the_apis_refuse() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    chat = [{"role": "tool", "tool_call_id": "c", "content": [image]}]
    assert "only allowed for messages with role 'user'" in str(fake_openai.messages_problem(chat))
    unanswered = [
        {"role": "assistant", "tool_calls": [{"id": "c"}]},
        {"role": "user", "content": [image]},
    ]
    assert "did not have response messages: c" in str(fake_openai.messages_problem(unanswered))
    calls = {"role": "model", "parts": [{"functionCall": {"name": "shot"}}] * 2}
    one_answer = {"role": "user", "parts": [{"functionResponse": {"name": "shot"}}]}
    assert "number of function response parts" in str(
        fake_gemini.contents_problem([calls, one_answer])
    )
    unreadable = {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "?"}}]}
    assert "invalid base64" in str(fake_gemini.contents_problem([unreadable]))


async def test_prompt_mode_gets_a_description(http: httpx.AsyncClient) -> None:
    with fake_anthropic.FakeAnthropic([fake_anthropic.Turn(text="ok")]) as server:
        options = {**CAP, "tool_mode": "prompt"}
        ref = ModelRef(provider="anthropic", name="c", base_url=server.base_url, options=options)
        await send(http, ref, history())
        body = server.requests[0].body
    assert PNG not in body_without_base64(body)
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": f'<tool_result name="shot">\n{DESCRIBED}\n</tool_result>'}
        ],
    }


async def test_outputs_without_media_are_sent_as_before(http: httpx.AsyncClient) -> None:
    with fake_anthropic.FakeAnthropic([fake_anthropic.Turn(text="ok")]) as server:
        ref = ModelRef(provider="anthropic", name="c", base_url=server.base_url)
        await send(http, ref, history({"content": [{"type": "text", "text": "t"}]}))
        body = server.requests[0].body
    assert body["messages"][2]["content"][0]["content"] == json.dumps(
        {"content": [{"type": "text", "text": "t"}]}
    )
