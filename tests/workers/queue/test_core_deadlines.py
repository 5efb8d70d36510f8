"""A worker's running jobs' deadlines on one event-loop timer (workers/queue/deadlines.py):
each job is cancelled once its own deadline passes, never after it ended, and the loop's
heap holds one timer for them all, not one per job."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentq.workers.queue.deadlines import Deadlines

pytestmark = pytest.mark.unit


async def _forever() -> None:
    await asyncio.Event().wait()


def _job() -> asyncio.Task[None]:
    return asyncio.create_task(_forever())


async def _stop(*tasks: asyncio.Task[Any]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _timers(loop: asyncio.AbstractEventLoop) -> int:
    """The event loop's timer handles, cancelled ones included (CPython's heap)."""
    return len(loop._scheduled)  # type: ignore[attr-defined]


async def test_only_the_job_whose_deadline_passed_is_cancelled() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    brief, long = _job(), _job()
    passed = deadlines.add(brief, 0.02)
    kept = deadlines.add(long, 60)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(brief, 5)
    assert passed.expired
    assert not kept.expired
    assert not long.done()
    assert len(deadlines) == 1  # the long one, still waited for
    await _stop(long)


async def test_a_nearer_deadline_added_later_still_passes_on_time() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    long, brief = _job(), _job()
    deadlines.add(long, 60)
    passed = deadlines.add(brief, 0.02)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(brief, 5)
    assert passed.expired
    assert not long.done()
    await _stop(long)


async def test_a_job_that_ended_is_never_cancelled_by_its_deadline() -> None:
    deadlines = Deadlines(asyncio.get_running_loop())
    ended, later = _job(), _job()
    gone = deadlines.add(ended, 0.02)
    deadlines.remove(gone)
    passed = deadlines.add(later, 0.05)  # the timer fires first for the ended one's time
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(later, 5)
    assert passed.expired
    assert not gone.expired
    assert not ended.done()
    assert len(deadlines) == 0
    await _stop(ended)


async def test_many_jobs_leave_one_timer_on_the_loop() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop)
    before = _timers(loop)
    task = _job()
    for _ in range(500):  # jobs of the same timeout, each ended before the next
        deadlines.remove(deadlines.add(task, 3600))
    assert _timers(loop) <= before + 1
    await _stop(task)
