"""A job delivered again to the worker still unwinding its first run (its lease lapsed
under load): each run ends as itself, on a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from arq.jobs import serialize_job
from arq.worker import RetryJob, func
from redis.asyncio import Redis

from agentq.workers.queue.arq_worker import WakeableWorker
from agentq.workers.queue.claims import Claimed

pytestmark = pytest.mark.component


async def test_a_job_run_twice_at_once_here_ends_each_run_as_its_own(redis_url: str) -> None:
    first_may_end, second_may_end = asyncio.Event(), asyncio.Event()

    async def job(ctx: dict[str, Any]) -> None:
        if ctx["job_try"] == 1:
            await first_may_end.wait()
            return
        await second_may_end.wait()
        raise RetryJob()  # the second run asks to run again: its job must be released

    pool = Redis.from_url(redis_url)
    worker = WakeableWorker(
        functions=[func(job, name="job")],
        redis_pool=pool,
        queue="redelivered",
        idle_poll_s=0.1,
        worker_id="w-redelivered",
    )
    try:

        def delivery(n: int) -> Claimed:
            payload = serialize_job("job", (), {}, n, 0)
            return Claimed(job_id="j1", score=0, payload=payload, deliveries=n)

        end: Any = object()
        first = asyncio.create_task(worker._execute(delivery(1), end))
        await asyncio.sleep(0)
        second = asyncio.create_task(worker._execute(delivery(2), end))
        await asyncio.sleep(0)
        first_may_end.set()
        assert await first == ("done", 0)
        second_may_end.set()
        # On the old code the first run removed the second's entry, and the second's
        # end raised KeyError, which the worker ended as done: a lost retry.
        assert await second == ("release", 0)
        assert worker.job_tasks == {}
    finally:
        await pool.aclose()
