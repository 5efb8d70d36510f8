"""Tool-call repair on the embedded runtime: the scripted model is asked again for an
invalid call; the repaired call runs, and the history never shows the failed attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core.messages import AssistantMessage
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, ModelLog, all_events
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]

Ran = list[tuple[float, float]]


@pytest.fixture
def ran() -> Ran:
    """The additions the test's `add` tool made."""
    return []


@pytest.fixture
def add(ran: Ran) -> FunctionTool:
    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        ran.append((a, b))
        return a + b

    return add


def step_with_repair(bad: dict[str, Any], *repairs: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": "adding",
        "tool_calls": [{"name": "add", "input": bad, "id": "c1"}],
        "repair": [{"name": "add", "input": r} for r in repairs],
    }


def with_repair(spec: dict[str, Any], max_attempts: int = 1) -> dict[str, Any]:
    spec["model"]["repair"] = {"strategy": "reask", "max_attempts": max_attempts}
    return spec


async def test_an_invalid_call_is_repaired_and_runs(
    start: Start, model_log: ModelLog, add: FunctionTool, ran: Ran
) -> None:
    spec = with_repair(
        scripted(
            step_with_repair({"a": "one", "b": 2}, {"a": 1, "b": 2}),
            {"text": "3"},
            tools=["add"],
        )
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert ran == [(1.0, 2.0)]
    (call,) = result.steps[0].tool_calls
    assert (call.id, call.input) == ("c1", {"a": 1, "b": 2})
    (res,) = result.steps[0].tool_results
    assert (res.output, res.is_error) == (3.0, False)
    # The history holds the repaired call only; the repair exchange is nowhere in it.
    assistants = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert [[(c.tool_call_id, c.input) for c in m.tool_calls()] for m in assistants] == [
        [("c1", {"a": 1, "b": 2})],
        [],
    ]
    assert not any("rejected" in str(m.content) for m in result.messages)
    step_1 = next(c.request for c in model_log.calls if c.step == 1)
    # (the result's messages start after the prompt)
    assert step_1.messages[1:] == result.messages[:-1]
    # The model was asked once to repair, with only that tool offered and forced.
    repairs = [c.request for c in model_log.calls if c.request.repair_index is not None]
    assert len(repairs) == 1
    assert [t.name for t in repairs[0].tools] == ["add"]
    assert repairs[0].tool_choice.model_dump() == {"tool": "add"}  # type: ignore[union-attr]
    prompt = str(repairs[0].messages[-1].content)
    assert "'one' is not of type 'number'" in prompt
    assert '"a": "one"' in prompt
    # One event tells the story.
    (event,) = [e.model_dump() for e in events if e.type == "tool-call-repair"]
    assert event["tool_call_id"] == "c1"
    assert event["tool_name"] == "add"
    assert event["input"] == {"a": "one", "b": 2}
    assert "'one' is not of type 'number'" in event["error"]
    assert (event["repaired"], event["repaired_input"], event["attempts"]) == (
        True,
        {"a": 1, "b": 2},
        1,
    )
    kinds = [e.type for e in events]
    assert kinds.index("tool-call-repair") < kinds.index("tool-call")
    assert not any(e.type == "tool-error" for e in events)
    # The repair request's usage counts toward the step's.
    assert result.steps[0].usage.total_tokens == 110 + 110


async def test_a_repair_that_fails_reports_the_original_error(
    start: Start, model_log: ModelLog, add: FunctionTool, ran: Ran
) -> None:
    spec = with_repair(
        scripted(
            step_with_repair({"a": 1}, {"a": "x", "b": 1}, {"b": 2}),
            {"text": "gave up"},
            tools=["add"],
        ),
        max_attempts=2,
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)

    assert result.status == "succeeded", result.error
    assert ran == []
    (res,) = result.steps[0].tool_results
    assert res.is_error
    assert "'b' is a required property" in res.output
    assert result.steps[0].tool_calls[0].input == {"a": 1}
    (event,) = [e.model_dump() for e in events if e.type == "tool-call-repair"]
    assert (event["repaired"], event["attempts"], event.get("repaired_input")) == (False, 2, None)
    # The second attempt was shown the first attempt's arguments and error.
    repairs = [c.request for c in model_log.calls if c.request.repair_index is not None]
    assert [r.repair_index for r in repairs] == [0, 1]
    assert "'x' is not of type 'number'" in str(repairs[1].messages[-1].content)


async def test_without_a_policy_nothing_is_repaired(
    start: Start, model_log: ModelLog, add: FunctionTool
) -> None:
    spec = scripted(
        step_with_repair({"a": "one", "b": 2}, {"a": 1, "b": 2}), {"text": "ok"}, tools=["add"]
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.steps[0].tool_results[0].is_error
    assert not any(e.type == "tool-call-repair" for e in events)
    assert all(c.request.repair_index is None for c in model_log.calls)


async def test_a_repair_the_model_cannot_answer_does_not_fail_the_run(
    start: Start, add: FunctionTool
) -> None:
    # The scripted step has no repair answer: the repair request fails, the call's own
    # error goes back to the model.
    spec = with_repair(
        scripted(step_with_repair({"a": "one", "b": 2}), {"text": "ok"}, tools=["add"])
    )
    async with start([add]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = await all_events(client, run_id)
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].is_error
    (event,) = [e.model_dump() for e in events if e.type == "tool-call-repair"]
    assert (event["repaired"], event["attempts"]) == (False, 1)
