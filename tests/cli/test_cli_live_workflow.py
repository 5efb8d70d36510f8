"""A workflow call's nodes in `agentq run`'s live view, on the embedded runtime: the
graph's outline leads the call's progress, each node's end carries its output (or error),
capped like any progress value, and the view shows `node X done: <output>`."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from agentq.cli.live import LiveRun
from agentq.cli.render import ProgressPrinter
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tool_output import MAX_PROGRESS_BYTES
from agentq.workers.worker.embedded import embedded
from tests.support.sample_tools import add, fail
from tests.support.specs import scripted

pytestmark = pytest.mark.component

FAST = Settings(idle_poll_s=0.1, lease_s=5.0)


KINDS = [("in", "input"), ("mid", "tool"), ("out", "output")]
EDGES = [["in", "mid"], ["mid", "out"]]


def workflow(name: str, middle: dict[str, Any]) -> dict[str, Any]:
    """in → `middle` (a node with id "mid") → out, whose value is mid's."""
    return {
        "type": "workflow",
        "name": name,
        "graph": {
            "nodes": [
                {"id": "in", "kind": "input"},
                {"id": "mid", **middle},
                {"id": "out", "kind": "output", "value": "{{mid}}"},
            ],
            "edges": EDGES,
        },
    }


ADDER = workflow(
    "adder",
    {"kind": "tool", "tool": {"type": "function", "name": "add"}, "input": {"a": 2, "b": 3}},
)
BROKEN = workflow(
    "broken",
    {
        "kind": "tool",
        "tool": {"type": "function", "name": "fail"},
        "input": {"message": "no luck"},
    },
)
ECHO = workflow("echo", {"kind": "template", "template": "{{in.text}}"})


async def follow(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], str, Any]:
    """The run's node progress values, what the live view printed, and the run's result."""
    out = io.StringIO()
    show = ProgressPrinter(Console(file=out, soft_wrap=True, emoji=False))
    async with embedded(tools=[add, fail], settings=FAST) as client:
        run_id = await client.runs.submit(spec)
        await LiveRun(client, run_id, show, interactive=False, private=True).follow()
        result = await client.runs.wait(run_id)
        events = [e async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", out.getvalue()
    progress = [e.model_dump()["output"] for e in events if e.type == "tool-progress"]
    return progress, out.getvalue(), result


async def test_each_node_ends_with_its_output_or_error_shown_live() -> None:
    step = {
        "tool_calls": [
            {"id": "w1", "name": "adder", "input": {}},
            {"id": "w2", "name": "broken", "input": {}},
        ]
    }
    progress, text, _ = await follow(scripted(step, {"text": "ok"}, tools=[ADDER, BROKEN]))
    outline = {"nodes": [{"id": n, "kind": k} for n, k in KINDS], "edges": EDGES}
    assert progress.count(outline) == 2  # one per call, before its nodes
    ended = [p for p in progress if p.get("status") not in (None, "running")]
    assert {"node": "in", "status": "done", "output": {}} in ended
    assert {"node": "mid", "status": "done", "output": 5.0} in ended
    assert {"node": "out", "status": "done", "output": 5.0} in ended
    assert {"node": "mid", "status": "failed", "error": "RuntimeError: no luck"} in ended
    assert "adder#w1 workflow of 3 nodes: in, mid, out" in text
    assert "adder#w1 node mid running" in text
    assert "adder#w1 node mid done: 5.0" in text
    assert "broken#w2 node mid failed: RuntimeError: no luck" in text


async def test_a_large_node_output_is_capped_in_progress_not_in_the_result() -> None:
    big = "x" * (2 * MAX_PROGRESS_BYTES)
    step = {"tool_calls": [{"id": "w1", "name": "echo", "input": {"text": big}}]}
    progress, text, result = await follow(scripted(step, {"text": "ok"}, tools=[ECHO]))
    shown = next(p["output"] for p in progress if p.get("node") == "mid" and p["status"] == "done")
    assert len(shown.encode()) <= MAX_PROGRESS_BYTES
    assert shown.endswith(f"the limit is {MAX_PROGRESS_BYTES:,}]")
    assert result.steps[0].tool_results[0].output == big
    assert "echo#w1 node mid done: xxx" in text
