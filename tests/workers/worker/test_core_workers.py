"""The loop across real worker processes on a real redis-server."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


async def test_parallel_calls_across_two_worker_processes(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    calls = [{"name": "add", "input": {"a": i, "b": 1}} for i in range(8)]
    spec = scripted({"tool_calls": calls}, {"text": "done"}, tools=["add"])
    async with Client(redis_url) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
    assert result.status == "succeeded", result.error
    assert [r.output for r in result.steps[0].tool_results] == [float(i + 1) for i in range(8)]
    assert result.text == "done"


async def test_worker_killed_mid_call_costs_a_redelivery_not_the_run(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    marker = tmp_path / "marker"
    spec = scripted(
        {
            "tool_calls": [
                {"name": "mark_and_sleep", "input": {"marker": str(marker), "seconds": 2}}
            ]
        },
        {"text": "survived"},
        tools=["mark_and_sleep"],
        tool_timeout_s=30,
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        started = await eventually_async(
            lambda: marker.read_text().split() if marker.exists() else [], "the call to start"
        )
        first_pid = int(started[0])
        victim = next(w for w in workers if w.pid == first_pid)
        victim.kill()
        result = await client.runs.wait(run_id, timeout_s=60)
        events = [e async for e in client.runs.events(run_id)]

    assert result.status == "succeeded", result.error
    assert result.text == "survived"
    pids = [int(p) for p in marker.read_text().split()]
    assert len(pids) == 2, pids
    assert pids[0] != pids[1]
    assert result.steps[0].tool_results[0].output == {"pid": pids[1]}
    results = [e for e in events if e.type in ("tool-result", "tool-error")]
    assert len(results) == 1
    attempts = [e.model_dump().get("attempt") for e in events if e.type == "tool-running"]
    assert attempts == [1, 2]
    assert [e.step for e in events if e.type == "start-step"] == [0, 1]


async def test_a_call_that_kills_every_worker_becomes_a_tool_error(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    env = {"AGENTQ_MAX_DELIVERIES": "2"}
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=env) for _ in range(3)]
    wait_ready(*workers)
    spec = scripted(
        {"tool_calls": [{"name": "die", "input": {}}]}, {"text": "moved on"}, tools=["die"]
    )
    async with Client(redis_url) as client:
        result = await client.runs.wait(await client.runs.submit(spec), timeout_s=90)
    assert result.status == "succeeded", result.error
    (outcome,) = result.steps[0].tool_results
    assert outcome.is_error
    assert "attempted 2 times" in outcome.output
    assert sum(w.proc.poll() is not None for w in workers) == 2


async def test_an_idle_worker_reports_no_redis_outage(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Silence on its subscriptions (no run ends) is not a dead Redis: across more than
    one socket timeout of idling, an idle worker logs no outage and no reconnection."""
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([])])
    socket_timeout_s = max(runtime.settings.redis_socket_timeout_s, MAX_BLOCK_S + 2.0)
    caplog.set_level(logging.INFO, logger="agentq")
    await runtime.start()
    try:
        # Nothing to wait for: the claim is that nothing happens in this window.
        await asyncio.sleep(socket_timeout_s + 2.0)
    finally:
        await runtime.stop()
    outages = [r.getMessage() for r in caplog.records if "redis" in r.getMessage().lower()]
    assert not [m for m in outages if "unavailable" in m or "is back" in m], outages
