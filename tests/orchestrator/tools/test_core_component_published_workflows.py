"""Published workflows: a spec names one (`{"type": "workflow", "workflow": NAME}`), the
latest version by default or the one it pins; a new version leaves a run in flight with
the definition it resolved; a bad definition is refused at publish naming its node, an
unknown name at submit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import TIMEOUT_S, Embedded, of_type, wait_event
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def adder(out: str) -> WorkflowDefinition:
    """`adder`, whose output node gives `out` (a template over the sum)."""
    return WorkflowDefinition.model_validate(
        {
            "name": "adder",
            "description": "Adds x and y",
            "input_schema": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            },
            "graph": {
                "nodes": [
                    {"id": "in", "kind": "input"},
                    {
                        "id": "sum",
                        "kind": "tool",
                        "tool": {"type": "function", "name": "add"},
                        "input": {"a": "{{in.x}}", "b": "{{in.y}}"},
                    },
                    {"id": "out", "kind": "output", "value": out},
                ],
                "edges": [["in", "sum"], ["sum", "out"]],
            },
        }
    )


def using(entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    call = {"tool_calls": [{"name": "adder", "input": {"x": 2, "y": 3}, "id": "w1"}]}
    return scripted(call, {"text": "done"}, tools=[{"type": "workflow", **entry}], **extra)


async def answer(client: Any, run_id: str) -> Any:
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    return result.steps[0].tool_results[0].output


async def test_a_spec_uses_a_published_workflow_by_name(start: Start) -> None:
    tools: list[FunctionTool] = [add]
    async with start(tools) as client:
        (published,) = await client.fleet.publish_workflows([adder("{{sum}}")])
        assert (published.version, published.new) == (1, True)
        run_id = await client.runs.submit(using({"workflow": "adder"}))
        assert await answer(client, run_id) == 5.0
        (tool_def,) = await client.runs.tools(run_id)
        assert tool_def.description == "Adds x and y"
        assert tool_def.input_schema["properties"]["x"] == {"type": "number"}


async def test_publishing_the_same_definition_makes_no_new_version(start: Start) -> None:
    async with start([add]) as client:
        await client.fleet.publish_workflows([adder("{{sum}}")])
        (again,) = await client.fleet.publish_workflows([adder("{{sum}}")])
        assert (again.version, again.new) == (1, False)
        (changed,) = await client.fleet.publish_workflows([adder("sum {{sum}}")])
        assert (changed.version, changed.new) == (2, True)
        assert sorted((await client.fleet.workflows())["adder"]) == [1, 2]


async def test_a_new_version_leaves_a_run_in_flight_with_its_own(start: Start) -> None:
    async with start([add]) as client:
        await client.fleet.publish_workflows([adder("{{sum}}")])
        # The call waits for approval: the run is in flight, its workflow resolved.
        in_flight = await client.runs.submit(using({"workflow": "adder", "needs_approval": True}))
        await wait_event(client, in_flight, of_type("tool-approval-request"))
        await client.fleet.publish_workflows([adder("the sum is {{sum}}")])
        latest = await client.runs.submit(using({"workflow": "adder"}))
        pinned = await client.runs.submit(using({"workflow": "adder", "version": 1}))
        await client.runs.approve(in_flight, "w1")
        assert await answer(client, in_flight) == 5.0
        assert await answer(client, latest) == "the sum is 5.0"
        assert await answer(client, pinned) == 5.0


async def test_an_unknown_name_or_version_is_refused_at_submit(start: Start) -> None:
    async with start([add]) as client:
        with pytest.raises(UnknownToolError, match=r"tools\[0\]\.workflow: no workflow named"):
            await client.runs.submit(using({"workflow": "adder"}))
        await client.fleet.publish_workflows([adder("{{sum}}")])
        with pytest.raises(UnknownToolError, match="has no version 2"):
            await client.runs.submit(using({"workflow": "adder", "version": 2}))


async def test_a_bad_definition_is_refused_at_publish_naming_its_node(start: Start) -> None:
    bad = adder("{{missing}}")
    async with start([add]) as client:
        with pytest.raises(SpecError, match=r"workflow 'adder': graph\.nodes\[out\]"):
            await client.fleet.publish_workflows([bad])
        assert await client.fleet.workflows() == {}


async def test_published_workflows_calling_each_other_are_refused_at_submit(
    start: Start,
) -> None:
    def calling(name: str, other: str) -> WorkflowDefinition:
        return WorkflowDefinition.model_validate(
            {
                "name": name,
                "graph": {
                    "nodes": [
                        {"id": "in", "kind": "input"},
                        {
                            "id": "call",
                            "kind": "tool",
                            "tool": {"type": "workflow", "workflow": other},
                        },
                        {"id": "out", "kind": "output", "value": "{{call}}"},
                    ],
                    "edges": [["in", "call"], ["call", "out"]],
                },
            }
        )

    async with start([add]) as client:
        await client.fleet.publish_workflows([calling("ping", "pong"), calling("pong", "ping")])
        with pytest.raises(SpecError, match="call each other: ping -> pong -> ping"):
            await client.runs.submit(using({"workflow": "ping", "name": "adder"}))
