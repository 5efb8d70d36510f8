"""Workflow tools across real worker processes on a real redis-server: each node a job,
the output node's value the call's result, a failing node an error naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.settings import Settings
from tests.support.fake_openai import FakeOpenAI, ToolCall, Turn
from tests.support.http_target import HttpTarget
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

ADDER: dict[str, Any] = {
    "type": "workflow",
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
            {"id": "out", "kind": "output", "value": "{{sum}}"},
        ],
        "edges": [["in", "sum"], ["sum", "out"]],
    },
}


def nodes_shown(events: list[Any]) -> list[dict[str, Any]]:
    """The call's node progress values, after the graph's outline that leads them."""
    shown = [e.model_dump()["output"] for e in events if e.type == "tool-progress"]
    assert set(shown[0]) == {"nodes", "edges"}
    return shown[1:]


def call(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input, "id": "w1"}]}


async def run(redis_url: str, tool: dict[str, Any], tool_input: dict[str, Any]) -> Any:
    spec = scripted(call(tool["name"], tool_input), {"text": "done"}, tools=[tool])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", result.error
    return result.steps[0].tool_results[0], events


async def test_the_readme_adder(redis_url: str, workers: list[WorkerProcess]) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    answer, events = await run(redis_url, ADDER, {"x": 2, "y": 3})
    assert answer.output == 5.0
    assert not answer.is_error
    shown = nodes_shown(events)
    assert [p["node"] for p in shown if p["status"] == "done"] == ["in", "sum", "out"]
    assert {"node": "sum", "status": "running"} in shown


async def test_a_failing_node_is_an_error_naming_it(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    graph = {
        "nodes": [
            {"id": "in", "kind": "input"},
            {
                "id": "boom",
                "kind": "tool",
                "tool": {"type": "function", "name": "fail"},
                "input": {"message": "no luck with {{in.x}}"},
            },
            {"id": "out", "kind": "output", "value": "{{boom}}"},
        ],
        "edges": [["in", "boom"], ["boom", "out"]],
    }
    tool = {**ADDER, "name": "failing", "graph": graph}
    answer, _ = await run(redis_url, tool, {"x": 7})
    assert answer.is_error
    assert answer.output == "The workflow node 'boom' failed: RuntimeError: no luck with 7"


async def test_branches_run_in_parallel_and_a_condition_picks_one(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    graph = {
        "nodes": [
            {"id": "in", "kind": "input"},
            {"id": "double", "kind": "tool", "tool": {"type": "function", "name": "add"},
             "input": {"a": "{{in.x}}", "b": "{{in.x}}"}},
            {"id": "plus1", "kind": "tool", "tool": {"type": "function", "name": "add"},
             "input": {"a": "{{in.x}}", "b": 1}},
            {"id": "both", "kind": "template", "template": "{{double}} and {{plus1}}"},
            {"id": "big", "kind": "condition", "if": "double > `10`"},
            {"id": "yes", "kind": "template", "template": "big: {{both}}"},
            {"id": "no", "kind": "template", "template": "small: {{both}}"},
            {"id": "out", "kind": "output", "value": {"yes": "{{yes}}", "no": "{{no}}"}},
        ],
        "edges": [
            ["in", "double"], ["in", "plus1"], ["double", "both"], ["plus1", "both"],
            ["both", "big"], ["big", "yes", "true"], ["big", "no", "false"],
            ["yes", "out"], ["no", "out"],
        ],
    }  # fmt: skip
    tool = {**ADDER, "name": "branchy", "graph": graph}
    answer, events = await run(redis_url, tool, {"x": 6})
    assert answer.output == {"yes": "big: 12.0 and 7.0", "no": None}
    statuses = {p["node"]: p["status"] for p in nodes_shown(events) if p["status"] != "running"}
    assert statuses["no"] == "skipped"
    assert statuses["yes"] == "done"


async def test_a_worker_killed_mid_node_costs_a_redelivery_not_the_workflow(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    marker = tmp_path / "marker"
    graph = {
        "nodes": [
            {"id": "in", "kind": "input"},
            {
                "id": "slow",
                "kind": "tool",
                "tool": {"type": "function", "name": "mark_and_sleep"},
                "input": {"marker": str(marker), "seconds": "{{in.seconds}}"},
            },
            {"id": "out", "kind": "output", "value": "{{slow.pid}}"},
        ],
        "edges": [["in", "slow"], ["slow", "out"]],
    }
    tool = {**ADDER, "name": "slowpoke", "graph": graph, "timeout_s": 30}
    spec = scripted(call("slowpoke", {"seconds": 2}), {"text": "done"}, tools=[tool])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        started = await eventually_async(
            lambda: marker.read_text().split() if marker.exists() else [], "the node to start"
        )
        next(w for w in workers if w.pid == int(started[0])).kill()
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", result.error
    pids = [int(p) for p in marker.read_text().split()]
    assert len(pids) == 2
    assert result.steps[0].tool_results[0].output == pids[1]
    ends = [p for p in nodes_shown(events) if p["status"] == "done"]
    assert [p["node"] for p in ends] == ["in", "slow", "out"]  # each outcome recorded once


async def test_an_llm_node_gives_structured_output_and_its_usage_rolls_up(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    answer = ToolCall("respond", {"urgent": False, "topic": "billing"})
    with FakeOpenAI([Turn(tool_calls=[answer], usage=usage)]) as server:
        workers += [
            WorkerProcess(
                redis_url, "--tools", TOOLS, env={"AGENTQ_ALLOW_SPEC_ENDPOINTS": server.base_url}
            )
        ]
        wait_ready(*workers)
        graph = {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "classify",
                    "kind": "llm",
                    "model": {"provider": "openai", "name": "m", "base_url": server.base_url},
                    "system": "You triage.",
                    "prompt": "Ticket: {{in.ticket}}",
                    "output_schema": {
                        "type": "object",
                        "properties": {"urgent": {"type": "boolean"}, "topic": {"type": "string"}},
                    },
                },
                {"id": "urgent", "kind": "condition", "if": "classify.urgent"},
                {"id": "page", "kind": "template", "template": "page about {{classify.topic}}"},
                {"id": "out", "kind": "output", "value": {"c": "{{classify}}", "p": "{{page}}"}},
            ],
            "edges": [
                ["in", "classify"],
                ["classify", "urgent"],
                ["urgent", "page", "true"],
                ["classify", "out"],
                ["page", "out"],
            ],
        }
        tool = {**ADDER, "name": "triage", "graph": graph}
        spec = scripted(call("triage", {"ticket": "refund?"}), {"text": "done"}, tools=[tool])
        allowed = Settings(allow_spec_endpoints=server.base_url)
        async with Client(redis_url, settings=allowed) as client:
            result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
        sent = server.requests[0].body
    assert result.status == "succeeded", result.error
    output = result.steps[0].tool_results[0].output
    assert output == {"c": {"urgent": False, "topic": "billing"}, "p": None}
    assert sent["messages"][-1]["content"] == "Ticket: refund?"
    assert result.child_usage.total_tokens == 10


async def test_an_http_node_requests_an_allowed_host(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    target = HttpTarget()
    try:
        allowed = {"AGENTQ_ALLOW_HTTP_HOSTS": "127.0.0.1"}
        workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=allowed)]
        wait_ready(*workers)
        graph = {
            "nodes": [
                {"id": "in", "kind": "input"},
                {
                    "id": "fetch",
                    "kind": "http",
                    "tool": {"url": f"http://127.0.0.1:{target.port}/items/{{id}}"},
                    "input": {"id": "{{in.id}}"},
                },
                {"id": "out", "kind": "output", "value": "{{fetch.body.path}}"},
            ],
            "edges": [["in", "fetch"], ["fetch", "out"]],
        }
        tool = {**ADDER, "name": "fetcher", "graph": graph}
        spec = scripted(call("fetcher", {"id": 7}), {"text": "done"}, tools=[tool])
        settings = Settings(allow_http_hosts="127.0.0.1")
        async with Client(redis_url, settings=settings) as client:
            result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
    finally:
        target.close()
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].output == "/items/7"
