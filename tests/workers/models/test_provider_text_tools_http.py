"""tool_mode "text" over a real Chat Completions wire (the fake OpenAI server, streaming a
few characters per delta): taught in the system prompt, no native tools sent, the history
rendered back as TOOL/PARAMETERS lines, the calls parsed and held out of the stream."""

from __future__ import annotations

import httpx
import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import ProviderContext, make_provider
from agentq.workers.models.base import ModelRequest, OfferedTool
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.sinks import ListSink

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

ADD = OfferedTool(name="add", description="Add two numbers", input_schema={"type": "object"})


async def test_text_mode_over_a_chat_completions_server() -> None:
    answer = (
        "I will add twice.\n\n"
        'TOOL: add\nPARAMETERS: {"a": 1, "b": 2}\n\n'
        'TOOL: add\nPARAMETERS: {"a": 3,\n "b": 4}\n'
    )
    history = [
        UserMessage(content="add"),
        AssistantMessage(
            content=[ToolCallPart(tool_call_id="c0", tool_name="add", input={"a": 0})]
        ),
        ToolMessage(content=[ToolResultPart(tool_call_id="c0", tool_name="add", output=0)]),
    ]
    with FakeOpenAI([Turn(text=answer)]) as server:
        ref = ModelRef(
            provider="openai", name="tiny", base_url=server.base_url, options={"tool_mode": "text"}
        )
        async with httpx.AsyncClient() as http:
            provider = make_provider(ref, ProviderContext(http=http, env={}))
            sink = ListSink()
            request = ModelRequest(
                model=ref, system="Be exact.", messages=history, tools=[ADD], step=1
            )
            response = await provider.generate(request, sink)
        body = server.requests[0].body
    assert "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Be exact.\n\nYou can call tools.")
    assert "TOOL: tool_name\nPARAMETERS:" in system["content"]
    assert "- add: Add two numbers" in system["content"]
    assert body["messages"][2] == {
        "role": "assistant",
        "content": 'TOOL: add\nPARAMETERS: {"a": 0}',
    }
    assert body["messages"][3] == {"role": "user", "content": "TOOL RESULT: add\n0"}
    assert len(sink.deltas) > 1  # streamed in pieces, the calls held back
    assert sink.text == "I will add twice."
    assert response.text == "I will add twice."
    assert response.finish_reason == "tool-calls"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_1_0", "add", '{"a": 1, "b": 2}'),
        ("call_1_1", "add", '{"a": 3,\n "b": 4}'),
    ]
