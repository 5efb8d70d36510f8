"""Sub-agents (`agent` tools) across real worker processes on a real redis-server: the
parent's call parks while a child run works, and the child's end answers it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from agentq.orchestrator import tracing
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.run_ids import child_run_id
from tests.support.fake_openai import FakeOpenAI, Turn
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.otlp import OtlpReceiver
from tests.support.serve import ServeProcess
from tests.support.specs import scripted
from tests.support.trace_shape import has_root, run_spans
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


def agent_tool(child: dict[str, Any], name: str = "helper") -> dict[str, Any]:
    template = {k: v for k, v in child.items() if k != "prompt"}
    return {"type": "agent", "name": name, "description": "A helper agent", "spec": template}


def ask(prompt: str, name: str = "helper", call_id: str = "a1") -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": {"prompt": prompt}, "id": call_id}]}


async def test_a_sub_agent_answers_its_parents_call(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    child = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]},
        {"text": "the sum is 3"},
        tools=["add"],
    )
    spec = scripted(ask("add 1 and 2"), {"text": "done"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]
        child_id = child_run_id(run_id, 0, "a1")
        child_events = [e async for e in client.runs.events(child_id)]
        child_result = await client.runs.result(child_id)
    assert result.status == "succeeded", result.error
    (answer,) = result.steps[0].tool_results
    assert answer.output == "the sum is 3"
    assert not answer.is_error
    assert child_result.status == "succeeded"
    start = child_events[0].model_dump()
    assert start["parent"] == {"run_id": run_id, "step": 0, "call_id": "a1"}
    progress = [e.model_dump()["output"] for e in events if e.type == "tool-progress"]
    assert progress[0] == {"child_run_id": child_id, "status": "started"}
    assert {"child_run_id": child_id, "step": 1} in progress
    add_call = [{"name": "add", "input": {"a": 1, "b": 2}}]
    assert any(p.get("tool_calls") == add_call for p in progress)
    assert progress[-1] == {"child_run_id": child_id, "status": "succeeded"}


async def test_a_failing_sub_agent_is_a_tool_error_for_the_parent(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    # The child's script ends after its tool call: its step 1 fails the child run.
    child = scripted({"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]}, tools=["add"])
    spec = scripted(ask("try"), {"text": "recovered"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
    assert result.status == "succeeded", result.error
    (answer,) = result.steps[0].tool_results
    assert answer.is_error
    assert "failed: the scripted model has 1 steps" in answer.output
    assert result.text == "recovered"


async def test_nesting_past_the_depth_limit_is_refused_with_a_tool_error(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_MAX_AGENT_DEPTH": "1"})]
    wait_ready(*workers)
    grandchild = scripted({"text": "never runs"})
    child = scripted(
        ask("deeper", name="deeper"),
        {"text": "child gave up"},
        tools=[agent_tool(grandchild, name="deeper")],
    )
    spec = scripted(ask("go"), {"text": "top done"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=60)
        child_result = await client.runs.result(child_run_id(run_id, 0, "a1"))
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].output == "child gave up"
    (refused,) = child_result.steps[0].tool_results
    assert refused.is_error
    assert "nest sub-agents 2 deep; this deployment allows 1" in refused.output
    # Only children that were made are listed: the refused grandchild never was.
    assert result.children == {"a1": child_run_id(run_id, 0, "a1")}
    assert child_result.children == {}


async def test_cancelling_the_parent_cancels_its_child(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    # The child parks on a client tool nobody answers.
    child = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}}]},
        {"text": "never"},
        tools=[{"type": "client", "name": "ask_user"}],
    )
    spec = scripted(ask("wait"), {"text": "never"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        child_id = child_run_id(run_id, 0, "a1")

        async def child_parked() -> bool:
            try:
                return (await client.runs.result(child_id)).status == "awaiting"
            except Exception:
                return False

        await eventually_async(child_parked, "the child to park on its client tool")
        assert await client.runs.cancel(run_id) == "cancelled"
        child_result = await client.runs.result(child_id)
        parent = await client.runs.wait(run_id, timeout_s=30)
    assert parent.status == "cancelled"
    assert child_result.status == "cancelled"


async def test_a_childs_usage_rolls_up_apart_and_links_show_both_ways(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    with FakeOpenAI([Turn(text="from the child", usage=usage)]) as server:
        env = {"AGENTQ_ALLOW_SPEC_ENDPOINTS": server.base_url}
        workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=env)]
        wait_ready(*workers)
        model = {"provider": "openai", "name": "m", "base_url": server.base_url}
        child = {"model": model}
        spec = scripted(ask("hello"), {"text": "done"}, tools=[agent_tool(child)])
        async with Client(redis_url) as client:
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            child_id = child_run_id(run_id, 0, "a1")
            child_result = await client.runs.result(child_id)
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].output == "from the child"
    assert result.usage.total_tokens == 0  # the scripted parent's own
    assert result.child_usage.total_tokens == 16
    assert result.child_usage.input_tokens == 11
    assert result.children == {"a1": child_id}
    assert child_result.parent is not None
    assert child_result.parent.run_id == run_id
    assert child_result.parent.call_id == "a1"


async def test_a_step_past_the_fan_out_limit_gets_tool_errors(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_MAX_AGENT_FANOUT": "2"})]
    wait_ready(*workers)
    child = scripted({"text": "ok"})
    many = {
        "tool_calls": [
            {"name": "helper", "input": {"prompt": str(i)}, "id": f"a{i}"} for i in range(3)
        ]
    }
    spec = scripted(many, {"text": "done"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
    assert result.status == "succeeded", result.error
    outputs = [(r.is_error, r.output) for r in result.steps[0].tool_results]
    assert outputs[:2] == [(False, "ok"), (False, "ok")]
    assert outputs[2][0]
    assert "sub-agent call number 3 of this step; this deployment allows 2" in outputs[2][1]


async def test_the_childs_trace_is_a_child_of_the_parents_call_span(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    child = scripted(
        {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]}, {"text": "3"}, tools=["add"]
    )
    spec = scripted(ask("add"), {"text": "done"}, tools=[agent_tool(child)], id="traced-parent")
    with OtlpReceiver() as receiver:
        workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=receiver.env("w"))]
        wait_ready(*workers)
        async with Client(redis_url) as client:
            result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
        trace_id = format(tracing.run_ids("traced-parent")[0], "032x")
        spans = run_spans(
            receiver.wait_for(
                lambda got: len([s for s in run_spans(got, trace_id) if has_root([s])]) == 2,
                "both runs' spans in the parent's trace",
            ),
            trace_id,
        )
    assert result.status == "succeeded", result.error
    roots = {s.parent_id: s for s in spans if s.name.startswith("invoke_agent")}
    parent_root = roots[""]
    (call,) = [s for s in spans if s.name == "execute_tool helper"]
    assert call.parent_id == parent_root.span_id
    assert call.attributes["gen_ai.tool.call.id"] == "a1"
    child_root = roots[call.span_id]
    child_id = child_run_id("traced-parent", 0, "a1")
    assert format(tracing.run_ids(child_id)[1], "016x") == child_root.span_id
    (child_add,) = [s for s in spans if s.name == "execute_tool add"]
    by_id = {s.span_id: s for s in spans}
    assert by_id[child_add.parent_id].parent_id == child_root.span_id  # under a job of the child


async def test_an_approved_sub_agent_call_starts_its_child(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    tool = {**agent_tool(scripted({"text": "approved work"})), "needs_approval": True}
    spec = scripted(ask("go"), {"text": "done"}, tools=[tool])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)

        async def awaiting_approval() -> bool:
            pending = (await client.runs.result(run_id)).pending
            return [p.get("status") for p in pending] == ["awaiting-approval"]

        await eventually_async(awaiting_approval, "the call to await approval")
        await client.runs.approve(run_id, "a1")
        result = await client.runs.wait(run_id, timeout_s=60)
    assert result.status == "succeeded", result.error
    assert result.steps[0].tool_results[0].output == "approved work"


async def test_a_fan_out_past_the_tree_size_gets_tool_errors(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    """Each run of the tree asks three helpers: 13 runs, where the deployment allows 6.
    The first five children start; the others are tool errors their parent's model sees,
    and each child started spends its tenant's submit rate."""
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_MAX_TREE_RUNS": "6"})]
    wait_ready(*workers)
    three = {
        "tool_calls": [
            {"name": "helper", "input": {"prompt": str(i)}, "id": f"a{i}"} for i in range(3)
        ]
    }
    leaf = scripted({"text": "leaf"})
    child = scripted(three, {"text": "child done"}, tools=[agent_tool(leaf)])
    spec = scripted(three, {"text": "done"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=120)
        runs = (await client.runs.list(limit=100)).runs
        children = [await client.runs.result(c) for c in result.children.values()]
        submits = [
            int(await client.redis.get(key))
            async for key in client.redis.scan_iter("aq:serve:submits:default:*")
        ]
    assert result.status == "succeeded", result.error
    assert len(runs) == 6
    assert sum(submits) == 5
    answers = [r for c in children for r in c.steps[0].tool_results]
    refused = [r for r in answers if r.is_error]
    assert len(refused) == 9 - 2
    assert all("this deployment allows 6 (AGENTQ_MAX_TREE_RUNS)" in str(r.output) for r in refused)
    assert sorted(r.output for r in answers if not r.is_error) == ["leaf", "leaf"]


async def test_a_fan_out_past_the_tree_steps_ends_with_the_limit_named(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    """Each run of the tree asks three helpers, where the deployment allows the whole tree
    5 model steps: the runs that would take a sixth fail with a `limit` error naming it,
    each child's failure is a tool error its parent's model sees, and no more than 5
    steps were taken."""
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env={"AGENTQ_MAX_TREE_STEPS": "5"})]
    wait_ready(*workers)
    three = {
        "tool_calls": [
            {"name": "helper", "input": {"prompt": str(i)}, "id": f"a{i}"} for i in range(3)
        ]
    }
    leaf = scripted({"text": "leaf"})
    child = scripted(three, {"text": "child done"}, tools=[agent_tool(leaf)])
    spec = scripted(three, {"text": "done"}, tools=[agent_tool(child)])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=120)
        runs = (await client.runs.list(limit=100)).runs
        results = [await client.runs.wait(r.id, timeout_s=60) for r in runs]
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "limit"
    assert "allows 5 (AGENTQ_MAX_TREE_STEPS)" in result.error.message
    assert sum(len(r.steps) for r in results) <= 5
    answers = result.steps[0].tool_results
    assert [a.is_error for a in answers] == [True] * 3
    assert all("(AGENTQ_MAX_TREE_STEPS)" in str(a.output) for a in answers)


