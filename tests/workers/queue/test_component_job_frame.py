"""A job runs in its worker task (`WakeableWorker._execute`): its deadline, its run's
cancel and a release each end it as they did when it ran in a task of its own, on a real
redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from arq.jobs import serialize_job
from arq.worker import func
from redis.asyncio import Redis

from agentq.workers.queue.arq_worker import WakeableWorker
from agentq.workers.queue.claims import Claimed

pytestmark = pytest.mark.component


async def _forever(ctx: dict[str, Any]) -> None:
    ctx["started"].set()
    await asyncio.Event().wait()


@pytest.fixture
async def worker(redis_url: str) -> AsyncIterator[WakeableWorker]:
    pool = Redis.from_url(redis_url)
    worker = WakeableWorker(
        functions=[func(_forever, name="forever"), func(_forever, name="brief", timeout=0.05)],
        redis_pool=pool,
        queue="frame",
        idle_poll_s=0.1,
        worker_id="w-frame",
    )
    try:
        yield worker
    finally:
        await pool.aclose()


def _running(worker: WakeableWorker, name: str) -> tuple[asyncio.Task[Any], asyncio.Event]:
    started = asyncio.Event()
    worker.ctx["started"] = started
    payload = serialize_job(name, (), {}, 1, 0)
    job = Claimed(job_id="j1", score=0, payload=payload, deliveries=1)
    end: Any = object()
    return asyncio.create_task(worker._execute(job, end)), started


async def _started(worker: WakeableWorker) -> asyncio.Task[Any]:
    """A job that runs until cancelled, started."""
    running, started = _running(worker, "forever")
    await started.wait()
    return running


async def _ends(worker: WakeableWorker, running: asyncio.Task[Any], how: str) -> None:
    """The job ends `how`, counted as failed ('done') or retried ('release'), and leaves."""
    assert await asyncio.wait_for(running, 5) == (how, 0)
    assert (worker.jobs_failed, worker.jobs_retried) == ((1, 0) if how == "done" else (0, 1))
    assert worker.job_tasks == {}


async def test_a_job_past_its_deadline_fails_done(worker: WakeableWorker) -> None:
    running, _ = _running(worker, "brief")
    await _ends(worker, running, "done")


async def test_a_cancelled_run_s_job_ends_done_and_its_task_goes_on(
    worker: WakeableWorker,
) -> None:
    running = await _started(worker)
    worker.job_tasks["j1"].cancel()  # as _cancel_aborted_jobs does
    worker.aborting_tasks.add("j1")
    await _ends(worker, running, "done")
    assert not running.cancelled()
    assert running.cancelling() == 0
    assert worker.aborting_tasks == set()


async def test_a_released_job_ends_release(worker: WakeableWorker) -> None:
    running = await _started(worker)
    assert worker.cancel_running() == 1  # a lost lease, a drain past its timeout
    await _ends(worker, running, "release")


async def test_a_task_cancelled_beside_its_job_s_cancel_stays_cancelled(
    worker: WakeableWorker,
) -> None:
    running = await _started(worker)
    worker.cancel_running()
    running.cancel()  # its worker stops it as well
    with pytest.raises(asyncio.CancelledError):
        await running
    assert worker.job_tasks == {}
