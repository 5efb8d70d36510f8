"""Issue 25 item 10, against real redis-servers and worker processes: a full Redis costs
a worker's log one line per outage (not one per refused write), and a worker started
while Redis is down waits for it, then serves."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from agentq.orchestrator.client import Client
from agentq.orchestrator.fleet import layout_guard, listings
from agentq.workers.queue.liveness import OUTAGE
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, free_port, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually, eventually_async

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
    # The outage's own lines: one as it begins, one as it ends. A loaded host can take
    # longer than the lease (a second) to see the refusals this test waits for; the
    # lease's lapse is then a line of its own, a different event (its jobs run again),
    # logged once, not once per refused renewal.
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    outage = [line for line in warnings if "lease could not be renewed" not in line]
    assert len(outage) == 2, log
    assert "redis unavailable (OutOfMemoryError" in outage[0]
    assert "redis is back" in outage[1]
    assert len(warnings) - len(outage) <= 1, log


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


async def test_a_lease_slower_than_its_timeout_is_waited_for_not_fatal(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The lease's client gives up after a fifth of a lease (0.2 s), so that a renewal
    fails in time; a Redis slow to take the first lease (an fsync on every write on a
    loaded host) is ridden out as an outage, where the worker used to exit at start."""
    admin = redis.asyncio.Redis.from_url(own_redis.url)

    join = layout_guard.join

    async def then_writes_held(client: Any, layout: int) -> None:
        await join(client, layout)  # the last write before the lease's
        # Every write waits for a second from here (reads go on): the lease's next.
        await admin.execute_command("CLIENT", "PAUSE", "1000", "WRITE")

    monkeypatch.setattr(layout_guard, "join", then_writes_held)
    caplog.set_level(logging.WARNING, logger="agentq")
    runtime = WorkerRuntime(own_redis.url, executors=[FunctionExecutor([])], wait_for_redis=True)
    await runtime.start()
    try:
        assert runtime.announced
    finally:
        await runtime.stop()
        await admin.aclose()
    messages = [r.getMessage() for r in caplog.records]
    assert any("redis unavailable (TimeoutError" in m for m in messages), messages


async def test_reads_between_refused_beats_do_not_end_a_full_redis_s_outage(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An idle worker whose lease renews seldom writes only at its beat. Its claims' reads
    pass on a full Redis; one that came quiet_s after a refused beat used to end the
    outage, whose end rewrote the record at once, refused: two lines a beat, all along.
    The beat and the outage's quiet are shortened so that many beats pass in a second."""
    monkeypatch.setattr(listings, "BEAT_EVERY_S", 0.1)
    monkeypatch.setattr(OUTAGE, "quiet_s", 0.02)
    caplog.set_level(logging.WARNING, logger="agentq")
    admin = redis.Redis.from_url(own_redis.url)
    runtime = WorkerRuntime(own_redis.url, executors=[FunctionExecutor([])], wait_for_redis=True)
    await runtime.start()
    try:
        admin.config_set("maxmemory", "1")
        await eventually_async(
            lambda: refused_for_memory(admin),
            "sixty refused writes",
            timeout_s=120,
            until=lambda n: n >= 60,
        )
        while_full = [r.getMessage() for r in caplog.records]
        admin.config_set("maxmemory", "0")
        await eventually_async(
            lambda: any("redis is back" in r.getMessage() for r in caplog.records),
            "the outage's end",
            timeout_s=60,
        )
    finally:
        await runtime.stop()
        OUTAGE.forget()
    assert [m for m in while_full if "redis" in m] == [while_full[0]], while_full
    assert "redis unavailable (InfrastructureError: Redis: OutOfMemoryError" in while_full[0]
    assert "aq:registry (command 1 of a pipeline)" in while_full[0]  # not the tools' schemas
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "redis is back" in m]) == 1, messages
