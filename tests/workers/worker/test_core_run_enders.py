"""A run's end notice, heard by the process whose job ended the run, looks up the abort
marks of the run's other jobs here, never of that job (issue 31: a round trip a run)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentq.orchestrator.core import keys
from agentq.orchestrator.runs.state import Outcome, Reply
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.worker.runtime import WorkerRuntime

pytestmark = pytest.mark.unit

RUN = "r_enders"


class HoldingWorker:
    """The queue worker's part `_abort_now` reads: the jobs running here, by id."""

    def __init__(self) -> None:
        self.job_tasks: dict[str, asyncio.Task[Any]] = {}
        self.looked_up = 0

    async def _cancel_aborted_jobs(self) -> None:
        self.looked_up += 1


def _holding(runtime: WorkerRuntime, jobs: dict[str, asyncio.Task[Any]]) -> HoldingWorker:
    worker = HoldingWorker()
    worker.job_tasks.update(jobs)
    runtime._workers = [worker]  # type: ignore[list-item]
    return worker


async def _a_task() -> asyncio.Task[None]:
    return asyncio.create_task(asyncio.sleep(0))


class Ender:
    """A job whose transition ends the run, still held here while the notice comes."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.ended, self.heard = asyncio.Event(), asyncio.Event()
        self.runtime = runtime
        self.task = asyncio.create_task(self._job())

    async def _job(self) -> None:
        self.runtime._ended_by_a_job(RUN)  # as RunStore.ended_here tells it, in its task
        self.ended.set()
        await self.heard.wait()

    async def done(self) -> None:
        self.heard.set()
        await self.task


async def test_the_job_that_ended_its_run_is_not_looked_up() -> None:
    runtime = WorkerRuntime("redis://unused")
    ender = Ender(runtime)
    worker = _holding(runtime, {keys.model_job_id(RUN, 1): ender.task})
    await ender.ended.wait()
    await runtime._abort_now(RUN)
    await ender.done()
    assert worker.looked_up == 0
    assert RUN not in runtime._enders  # the notice took it


async def test_the_runs_other_jobs_here_are_still_looked_up() -> None:
    runtime = WorkerRuntime("redis://unused")
    ender, other = Ender(runtime), await _a_task()
    worker = _holding(
        runtime,
        {keys.model_job_id(RUN, 1): ender.task, keys.tool_job_id(RUN, 1, "c1"): other},
    )
    await ender.ended.wait()
    await runtime._abort_now(RUN)
    await ender.done()
    await other
    assert worker.looked_up == 1


async def test_a_run_not_ended_here_is_looked_up() -> None:
    runtime = WorkerRuntime("redis://unused")
    job = await _a_task()
    worker = _holding(runtime, {keys.model_job_id(RUN, 1): job})
    await runtime._abort_now(RUN)  # cancelled by a client: its job here must stop
    assert worker.looked_up == 1
    await job


async def test_the_enders_kept_are_bounded() -> None:
    runtime = WorkerRuntime("redis://unused")

    async def end(run_id: str) -> None:
        runtime._ended_by_a_job(run_id)

    for i in range(1100):
        await end(f"r{i}")  # the test's own task is current: each is recorded
    assert len(runtime._enders) <= 1024
    assert "r1099" in runtime._enders
    assert "r0" not in runtime._enders


async def test_the_store_tells_which_transitions_ended_their_run() -> None:
    told: list[str] = []
    store = RunStore.__new__(RunStore)
    store.ended_here = [told.append]
    outcomes = iter([Outcome.COMMITTED, Outcome.FINISHED, Outcome.FAILED, Outcome.STALE])

    async def send(*args: Any, **kwargs: Any) -> Reply:
        return Reply(outcome=next(outcomes))

    store._send = send  # type: ignore[method-assign,assignment]

    class Ending:
        script = "commit_step"
        run_id = RUN

    for _ in range(4):
        await store._apply(Ending(), Reply)  # type: ignore[arg-type]
    assert told == [RUN, RUN]  # FINISHED and FAILED, nothing else
