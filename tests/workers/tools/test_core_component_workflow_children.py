"""Workflow nodes whose work is a child run of the call's run: an llm node that uses tools
(a small agent loop: model step, tool calls, model step, each a job; its answer is the
node's output, its usage rolls up, cancelling the run cancels it), and a tool node calling
an agent or a workflow (the run's own machinery starts the call)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.run_ids import ParentLink
from agentq.orchestrator.tools.workflow import WorkflowToolConfig
from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition
from tests.support.embedded_runs import TIMEOUT_S, Embedded, of_type, usage_for, wait_event
from tests.support.specs import scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def workflow(node_tools: list[dict[str, Any]], script: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "workflow",
        "name": "summer",
        "graph": {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "think",
                    "kind": "llm",
                    "model": {"provider": "scripted", "script": script},
                    "system": "You add.",
                    "prompt": "Add {{in.x}} and {{in.y}}",
                    "tools": node_tools,
                    "max_steps": 3,
                },
                {"id": "out", "kind": "output", "value": "{{think}}"},
            ],
            "edges": [["in", "think"], ["think", "out"]],
        },
    }


THINK: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "add", "input": {"a": 2, "b": 3}, "id": "a1"}]},
    {"text": "the sum is 5"},
]


def spec(entry: dict[str, Any]) -> dict[str, Any]:
    call = {"tool_calls": [{"name": "summer", "input": {"x": 2, "y": 3}, "id": "w1"}]}
    return scripted(call, {"text": "done"}, tools=[entry])


def node_child(run_id: str) -> str:
    return ParentLink(run_id=run_id, step=0, call_id="w1", node="think").child_id


async def test_an_llm_node_calls_tools_in_a_child_run(start: Start) -> None:
    async with start([add]) as client:
        run_id = await client.runs.submit(
            spec(workflow([{"type": "function", "name": "add"}], THINK))
        )
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        assert result.status == "succeeded", result.error
        assert result.steps[0].tool_results[0].output == "the sum is 5"
        child = await client.runs.result(node_child(run_id))
    assert child.status == "succeeded"
    assert child.parent is not None
    assert child.parent.node == "think"
    assert [r.output for r in child.steps[0].tool_results] == [5.0]
    assert result.child_usage.total_tokens == sum(usage_for(s).total_tokens for s in (0, 1))


def child_called(event: Any) -> bool:
    output = getattr(event, "output", None)
    return isinstance(output, dict) and output.get("node") == "think" and "tool_calls" in output


async def test_cancelling_the_run_cancels_the_nodes_child(start: Start) -> None:
    parked = [{"type": "function", "name": "add", "needs_approval": True}]
    async with start([add]) as client:
        run_id = await client.runs.submit(spec(workflow(parked, THINK)))
        child_id = node_child(run_id)
        # The child's steps show on the workflow call, naming the node.
        await wait_event(client, run_id, child_called)
        await wait_event(client, child_id, of_type("tool-approval-request"))
        await client.runs.cancel(run_id, "enough")
        child = await client.runs.wait(child_id, timeout_s=TIMEOUT_S)
    assert child.status == "cancelled"


async def test_a_node_tool_nothing_serves_is_refused_at_submit_naming_the_node(
    start: Start,
) -> None:
    async with start([add]) as client:
        with pytest.raises(SpecError, match=r"graph\.nodes\[think\].*'nope'"):
            await client.runs.submit(spec(workflow([{"type": "function", "name": "nope"}], THINK)))


def calling(node_tool: dict[str, Any], node_input: Any) -> dict[str, Any]:
    """A workflow `caller` whose tool node calls `node_tool` with `node_input`."""
    return {
        "type": "workflow",
        "name": "caller",
        "graph": {
            "nodes": [
                {"id": "in", "kind": "input"},
                {"id": "call", "kind": "tool", "tool": node_tool, "input": node_input},
                {"id": "out", "kind": "output", "value": "{{call}}"},
            ],
            "edges": [["in", "call"], ["call", "out"]],
        },
    }


async def called(client: Any, entry: dict[str, Any], tool_input: Any) -> Any:
    call = {"tool_calls": [{"name": "caller", "input": tool_input, "id": "w1"}]}
    run_id = await client.runs.submit(scripted(call, {"text": "done"}, tools=[entry]))
    result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    answer = result.steps[0].tool_results[0]
    assert not answer.is_error, answer.output
    return answer.output


async def test_a_tool_node_calls_an_agent_tool(start: Start) -> None:
    helper = {
        "type": "agent",
        "name": "helper",
        "spec": {"model": {"provider": "scripted", "script": [{"text": "helped"}]}},
    }
    async with start([add]) as client:
        output = await called(client, calling(helper, {"prompt": "help with {{in.x}}"}), {"x": 2})
    assert output == "helped"


async def test_a_tool_node_calls_a_workflow_inline_or_published_pinned_at_submit(
    start: Start,
) -> None:
    inner = {
        "nodes": [
            {"id": "in", "kind": "input"},
            {
                "id": "sum",
                "kind": "tool",
                "tool": {"type": "function", "name": "add"},
                "input": {"a": "{{in.x}}", "b": "{{in.y}}"},
            },
            {"id": "out", "kind": "output", "value": "{{sum}}"},
        ],
        "edges": [["in", "sum"], ["sum", "out"]],
    }
    nested = {"x": "{{in.x}}", "y": 1}
    async with start([add]) as client:
        inline = {"type": "workflow", "name": "adder", "graph": inner}
        assert await called(client, calling(inline, nested), {"x": 2}) == 3.0

        definition = WorkflowDefinition.model_validate({"name": "adder", "graph": inner})
        await client.fleet.publish_workflows([definition])
        entry = calling({"type": "workflow", "workflow": "adder"}, nested)
        (tool_def,) = await client.runs.tools(
            await client.runs.submit(scripted({"text": "x"}, tools=[entry]))
        )
        assert isinstance(tool_def.config, WorkflowToolConfig)
        (pinned,) = tool_def.config.children["call"]["tools"]
        assert pinned == {"type": "workflow", "workflow": "adder", "version": 1}
        assert await called(client, entry, {"x": 4}) == 5.0
