"""A run's end reaches only the worker processes holding its jobs, and still at once
(issue 31): worker runtimes on a real redis-server; who heard what is read from Redis (a
pattern subscriber sees every notice, `PUBSUB NUMSUB` says how many processes each
reached)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.core.settings import Settings
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted

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


@pytest.fixture
async def spy(redis: Redis) -> AsyncIterator[PubSub]:
    """Every run-end notice, on any channel (a pattern: not counted by NUMSUB)."""
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.psubscribe(keys.RUN_ENDED + "*")
    yield pubsub
    await pubsub.aclose()  # type: ignore[no-untyped-call]


async def _notices(spy: PubSub, runs: Sequence[str]) -> list[tuple[str, str]]:
    """(channel, run id) of every notice, read until each run's end was told."""
    seen: list[tuple[str, str]] = []
    while not set(runs) <= {run for _, run in seen}:
        message = await asyncio.wait_for(spy.get_message(timeout=1.0), 60)
        if message is not None:
            seen.append((message["channel"].decode(), message["data"].decode()))
    return seen


async def _reached(redis: Redis, notices: list[tuple[str, str]]) -> dict[str, int]:
    """Run id -> how many processes its end reached (the subscribers of each channel
    it was told on)."""
    channels = sorted({channel for channel, _ in notices})
    subscribers = dict(await redis.pubsub_numsub(*channels))
    reached: dict[str, int] = {}
    for channel, run_id in notices:
        reached[run_id] = reached.get(run_id, 0) + subscribers[channel.encode()]
    return reached


async def test_a_run_end_reaches_only_the_process_holding_its_job(
    redis_url: str, redis: Redis, spy: PubSub
) -> None:
    runtimes = [WorkerRuntime(redis_url, executors=[FunctionExecutor([add])]) for _ in range(3)]
    for runtime in runtimes:
        await runtime.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
            ids = [await client.runs.submit(spec) for _ in range(10)]
            for run_id in ids:
                result = await client.runs.wait(run_id, timeout_s=60)
                assert result.status == "succeeded", result.error
        reached = await _reached(redis, await _notices(spy, ids))
        # Each end reached the one process running the run's last step, not the fleet
        # (every process heard every run's end before: 3 each).
        assert reached == dict.fromkeys(ids, 1)
        assert [count for _, count in await redis.pubsub_numsub(keys.RUN_ENDED)] == [0]
        assert sum(runtime._run_ends.notices for runtime in runtimes if runtime._run_ends) == 10
    finally:
        for runtime in runtimes:
            await runtime.stop()


async def test_a_cancel_reaches_the_jobs_process_at_once(
    redis_url: str, redis: Redis, spy: PubSub
) -> None:
    global _started, _cancelled
    _started, _cancelled = asyncio.Event(), asyncio.Event()
    # A fallback poll far past the test's wait: only the notice can abort the job.
    slow_poll = Settings(idle_poll_s=3600)
    holder = WorkerRuntime(
        redis_url,
        executors=[FunctionExecutor([wait_here])],
        queues=[TOOLS_QUEUE],
        settings=slow_poll,
    )
    others = [
        WorkerRuntime(redis_url, executors=[FunctionExecutor([add])], settings=slow_poll)
        for _ in range(2)
    ]
    await holder.start()
    for other in others:
        await other.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(calls(("wait_here", {})), {"text": "done"}, tools=["wait_here"])
            run_id = await client.runs.submit(spec)
            await asyncio.wait_for(_started.wait(), 60)
            await client.runs.cancel(run_id)
            await asyncio.wait_for(_cancelled.wait(), 60)
        notices = await _notices(spy, [run_id])
        assert await _reached(redis, notices) == {run_id: 1}
        assert (keys.run_ended_to(holder.worker_id), run_id) in notices
    finally:
        await holder.stop()
        for other in others:
            await other.stop()


async def test_a_process_whose_executor_keeps_runs_hears_every_end(redis_url: str) -> None:
    keeping = KeepingExecutor()
    # The keeper runs the calls only: each run ends on the other process's model step.
    keeper = WorkerRuntime(redis_url, executors=[keeping], queues=[TOOLS_QUEUE])
    model = WorkerRuntime(redis_url, queues=[MODEL_QUEUE])
    await keeper.start()
    await model.start()
    try:
        async with Client(redis_url) as client:
            spec = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            assert result.status == "succeeded", result.error
        assert await asyncio.wait_for(keeping.released.get(), 60) == run_id
    finally:
        await keeper.stop()
        await model.stop()
