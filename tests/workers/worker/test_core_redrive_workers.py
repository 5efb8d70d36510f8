"""A run whose step lost its job (as a failover can drop the write that queued it), or
whose workflow call lost a node's job, finishes, exactly once, because a worker's
sweeper drives it again: real worker processes on a real redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import child_run_id
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

# Well above nothing, well below the default: the sweeper looks at runs unmoved this long.
SWEPT = {"AGENTQ_REDRIVE_AFTER_S": "0.3"}


async def _lose(client: Client, job_id: str, queue: str) -> None:
    """What a failover can do to a queued job: its key and its queue entry (or, for a
    timer such as a deadline, its entry in the queue's timers) gone."""
    redis = client.redis
    assert await redis.delete(keys.arq_job(job_id)) == 1
    timers = keys.timers(queue, keys.job_partition(job_id))
    removed = await redis.zrem(keys.job_queue(queue, job_id), job_id)
    assert removed + await redis.zrem(timers, job_id) == 1


async def test_a_lost_model_step_job_is_driven_again(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    spec = scripted({"text": "hello"})
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)  # no worker yet: the job waits, queued
        await _lose(client, keys.model_job_id(run_id, 0), "model")
        workers.append(WorkerProcess(redis_url, env=SWEPT))
        wait_ready(*workers)
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]

    assert result.status == "succeeded", result.error
    assert result.text == "hello"
    assert [e.step for e in events if e.type == "start-step"] == [0]
    assert [e.type for e in events].count("finish") == 1


async def test_a_lost_tool_call_job_is_driven_again_and_results_once(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    # One job at a time: the worker holds `a` while `b`'s job is lost behind its back.
    workers.append(
        WorkerProcess(redis_url, "--tools", TOOLS, env={**SWEPT, "AGENTQ_CONCURRENCY": "1"})
    )
    wait_ready(*workers)
    started, gate = tmp_path / "started", tmp_path / "gate"
    spec = scripted(
        {
            "tool_calls": [
                {
                    "name": "hold_until",
                    "input": {"started": str(started), "gate": str(gate)},
                    "id": "a",
                },
                {"name": "add", "input": {"a": 2, "b": 3}, "id": "b"},
            ]
        },
        {"text": "done"},
        tools=["hold_until", "add"],
        tool_timeout_s=60,
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        await eventually_async(started.exists, "call a to start")
        await _lose(client, keys.tool_job_id(run_id, 0, "b"), "tools")
        gate.touch()
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]

    assert result.status == "succeeded", result.error
    assert result.text == "done"
    assert [r.output for r in result.steps[0].tool_results] == ["released", 5.0]
    results = [e.model_dump()["tool_call_id"] for e in events if e.type == "tool-result"]
    assert sorted(results) == ["a", "b"]
    assert [e.step for e in events if e.type == "start-step"] == [0, 1]


async def test_a_lost_call_job_without_a_run_is_driven_again_and_results_once(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    env = {**SWEPT, "AGENTQ_CONCURRENCY": "1"}
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env=env))
    wait_ready(*workers)
    started, gate = tmp_path / "started", tmp_path / "gate"
    async with Client(redis_url) as client:
        holder = await client.calls.start(
            "hold_until", {"started": str(started), "gate": str(gate)}
        )
        await eventually_async(started.exists, "the first call to start")
        lost = await client.calls.start("add", {"a": 2, "b": 3})
        await _lose(client, keys.call_job_id(lost.call_id), "tools")
        gate.touch()
        result = await client.calls.wait(lost.call_id, timeout_s=60)
        held = await client.calls.wait(holder.call_id, timeout_s=60)
        events = [e async for e in client.calls.events(lost.call_id, follow=False)]

    assert held is not None
    assert held.output == "released"
    assert result is not None
    assert result.output == 5.0, result
    assert [e.type for e in events].count("tool-result") == 1


