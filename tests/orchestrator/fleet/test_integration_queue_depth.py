"""Queue depth means ready + running: a parked call's deadline is a timer kept apart from
the queue (in its timer set), and it goes when its run ends, so an idle pool reads 0
and KEDA can scale it to zero. Real worker processes on a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.fleet.queues import queue_stats
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

RUNS = 100


@pytest.fixture
def workers(redis_url: str) -> Iterator[list[WorkerProcess]]:
    started = [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*started)
    yield started
    for worker in started:
        worker.stop()


def approval_spec(park_timeout_s: float | None = None) -> dict[str, object]:
    tool: dict[str, object] = {"type": "function", "name": "add", "needs_approval": True}
    if park_timeout_s is not None:
        tool["park_timeout_s"] = park_timeout_s
    step = {"tool_calls": [{"name": "add", "input": {"a": 1, "b": 2}, "id": "c1"}]}
    return scripted(step, {"text": "done"}, tools=[tool])


async def test_ended_parked_runs_leave_every_queue_at_depth_zero(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    async with Client(redis_url) as client:
        runs = [await client.runs.submit(approval_spec()) for _ in range(RUNS)]

        async def parked() -> bool:
            heads = await asyncio.gather(*(client.runs.status(r) for r in runs))
            return all(h.status == "awaiting" for h in heads)

        await eventually_async(parked, f"{RUNS} runs to park", timeout_s=120)
        waiting = (await queue_stats(client.redis, [MODEL_QUEUE]))[MODEL_QUEUE]
        # Parked: nothing to do for any pool; each call's deadline is a timer.
        assert (waiting.depth, waiting.scheduled) == (0, RUNS)

        # Half are approved (they run on and finish), half cancelled.
        for run in runs[: RUNS // 2]:
            await client.runs.approve(run, "c1")
        for run in runs[RUNS // 2 :]:
            await client.runs.cancel(run)
        results = await asyncio.gather(*(client.runs.wait(r, timeout_s=120) for r in runs))
        assert sorted({r.status for r in results}) == ["cancelled", "succeeded"]

        async def drained() -> dict[str, tuple[int, int, int]]:
            stats = await queue_stats(client.redis, [MODEL_QUEUE, TOOLS_QUEUE])
            return {q: (s.depth, s.running, s.scheduled) for q, s in stats.items()}

        # The last jobs' ends are the workers' to write: wait for them, then all is 0.
        idle = {MODEL_QUEUE: (0, 0, 0), TOOLS_QUEUE: (0, 0, 0)}
        assert await eventually_async(drained, "every queue idle", until=lambda d: d == idle)
    raw = redis.Redis.from_url(redis_url)
    assert raw.zcard(keys.queue(MODEL_QUEUE)) == 0
    assert raw.zcard(keys.timers(MODEL_QUEUE)) == 0
    assert raw.keys("arq:job:*expire*") == []


async def test_a_deadline_falls_due_through_the_claim(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    async with Client(redis_url) as client:
        run = await client.runs.submit(approval_spec(park_timeout_s=0.5))
        result = await client.runs.wait(run, timeout_s=60)
    assert result.status == "succeeded", result.error
    [outcome] = result.steps[0].tool_results
    assert outcome.is_error
    assert "was not approved within 0.5 s" in str(outcome.output)
