"""What a thread's next run starts from (pure): answered, then capped."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.threads.history import answered, continued

pytestmark = pytest.mark.unit


def _call(call_id: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCallPart(tool_call_id=call_id, tool_name="add", input={"a": 1})]
    )


def _result(call_id: str) -> ToolMessage:
    return ToolMessage(content=[ToolResultPart(tool_call_id=call_id, tool_name="add", output=1)])


def _turns(n: int) -> list[Message]:
    out: list[Message] = [UserMessage(content="task")]
    for i in range(n):
        out += [_call(f"c{i}"), _result(f"c{i}"), AssistantMessage(content=f"a{i}")]
    return out


def test_a_last_step_with_open_calls_is_left_out() -> None:
    history: list[Message] = [UserMessage(content="hi"), _call("c1")]
    assert answered(history) == [UserMessage(content="hi")]
    whole = [*history, _result("c1")]
    assert answered(whole) == whole


@pytest.mark.parametrize("cap", [4, 7, 10])
def test_a_long_history_keeps_its_task_and_newest_turns(cap: int) -> None:
    history = _turns(10)
    kept = continued(history, cap)
    assert kept[0] == UserMessage(content="task")
    assert len(kept) <= cap
    assert kept[-1] == history[-1]
    # Never a tool message without the call it answers.
    assert not isinstance(kept[1], ToolMessage)


def test_a_short_history_is_kept_whole() -> None:
    history = _turns(2)
    assert continued(history, 100) == history
