"""Each wire format's stream fold streams a call's arguments as they come.

The streams are the test fakes' own renderings (the bytes a fake server would send),
folded without a server: per call, a start with the call's id and tool name, then
pieces of its arguments that add up to the arguments of the folded response's call.
The fakes cut arguments into 4-character fragments; Gemini sends each call whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentq.orchestrator.core.model_io import ModelResponse
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.anthropic import AnthropicWire
from agentq.workers.models.base import ModelRequest
from agentq.workers.models.driver import ToolInput, ToolInputDelta, ToolInputStart, WireFormat
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.openai_chat import OpenAIChatWire
from agentq.workers.models.openai_chat import StreamState as OpenAIChatStreamState
from agentq.workers.models.openai_responses import OpenAIResponsesWire
from agentq.workers.models.sse import parse_lines
from tests.support import fake_anthropic, fake_gemini, fake_openai, fake_responses
from tests.support.fake_http import Recorded, Reply
from tests.support.fake_openai import ToolCall

pytestmark = pytest.mark.unit

CALLS = [
    ToolCall("add", {"a": 1, "b": 2}),
    ToolCall("lookup", {"city": "Zürich", "units": "metric"}),
]


def _stream_request(path: str) -> Recorded:
    body = {"stream": True, "stream_options": {"include_usage": True}}
    return Recorded(method="POST", path=path, query={"alt": ["sse"]}, headers={}, body=body)


REPLIES: dict[str, tuple[WireFormat, Callable[[], Reply]]] = {
    "openai": (
        OpenAIChatWire(),
        lambda: fake_openai.render(
            fake_openai.Turn(text="Let me see.", tool_calls=CALLS),
            0,
            _stream_request("/v1/chat/completions"),
        ),
    ),
    "openai-responses": (
        OpenAIResponsesWire(),
        lambda: fake_responses.render(
            fake_responses.Turn(text="Let me see.", tool_calls=CALLS),
            0,
            _stream_request("/v1/responses"),
        ),
    ),
    "anthropic": (
        AnthropicWire(),
        lambda: fake_anthropic.render(
            fake_anthropic.Turn(text="Let me see.", tool_calls=CALLS),
            0,
            _stream_request("/v1/messages"),
        ),
    ),
    "gemini": (
        GeminiWire(),
        lambda: fake_gemini.render(
            fake_gemini.Turn(text="Let me see.", tool_calls=CALLS),
            _stream_request("/v1beta/models/g:streamGenerateContent"),
        ),
    ),
}


def fold_stream(wire: WireFormat, reply: Reply) -> tuple[list[ToolInput], ModelResponse]:
    request = ModelRequest(model=ModelRef(provider="openai", name="m"), messages=[], step=2)
    fold = wire.fold(request)
    parts: list[ToolInput] = []
    raw = b"".join(reply.pieces or []).decode()
    for event in parse_lines(raw.split("\n")):
        data: dict[str, Any] = {} if event.data == "[DONE]" else json.loads(event.data)
        parts += fold.feed(data, event, "test").tool_inputs
        if fold.ended:
            break
    return parts, fold.result("test")


def _streamed(parts: list[ToolInput]) -> dict[str, tuple[str, str]]:
    """Per call id: its tool name and its arguments as streamed, each delta after its start."""
    calls: dict[str, tuple[str, str]] = {}
    for part in parts:
        match part:
            case ToolInputStart(call_id, name):
                assert call_id not in calls, f"{call_id} started twice"
                calls[call_id] = (name, "")
            case ToolInputDelta(call_id, delta):
                assert call_id in calls, f"a delta of {call_id} before its start"
                name, text = calls[call_id]
                calls[call_id] = (name, text + delta)
    return calls


@pytest.mark.parametrize("name", list(REPLIES))
def test_each_call_streams_its_start_then_its_arguments(name: str) -> None:
    wire, reply = REPLIES[name]
    parts, response = fold_stream(wire, reply())
    streamed = _streamed(parts)
    assert list(streamed) == [call.id for call in response.tool_calls]
    for call in response.tool_calls:
        assert call.id is not None
        tool_name, arguments = streamed[call.id]
        assert tool_name == call.name
        assert json.loads(arguments) == json.loads(str(call.arguments))
    # The fakes cut arguments in pieces: each piece is a delta of its own (Gemini's whole).
    deltas = sum(isinstance(p, ToolInputDelta) for p in parts)
    assert deltas == 2 if name == "gemini" else deltas > 4


def test_a_chat_server_s_arguments_before_the_name_come_with_the_start() -> None:
    """Some compatible servers send an id and arguments first, the name later."""
    state = OpenAIChatStreamState(step=0)

    def fragment(function: dict[str, str]) -> tuple[ToolInput, ...]:
        call = {"index": 0, "id": "c1", "function": function}
        chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
        return state.add(chunk, "t").tool_inputs

    assert fragment({"arguments": '{"a"'}) == ()
    assert fragment({"name": "add", "arguments": ":1"}) == (
        ToolInputStart("c1", "add"),
        ToolInputDelta("c1", '{"a":1'),
    )
    assert fragment({"arguments": "}"}) == (ToolInputDelta("c1", "}"),)
