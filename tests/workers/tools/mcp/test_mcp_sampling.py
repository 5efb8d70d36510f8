"""Converting sampling requests into model requests and model answers back."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types as types
import pytest

from agentq.orchestrator.core.messages import AssistantMessage, MediaPart, TextPart, UserMessage
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools.mcp.config import SamplingRoute
from agentq.workers.tools.mcp.sampling import (
    Sampler,
    Unsupported,
    routed_model,
    sampling_options,
    to_messages,
    to_model_request,
    to_result,
)

pytestmark = pytest.mark.unit

PNG = "iVBORw0KGgo="
AUDIO = types.AudioContent(type="audio", data="UklG", mime_type="audio/wav")


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def message(role: Any, content: Any) -> types.SamplingMessage:
    return types.SamplingMessage(role=role, content=content)


def params(**kw: Any) -> types.CreateMessageRequestParams:
    kw.setdefault("messages", [message("user", text("hi"))])
    kw.setdefault("max_tokens", 100)
    return types.CreateMessageRequestParams(**kw)


def route(model: str | dict[str, Any] = "openai:m", max_tokens: int | None = None) -> SamplingRoute:
    return SamplingRoute.model_validate({"model": model, "max_tokens": max_tokens})


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param([message("user", text("hi"))], [UserMessage(content="hi")], id="one-text"),
        pytest.param(
            [message("user", [text("look"), image()])],
            [
                UserMessage(
                    content=[TextPart(text="look"), MediaPart(media_type="image/png", data=PNG)]
                )
            ],
            id="text-and-image",
        ),
        pytest.param(
            [message("user", image())],
            [UserMessage(content=[MediaPart(media_type="image/png", data=PNG)])],
            id="image-alone",
        ),
        pytest.param(
            [
                message("user", text("q")),
                message("assistant", [text("a"), text("b")]),
                message("user", text("more")),
            ],
            [
                UserMessage(content="q"),
                AssistantMessage(content="ab"),
                UserMessage(content="more"),
            ],
            id="conversation",
        ),
    ],
)
def test_messages_are_converted(messages: list[types.SamplingMessage], expected: Any) -> None:
    assert to_messages(messages) == expected


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        pytest.param(
            [message("user", AUDIO)],
            "'audio' content is not supported",
            id="audio",
        ),
        pytest.param(
            [message("assistant", image())],
            "an assistant message with an image",
            id="assistant-image",
        ),
        pytest.param(
            [message("assistant", types.ToolUseContent(name="t", id="1", input={}))],
            "'tool_use' content is not supported",
            id="tool-use",
        ),
    ],
)
def test_unsupported_content_is_refused(messages: list[types.SamplingMessage], reason: str) -> None:
    with pytest.raises(Unsupported, match=reason):
        to_messages(messages)


FULL = {"max_tokens": 100, "temperature": 0.5, "stop_sequences": ["END"]}


@pytest.mark.parametrize(
    ("provider", "given", "cap", "expected"),
    [
        pytest.param(
            "openai",
            FULL,
            None,
            {"max_tokens": 100, "temperature": 0.5, "stop": ["END"]},
            id="openai",
        ),
        pytest.param(
            "anthropic",
            FULL,
            None,
            {"max_tokens": 100, "temperature": 0.5, "stop_sequences": ["END"]},
            id="anthropic",
        ),
        pytest.param(
            "openai-responses",
            FULL,
            None,
            {"max_output_tokens": 100, "temperature": 0.5},
            id="responses-has-no-stop",
        ),
        pytest.param(
            "gemini",
            FULL,
            None,
            {
                "generationConfig": {
                    "maxOutputTokens": 100,
                    "temperature": 0.5,
                    "stopSequences": ["END"],
                }
            },
            id="gemini",
        ),
        pytest.param("scripted", FULL, None, {}, id="scripted-takes-none"),
        pytest.param("openai", {"max_tokens": 100}, None, {"max_tokens": 100}, id="only-max"),
        pytest.param("openai", {"max_tokens": 100}, 30, {"max_tokens": 30}, id="capped"),
        pytest.param("openai", {"max_tokens": 10}, 30, {"max_tokens": 10}, id="under-cap"),
        pytest.param(
            "openai",
            {"max_tokens": 10, "stop_sequences": []},
            None,
            {"max_tokens": 10},
            id="empty-stop",
        ),
    ],
)
def test_limits_use_each_providers_option_names(
    provider: str, given: dict[str, Any], cap: int | None, expected: dict[str, Any]
) -> None:
    assert sampling_options(provider, params(**given), cap) == expected


def test_limits_override_the_configured_options_and_keep_the_rest() -> None:
    gemini = route(
        {
            "provider": "gemini",
            "name": "g",
            "options": {"generationConfig": {"topK": 3, "temperature": 1.0}, "stream": False},
        }
    )
    ref = routed_model(gemini, params(max_tokens=7, temperature=0.1))
    assert ref.options == {
        "generationConfig": {"topK": 3, "temperature": 0.1, "maxOutputTokens": 7},
        "stream": False,
    }
    assert gemini.model.options["generationConfig"] == {"topK": 3, "temperature": 1.0}


def test_model_request_carries_the_system_prompt_and_no_tools() -> None:
    request = to_model_request(
        route("openai:m", max_tokens=20),
        params(system_prompt="Be brief.", max_tokens=50, temperature=0.2),
        timeout_s=9.0,
    )
    assert request.system == "Be brief."
    assert request.messages == [UserMessage(content="hi")]
    assert (request.tools, request.step, request.timeout_s) == ([], 0, 9.0)
    assert request.model.options == {"max_tokens": 20, "temperature": 0.2}


def test_an_empty_system_prompt_is_none() -> None:
    assert to_model_request(route(), params(system_prompt=""), timeout_s=1.0).system is None


def test_tools_in_a_request_are_refused() -> None:
    tool = types.Tool(name="t", input_schema={"type": "object"})
    with pytest.raises(Unsupported, match="tools"):
        to_model_request(route(), params(tools=[tool]), timeout_s=1.0)


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [
        ("stop", "endTurn"),
        ("length", "maxTokens"),
        ("tool-calls", "toolUse"),
        ("content-filter", "content-filter"),
        ("other", "other"),
    ],
)
def test_answers_become_create_message_results(finish: FinishReason, stop_reason: str) -> None:
    result = to_result(ModelResponse(text="done", finish_reason=finish), route().model)
    assert result == types.CreateMessageResult(
        role="assistant", content=text("done"), model="m", stop_reason=stop_reason
    )


SCRIPTED = {"provider": "scripted", "script": [{"text": "scripted answer"}]}


@pytest.fixture
async def sampler() -> AsyncIterator[Sampler]:
    async with httpx.AsyncClient() as http:
        yield Sampler(ModelClient(http, {}))


async def test_sampler_answers_from_the_routed_model(sampler: Sampler) -> None:
    result = await sampler.sample("s", route(SCRIPTED), params())
    assert result == types.CreateMessageResult(
        role="assistant", content=text("scripted answer"), model="scripted", stop_reason="endTurn"
    )


@pytest.mark.parametrize(
    ("model", "request_params", "deadline_at", "code", "reason"),
    [
        pytest.param(
            SCRIPTED,
            params(messages=[message("user", AUDIO)]),
            None,
            types.INVALID_PARAMS,
            "'audio' content is not supported",
            id="unsupported",
        ),
        pytest.param(
            {"provider": "scripted", "script": []},
            params(),
            None,
            types.INTERNAL_ERROR,
            "sampling failed: the scripted model has 0 steps",
            id="provider-error",
        ),
        pytest.param(
            SCRIPTED,
            params(),
            time.time() - 1,
            types.INTERNAL_ERROR,
            "deadline passed",
            id="deadline-passed",
        ),
        pytest.param(
            {"provider": "openai", "name": "m"},
            params(),
            None,
            types.INTERNAL_ERROR,
            "environment variable OPENAI_API_KEY is not set",
            id="no-key",
        ),
    ],
)
async def test_sampler_failures_are_errors_for_the_server(
    sampler: Sampler,
    model: dict[str, Any],
    request_params: types.CreateMessageRequestParams,
    deadline_at: float | None,
    code: int,
    reason: str,
) -> None:
    result = await sampler.sample("s", route(model), request_params, deadline_at)
    assert isinstance(result, types.ErrorData)
    assert result.code == code
    assert reason in result.message