async def test_a_parked_runs_lost_deadline_is_driven_again(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(redis_url, env=SWEPT)
    workers.append(worker)
    wait_ready(*workers)
    ask = {"type": "client", "name": "ask_user", "park_timeout_s": 5}
    spec = scripted(
        {"tool_calls": [{"name": "ask_user", "input": {}, "id": "c1"}]},
        {"text": "gave up asking"},
        tools=[ask],
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        await eventually_async(lambda: _status_is(client, run_id, "awaiting"), "the call to park")
        # Held still while its deadline is lost, so the worker cannot take it first.
        worker.pause()
        await _lose(client, keys.expiry_job_id(run_id, 0, "c1"), "model")
        worker.resume()
        result = await client.runs.wait(run_id, timeout_s=60)

    assert result.status == "succeeded", result.error
    assert result.text == "gave up asking"
    (expired,) = result.steps[0].tool_results
    assert expired.is_error


async def test_an_endeds_lost_answer_is_driven_again(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    # The child ends on its tool's result (a tools-only worker records it) while no
    # worker serves the model queue: its end's job to the parent waits there, and is lost.
    model_worker = WorkerProcess(redis_url, "--queue", "model", env=SWEPT)
    tool_worker = WorkerProcess(redis_url, "--tools", TOOLS, "--queue", "tools", env=SWEPT)
    workers += [model_worker, tool_worker]
    wait_ready(*workers)
    started, gate = tmp_path / "started", tmp_path / "gate"
    hold = {"name": "hold_until", "input": {"started": str(started), "gate": str(gate)}}
    child = scripted(
        {"tool_calls": [{**hold, "id": "h"}]},
        tools=["hold_until"],
        stop_when=[{"has_tool_call": "hold_until"}],
        tool_timeout_s=60,
    )
    helper = {"type": "agent", "name": "helper", "spec": child}
    spec = scripted(
        {"tool_calls": [{"name": "helper", "input": {"prompt": "hold"}, "id": "a1"}]},
        {"text": "done"},
        tools=[helper],
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        await eventually_async(started.exists, "the child's tool to start")
        model_worker.stop()
        gate.touch()
        child_id = child_run_id(run_id, 0, "a1")
        ended = await client.runs.wait(child_id, timeout_s=60)
        assert ended.status == "succeeded", ended.error
        await _lose(client, keys.parent_job_id(child_id), "model")
        workers.append(WorkerProcess(redis_url, "--queue", "model", env=SWEPT))
        wait_ready(workers[-1])
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]

    assert result.status == "succeeded", result.error
    assert result.text == "done"
    (answer,) = result.steps[0].tool_results
    assert not answer.is_error
    assert [e.type for e in events].count("tool-result") == 1


async def _status_is(client: Client, run_id: str, status: str) -> bool:
    return (await client.runs.status(run_id)).status == status


ADDER = {
    "type": "workflow",
    "name": "adder",
    "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}},
    "graph": {
        "nodes": [
            {"id": "in", "kind": "input"},
            {
                "id": "sum",
                "kind": "tool",
                "tool": {"type": "function", "name": "add"},
                "input": {"a": "{{in.x}}", "b": 1},
            },
            {"id": "out", "kind": "output", "value": "{{sum}}"},
        ],
        "edges": [["in", "sum"], ["sum", "out"]],
    },
}


async def test_a_lost_workflow_node_job_is_driven_again(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    # The workflow starts on the model queue; its tool node waits on the tools queue, whose
    # one worker died (its tools still announced), and is lost there.
    tool_worker = WorkerProcess(redis_url, "--tools", TOOLS, "--queue", "tools")
    workers += [WorkerProcess(redis_url, "--queue", "model", env=SWEPT), tool_worker]
    wait_ready(*workers)
    tool_worker.kill()
    spec = scripted(
        {"tool_calls": [{"name": "adder", "input": {"x": 2}, "id": "w1"}]},
        {"text": "done"},
        tools=[ADDER],
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        node_job = keys.node_job_id(run_id, 0, "w1", "sum")

        async def node_queued() -> int:
            return int(await client.redis.exists(keys.arq_job(node_job)))

        await eventually_async(node_queued, "the workflow's node job to be queued")
        await _lose(client, node_job, "tools")
        # Only once a sweeper has looked at the run (rescored it) does a worker serve the
        # tools queue again: the node job it runs is the one the sweeper enqueued again.
        index = keys.moving_runs(keys.partition_of(run_id))
        lost_at: float | None = await client.redis.zscore(index, run_id)

        async def looked_at() -> bool:
            score: float | None = await client.redis.zscore(index, run_id)
            return score != lost_at

        await eventually_async(looked_at, "a sweeper to look at the run")
        workers.append(WorkerProcess(redis_url, "--tools", TOOLS, "--queue", "tools"))
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]

    assert result.status == "succeeded", result.error
    (answer,) = result.steps[0].tool_results
    assert (answer.output, answer.is_error) == (3.0, False)
    done = [e.model_dump()["output"] for e in events if e.type == "tool-progress"]
    assert [p["node"] for p in done if p.get("status") == "done"] == ["in", "sum", "out"]
