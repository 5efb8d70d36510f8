"""Issue 25 item 10, against real redis-servers and worker processes: a full Redis costs
a worker's log one line per outage (not one per refused write), and a worker started
while Redis is down waits for it, then serves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from agentq.orchestrator.client import Client
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, free_port, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

# The worker's retries a test lets a full Redis refuse: before, each cost two log lines.
REFUSALS = 10


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def refused_for_memory(admin: redis.Redis) -> int:
    stats: dict[str, Any] = admin.info("errorstats")  # type: ignore[assignment]
    count: int = stats.get("errorstat_OOM", {}).get("count", 0)
    return count


async def test_a_full_redis_costs_the_log_one_line_per_outage(
    own_redis: RedisServer, workers: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(own_redis.url, "--tools", TOOLS)
    workers.append(worker)
    wait_ready(worker)
    admin = redis.Redis.from_url(own_redis.url)
    admin.config_set("maxmemory", "1")  # every write is refused from now on
    eventually(
        lambda: refused_for_memory(admin),
        f"the worker's writes to be refused {REFUSALS} times",
        timeout_s=120,
        until=lambda n: n >= REFUSALS,
    )
    admin.config_set("maxmemory", "0")
    eventually(lambda: "redis is back" in worker.log(), "the outage's end", timeout_s=60)
    async with Client(own_redis.url) as client:
        result = await client.runs.wait(
            await client.runs.submit(scripted({"text": "after"}, tools=[])), timeout_s=60
        )
    assert result.status == "succeeded", result.error
    log = worker.log()
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert len(warnings) == 2, log
    assert "redis unavailable (OutOfMemoryError" in warnings[0]
    assert "redis is back" in warnings[1]


async def test_a_worker_started_while_redis_is_down_waits_and_serves(
    workers: list[WorkerProcess],
) -> None:
    port = free_port()
    worker = WorkerProcess(f"redis://127.0.0.1:{port}/0", "--tools", TOOLS)
    workers.append(worker)
    eventually(lambda: "redis unavailable" in worker.log(), "the worker to find Redis down")
    assert worker.proc.poll() is None, worker.log()
    server = RedisServer(port=port)
    try:
        wait_ready(worker, timeout_s=60)
        async with Client(server.url) as client:
            result = await client.runs.wait(
                await client.runs.submit(scripted({"text": "served"}, tools=[])), timeout_s=60
            )
        assert result.status == "succeeded", result.error
        assert result.text == "served"
    finally:
        server.stop()
    assert worker.log().count("redis unavailable") == 1, worker.log()
