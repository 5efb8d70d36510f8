"""Each wire format's stream fold splits reasoning from answer text.

The streams are the test fakes' own renderings (the bytes a fake server would send),
decoded and folded without a server: what reaches the sink as reasoning, what as
text, in which order, and that the response's text never includes the reasoning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.anthropic import AnthropicWire
from agentq.workers.models.base import ModelRequest
from agentq.workers.models.driver import WireFormat
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.openai_chat import OpenAIChatWire
from agentq.workers.models.openai_chat import StreamState as OpenAIChatStreamState
from agentq.workers.models.openai_responses import OpenAIResponsesWire
from agentq.workers.models.sse import parse_lines
from tests.support import fake_anthropic, fake_gemini, fake_openai, fake_responses
from tests.support.fake_http import Recorded, Reply

pytestmark = pytest.mark.unit

REASONING = "Two numbers; add them."
TEXT = "The sum is 3."


def _stream_request(path: str) -> Recorded:
    body = {"stream": True, "stream_options": {"include_usage": True}}
    return Recorded(method="POST", path=path, query={"alt": ["sse"]}, headers={}, body=body)


def anthropic_reply(reasoning: str) -> Reply:
    turn = fake_anthropic.Turn(thinking=reasoning or None, text=TEXT)
    return fake_anthropic.render(turn, 0, _stream_request("/v1/messages"))


def responses_reply(reasoning: str) -> Reply:
    turn = fake_responses.Turn(reasoning=reasoning or None, text=TEXT)
    return fake_responses.render(turn, 0, _stream_request("/v1/responses"))


def gemini_reply(reasoning: str) -> Reply:
    turn = fake_gemini.Turn(thoughts=reasoning, text=TEXT)
    return fake_gemini.render(turn, _stream_request("/v1beta/models/g:streamGenerateContent"))


def openai_chat_reply(reasoning: str) -> Reply:
    turn = fake_openai.Turn(reasoning=reasoning, text=TEXT)
    return fake_openai.render(turn, 0, _stream_request("/v1/chat/completions"))


WIRES: dict[str, tuple[WireFormat, Callable[[str], Reply]]] = {
    "anthropic": (AnthropicWire(), anthropic_reply),
    "openai-responses": (OpenAIResponsesWire(), responses_reply),
    "gemini": (GeminiWire(), gemini_reply),
    "openai": (OpenAIChatWire(), openai_chat_reply),
}


def fold_stream(wire: WireFormat, reply: Reply) -> tuple[list[tuple[str, str]], str]:
    """(kind, text) runs in arrival order, and the folded response's text."""
    request = ModelRequest(model=ModelRef(provider="openai", name="m"), messages=[])
    fold = wire.fold(request)
    runs: list[tuple[str, str]] = []
    raw = b"".join(reply.pieces or []).decode()
    for event in parse_lines(raw.split("\n")):
        data: dict[str, Any] = {} if event.data == "[DONE]" else json.loads(event.data)
        delta = fold.feed(data, event, "test")
        for kind, text in (("reasoning", delta.reasoning), ("text", delta.text)):
            if not text:
                continue
            if runs and runs[-1][0] == kind:
                runs[-1] = (kind, runs[-1][1] + text)
            else:
                runs.append((kind, text))
        if fold.ended:
            break
    return runs, fold.result("test").text


@pytest.mark.parametrize("name", list(WIRES))
def test_reasoning_streams_before_the_text_and_stays_out_of_it(name: str) -> None:
    wire, reply = WIRES[name]
    runs, text = fold_stream(wire, reply(REASONING))
    assert runs == [("reasoning", REASONING), ("text", TEXT)]
    assert text == TEXT


@pytest.mark.parametrize("name", list(WIRES))
def test_no_reasoning_without_it(name: str) -> None:
    wire, reply = WIRES[name]
    runs, text = fold_stream(wire, reply(""))
    assert runs == [("text", TEXT)]
    assert text == TEXT


def test_openai_compatible_servers_may_name_it_reasoning() -> None:
    """vLLM and OpenRouter send `reasoning`, DeepSeek `reasoning_content`: both are reasoning."""
    state = OpenAIChatStreamState()
    delta = state.add({"choices": [{"index": 0, "delta": {"reasoning": "hm", "content": ""}}]}, "t")
    assert (delta.reasoning, delta.text) == ("hm", "")
    assert state.response().text == ""
