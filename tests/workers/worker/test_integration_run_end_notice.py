"""A run's end reaches only the worker processes holding something of the run (issue
31): two worker runtimes on a real redis-server, their subscriptions read from Redis
(`PUBSUB CHANNELS`, `PUBSUB NUMSUB`, `CLIENT LIST`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.keys import run_ended_channel
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

_started: asyncio.Event
_cancelled: asyncio.Event


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
async def wait_here() -> str:
    """Wait until cancelled."""
    _started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _cancelled.set()
        raise
    return "never"


class KeepingExecutor(FunctionExecutor):
    """A function executor that keeps something for each run (as the sandbox does)."""

    keeps_runs = True

    def __init__(self) -> None:
        super().__init__([add])
        self.released: asyncio.Queue[str] = asyncio.Queue()

    async def release_run(self, run_id: str) -> None:
        self.released.put_nowait(run_id)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def _listeners(redis: Redis) -> list[bytes]:
    """Every client's subscriptions to anything: `sub=` and `psub=` of CLIENT LIST."""
    clients = await redis.client_list()
    return [c["name"] or c["id"] for c in clients if c["sub"] != "0" or c["psub"] != "0"]


async def test_a_run_end_reaches_no_process_holding_nothing_of_the_run(
    redis_url: str, redis: Redis
) -> None:
    runtimes = [WorkerRuntime(redis_url, executors=[FunctionExecutor([add])]) for _ in range(2)]
    for runtime in runtimes:
        await runtime.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
            ids = [await client.runs.submit(spec) for _ in range(10)]
            for run_id in ids:
                result = await client.runs.wait(run_id, timeout_s=60)
                assert result.status == "succeeded", result.error
        # Their jobs were short and their executors keep nothing: no process listens for
        # any run's end (each listened to every run's end before, `aq:run-ended`).
        assert await redis.pubsub_channels() == []
        assert await _listeners(redis) == []
    finally:
        for runtime in runtimes:
            await runtime.stop()


async def test_a_long_jobs_process_hears_its_runs_end_and_aborts_it(
    redis_url: str, redis: Redis
) -> None:
    global _started, _cancelled
    _started, _cancelled = asyncio.Event(), asyncio.Event()
    holder = WorkerRuntime(redis_url, executors=[FunctionExecutor([wait_here])])
    other = WorkerRuntime(redis_url, executors=[FunctionExecutor([add])])
    await holder.start()
    await other.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(calls(("wait_here", {})), {"text": "done"}, tools=["wait_here"])
            run_id = await client.runs.submit(spec)
            await asyncio.wait_for(_started.wait(), 60)
            channel = run_ended_channel(run_id)
            # Past its notice delay, the job's process (one of the two) listens.
            subscribers = await eventually_async(
                lambda: redis.pubsub_numsub(channel),
                "the long job's process to listen",
                until=lambda counts: counts[0][1] == 1,
            )
            assert subscribers == [(channel.encode(), 1)]
            await client.runs.cancel(run_id)
            await asyncio.wait_for(_cancelled.wait(), 60)
        # The job ended: nobody listens any more.
        await eventually_async(
            lambda: redis.pubsub_channels(), "the listener to let go", until=lambda c: c == []
        )
    finally:
        await holder.stop()
        await other.stop()


async def test_a_process_whose_executor_keeps_a_run_hears_its_end(
    redis_url: str, redis: Redis
) -> None:
    keeping = KeepingExecutor()
    keeper = WorkerRuntime(redis_url, executors=[keeping])
    await keeper.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(
                calls(("add", {"a": 1, "b": 2})),
                calls(("add", {"a": 3, "b": 4})),
                {"text": "done"},
                tools=["add"],
            )
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            assert result.status == "succeeded", result.error
        assert await asyncio.wait_for(keeping.released.get(), 60) == run_id
        # Its end was heard: the process stops listening for it.
        await eventually_async(
            lambda: redis.pubsub_channels(), "the keeper to let go", until=lambda c: c == []
        )
    finally:
        await keeper.stop()
