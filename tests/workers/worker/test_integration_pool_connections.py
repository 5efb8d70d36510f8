"""A worker's pool makes no connection while it runs jobs (issue 31): it opens as many
as its tasks can use at once when it starts, on a real redis-server."""

from __future__ import annotations

import asyncio

import pytest

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def _connections(runtime: WorkerRuntime) -> int:
    """Connections its pool has made (redis-py keeps them, free or in use, until closed)."""
    pool = runtime.redis.connection_pool  # type: ignore[union-attr]
    return len(pool._available_connections) + len(pool._in_use_connections)


async def test_a_burst_of_runs_makes_no_new_connection(redis_url: str) -> None:
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([add])])
    await runtime.start()
    try:
        opened = _connections(runtime)
        async with Client(redis_url) as client:
            spec = scripted(
                calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
                {"text": "done"},
                tools=["add"],
            )
            ids = await asyncio.gather(*(client.runs.submit(spec) for _ in range(60)))
            for run_id in ids:
                result = await client.runs.wait(run_id, timeout_s=120)
                assert result.status == "succeeded", result.error
        # Every job slot's, every loop's: none made during the burst.
        assert _connections(runtime) == opened
    finally:
        await runtime.stop()
