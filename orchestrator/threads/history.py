"""What a thread's next run starts from, the pure part.

The thread's history is its last run's conversation. A run stopped while its calls ran
left an assistant message whose calls have no results: a model cannot continue from a
call left open, so that last step is left out. A long history is capped with the
`drop_oldest` context strategy (orchestrator/loop/context.py): the first message (the
thread's task) and the newest messages stay; each step may compact further with the
run's own `context` policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentq.orchestrator.core.messages import AssistantMessage, Message, ToolMessage
from agentq.orchestrator.loop.context import compact, estimate_tokens


def answered(conversation: Sequence[Message]) -> list[Message]:
    """The conversation without a last step whose calls did not all get results."""
    results = {
        part.tool_call_id
        for message in conversation
        if isinstance(message, ToolMessage)
        for part in message.content
    }
    asked = max(
        (n for n, m in enumerate(conversation) if isinstance(m, AssistantMessage)), default=-1
    )
    if asked < 0:
        return list(conversation)
    last = conversation[asked]
    assert isinstance(last, AssistantMessage)
    open_calls = [
        c for c in last.tool_calls() if c.tool_call_id not in results and not c.provider_executed
    ]
    return list(conversation[:asked] if open_calls else conversation)


def continued(conversation: Sequence[Message], max_messages: int) -> list[Message]:
    """The history a thread's next run starts from: answered, and at most about
    `max_messages` long (a tool message stays with the call it answers)."""
    history = answered(conversation)
    if len(history) <= max_messages:
        return history
    capped, _ = compact(
        history,
        "drop_oldest",
        max_input_tokens=None,
        keep_last=max_messages - 1,
        tokens=estimate_tokens(history),
    )
    return capped
