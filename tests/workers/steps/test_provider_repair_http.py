"""Tool-call repair over real HTTP: a Chat Completions server sends a broken call, is asked
to repair it, and the repaired call runs; the next request's history shows only it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.core.messages import AssistantMessage
from agentq.workers.worker.embedded import embedded
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.sample_tools import add

# Specs here name the loopback fakes as endpoints (a deployment must allow it).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("allow_loopback_endpoints")]

BROKEN = '{"a": 1, "b": '


def spec(base_url: str) -> dict[str, Any]:
    return {
        "model": {
            "provider": "openai",
            "name": "fake-model",
            "base_url": base_url,
            "repair": {"strategy": "reask", "max_attempts": 1},
        },
        "prompt": "add 1 and 2",
        "tools": [{"type": "function", "name": "add"}],
    }


async def test_a_broken_call_is_repaired_over_http_and_the_history_stays_clean() -> None:
    turns = [
        Turn(tool_calls=[ToolCall("add", BROKEN, id="call_a")]),
        Turn(tool_calls=[ToolCall("add", {"a": 1, "b": 2}, id="call_repair")]),
        Turn(text="1 + 2 = 3"),
    ]
    with FakeOpenAI(turns) as server:
        async with embedded(tools=[add], env={}) as client:
            run_id = await client.runs.submit(spec(server.base_url))
            result = await client.runs.wait(run_id, timeout_s=30)
            events = [e async for e in client.runs.events(run_id)]
        first, repair, final = (r.body for r in server.requests)

    assert result.status == "succeeded", result.error
    assert result.text == "1 + 2 = 3"
    assert result.steps[0].tool_results[0].output == 3.0
    # The repair request: the conversation, one user turn naming the tool, its schema,
    # the parse error and the bad arguments; only that tool, forced.
    assert repair["messages"][:-1] == first["messages"]
    ask = repair["messages"][-1]
    assert ask["role"] == "user"
    assert "`add`" in ask["content"]
    assert "could not parse" in ask["content"]
    assert BROKEN in ask["content"]
    assert '"required"' in ask["content"]
    assert [t["function"]["name"] for t in repair["tools"]] == ["add"]
    assert repair["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    # The next step's history: the original call id with the repaired arguments, its
    # result, and no trace of the broken arguments or the repair exchange.
    assert final["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "3.0"},
    ]
    assert BROKEN not in json.dumps(final)
    (call,) = next(m for m in result.messages if isinstance(m, AssistantMessage)).tool_calls()
    assert (call.tool_call_id, call.input) == ("call_a", {"a": 1, "b": 2})
    (event,) = [e.model_dump() for e in events if e.type == "tool-call-repair"]
    assert (event["tool_call_id"], event["input"], event["repaired"]) == ("call_a", BROKEN, True)