async def test_a_spec_limit_under_the_ceiling_holds_for_the_whole_tree(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    """The top run's spec allows its tree 4 runs (the deployment 100); its children's
    template asks for 50, which cannot raise it: the tree holds 4 runs, and every
    grandchild is a tool error naming the spec's limit."""
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    three = {
        "tool_calls": [
            {"name": "helper", "input": {"prompt": str(i)}, "id": f"a{i}"} for i in range(3)
        ]
    }
    leaf = scripted({"text": "leaf"})
    child = scripted(
        three, {"text": "child done"}, tools=[agent_tool(leaf)], limits={"max_tree_runs": 50}
    )
    spec = scripted(three, {"text": "done"}, tools=[agent_tool(child)], limits={"max_tree_runs": 4})
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=120)
        runs = (await client.runs.list(limit=100)).runs
        children = [await client.runs.result(c) for c in result.children.values()]
    assert result.status == "succeeded", result.error
    assert len(runs) == 4
    answers = [r for c in children for r in c.steps[0].tool_results]
    assert len(answers) == 9
    assert all(r.is_error for r in answers)
    assert all(
        "its run tree's spec allows 4 (limits.max_tree_runs)" in str(r.output) for r in answers
    )


async def test_a_spec_limit_on_steps_under_the_ceiling_ends_the_run_naming_it(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS)]
    wait_ready(*workers)
    step = {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}}]}
    spec = scripted(step, step, step, {"text": "done"}, tools=["add"])
    async with Client(redis_url) as client:
        run_id = await client.runs.submit({**spec, "limits": {"max_tree_steps": 2}})
        result = await client.runs.wait(run_id, timeout_s=60)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "limit"
    assert result.error.message == (
        "its run tree would take 3 model steps; its run tree's spec allows 2 "
        "(limits.max_tree_steps)"
    )
    assert len(result.steps) == 2


