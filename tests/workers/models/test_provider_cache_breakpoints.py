"""Anthropic's rolling cache breakpoints, on the request bodies the wire renders: the
system prompt (or the tools) once, the end of the previous request's history and the end
of this one's; never more than the API's 4 marks, moving as the history grows."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.policy.caching import CacheScope
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.anthropic import AnthropicWire
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.openai_chat import OpenAIChatWire
from agentq.workers.models.openai_responses import OpenAIResponsesWire

pytestmark = pytest.mark.unit

TOOLS = [OfferedTool(name="a"), OfferedTool(name="b")]
FIVE_MINUTES = {"type": "ephemeral", "ttl": "5m"}


def history(steps: int, calls_per_step: int = 1) -> list[Message]:
    """A prompt, then `steps` assistant turns of calls, each answered."""
    out: list[Message] = [UserMessage(content="go")]
    for step in range(steps):
        ids = [f"c{step}_{i}" for i in range(calls_per_step)]
        out.append(
            AssistantMessage(
                content=[ToolCallPart(tool_call_id=i, tool_name="a", input={}) for i in ids]
            )
        )
        out.append(
            ToolMessage(
                content=[ToolResultPart(tool_call_id=i, tool_name="a", output="ok") for i in ids]
            )
        )
    return out


def body(messages: list[Message], cache: Any = "auto", system: str | None = "S") -> dict[str, Any]:
    model = ModelRef(provider="anthropic", name="m", options={"cache": cache})
    request = ModelRequest(model=model, system=system, messages=messages, tools=TOOLS)
    return AnthropicWire().body(request, stream=False)


def marks(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where the marks are: ("system" | "tools", index, 0) or ("messages", turn, block)."""
    found = [("tools", i, 0) for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        found += [("system", i, 0) for i, b in enumerate(system) if "cache_control" in b]
    for turn, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [("messages", turn, i) for i, b in enumerate(content) if "cache_control" in b]
    return found


def test_a_first_step_caches_the_prefix_and_the_prompt() -> None:
    first = body(history(0))
    assert marks(first) == [("system", 0, 0), ("messages", 0, 0)]
    assert first["system"] == [{"type": "text", "text": "S", "cache_control": FIVE_MINUTES}]


@pytest.mark.parametrize("steps", [1, 2, 5, 19])
def test_each_step_marks_where_the_previous_request_ended_and_its_own_end(steps: int) -> None:
    sent = body(history(steps))
    last = len(sent["messages"]) - 1
    assert marks(sent) == [("system", 0, 0), ("messages", last - 2, 0), ("messages", last, 0)]
    # The mark this step reads from is the one the previous step wrote.
    previous = body(history(steps - 1))
    assert marks(previous)[-1] == marks(sent)[1]


def test_many_parallel_results_still_read_the_previous_end_and_stay_within_4_marks() -> None:
    # 25 results in one turn: farther back than the API's ~20-block lookback.
    sent = body(history(3, calls_per_step=25))
    last = len(sent["messages"]) - 1
    assert marks(sent) == [("system", 0, 0), ("messages", last - 2, 24), ("messages", last, 24)]


@pytest.mark.parametrize("steps", range(0, 30, 3))
def test_never_more_than_4_marks(steps: int) -> None:
    assert len(marks(body(history(steps)))) <= 4


def test_without_a_system_prompt_the_tools_carry_the_prefix_mark() -> None:
    sent = body(history(1), system=None)
    assert marks(sent)[0] == ("tools", 1, 0)


def test_the_ttl_option_and_off() -> None:
    hour = body(history(1), cache={"ttl": "1h"})
    assert hour["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert marks(body(history(2), cache="off")) == []
    assert body(history(2), cache="off")["system"] == "S"


SCOPE = CacheScope(tenant="acme", run="r1")


def test_openai_formats_send_one_key_per_run_unless_off() -> None:
    for wire in (OpenAIChatWire(), OpenAIResponsesWire()):
        keys = set()
        for step in range(3):
            model = ModelRef(provider="openai", name="m")
            request = ModelRequest(
                model=model, system="S", messages=history(step), tools=TOOLS, cache_scope=SCOPE
            )
            keys.add(wire.body(request, stream=False)["prompt_cache_key"])
        assert len(keys) == 1
        off = ModelRef(provider="openai", name="m", options={"cache": "off"})
        request = ModelRequest(model=off, messages=history(1), cache_scope=SCOPE)
        assert "prompt_cache_key" not in wire.body(request, stream=False)


def test_gemini_keeps_its_prefix_stable_for_implicit_caching() -> None:
    model = ModelRef(provider="gemini", name="g")
    bodies = [
        GeminiWire().body(
            ModelRequest(model=model, system="S", messages=history(step), tools=TOOLS), False
        )
        for step in range(4)
    ]
    for before, after in itertools.pairwise(bodies):
        assert after["systemInstruction"] == before["systemInstruction"]
        assert after["tools"] == before["tools"]
        assert after["contents"][: len(before["contents"])] == before["contents"]
