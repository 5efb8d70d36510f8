"""Reasoning on the embedded runtime: a scripted step's reasoning streams as
`reasoning-delta` events before that step's text, and never becomes the run's text."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentq import tool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, all_events
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


async def test_reasoning_events_come_in_order_and_stay_out_of_the_text(start: Start) -> None:
    spec = scripted(
        {
            "reasoning": "Two numbers: use add.",
            "text": "Adding.",
            "tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}],
        },
        {"reasoning": "add said 3.", "text": "3"},
        tools=["add"],
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    for step, reasoning, text in ((0, "Two numbers: use add.", "Adding."), (1, "add said 3.", "3")):
        mine = [e for e in events if getattr(e, "step", None) == step]
        shown = ("start-step", "reasoning-delta", "text-delta", "finish-step")
        kinds = [e.type for e in sorted(mine, key=lambda e: e.seq) if e.type in shown]
        # In seq order: the step starts, all its reasoning, then its text, then it ends.
        assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == list(shown)
        thoughts = [e for e in mine if e.type == "reasoning-delta"]
        assert "".join(e.model_dump()["delta"] for e in thoughts) == reasoning
        assert all(e.model_dump()["attempt"] == 1 for e in thoughts)
        assert result.steps[step].text == text
    # The reasoning is nowhere in what the run keeps.
    kept = result.model_dump_json()
    assert "Two numbers" not in kept
    assert "add said" not in kept