async def test_children_spend_their_tenants_submit_rate_with_the_http_door(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    """One deployment setting, read by `agentq serve` and the workers: a run submitted
    over HTTP spends 1 of its tenant's 3 submits a minute, its first two children the
    rest, its next three are tool errors naming the rate, and the door then refuses the
    tenant's next submit: the workers spent the same window."""
    rate = {"AGENTQ_SUBMITS_PER_MINUTE": "3"}
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=rate)]
    wait_ready(*workers)
    five = {
        "tool_calls": [
            {"name": "helper", "input": {"prompt": str(i)}, "id": f"a{i}"} for i in range(5)
        ]
    }
    spec = scripted(five, {"text": "done"}, tools=[agent_tool(scripted({"text": "leaf"}))])
    server = ServeProcess(redis_url, env=rate)
    try:
        await _away_from_the_window_edge()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            submitted = await http.post("/v1/runs", json=spec)
            assert submitted.status_code == 201, submitted.text
            async with Client(redis_url) as client:
                result = await client.runs.wait(submitted.json()["id"], timeout_s=60)
            again = await http.post("/v1/runs", json=spec)
    finally:
        server.stop()
    assert result.status == "succeeded", result.error
    answers = result.steps[0].tool_results
    assert [a.output for a in answers if not a.is_error] == ["leaf", "leaf"]
    refused = [str(a.output) for a in answers if a.is_error]
    assert len(refused) == 3
    over = "tenant 'default' is over its submit rate (3 a minute, AGENTQ_SUBMITS_PER_MINUTE)"
    assert all(over in r and "retry after" in r for r in refused), refused
    assert len(result.children) == 2
    assert again.status_code == 429, again.text
    assert again.json()["error"]["limit"] == "submits_per_minute"


async def _away_from_the_window_edge() -> None:
    """The submit rate's counts start afresh each minute (Runs.count_submission): a test
    that counts to it starts far from the window's end, so its counts share one window."""
    into = time.time() % 60
    if into > 60 - 15:
        await asyncio.sleep(60 - into + 0.1)
