"""Which worker processes hear a run's end: those holding something of the run.

A run's end is published on the run's own channel (`keys.run_ended_channel`), and a
process listens on it only while it holds something the end must reach at once:

- a job of the run that has run here for `notice_after_s` (the fallback poll's period;
  looked at twice per period):
  if the run is cancelled or fails, the job is aborted at once rather than at the next
  poll. Within that time the poll finds an abort as soon, and a job busy on a loaded
  machine does not pay a subscription (measured: under a burst on four processes, about
  half the jobs outlasted a quarter of the poll);
- what its executors keep for the run between calls (sandbox sessions), from the
  run's first call here to its end.

So a run's end costs only the processes that hold something of it, not every process
of the fleet. A notice missed (while disconnected) is covered as before: aborts by the
fallback poll, and what executors keep by their own idle timeouts. After an outage the
process forgets what its executors keep (the run's next call here listens again).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from arq.typing import WorkerCoroutine
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from agentq.orchestrator.core.keys import job_prefix, run_ended_channel
from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.workers.queue.liveness import OUTAGE

# Runs an executor keeps something for, listened to at most: past this the longest idle
# run is left to the executors' idle timeouts (a run whose end was missed stays no longer).
MAX_KEPT_RUNS = 1024


@dataclass(eq=False, slots=True)
class _Running:
    """A job of a run running here."""

    run_id: str
    started: float  # monotonic
    held: bool = False


class RunEnds:
    """The run-end channels one process listens on, and what it does on an end."""

    def __init__(
        self,
        redis: Redis,
        *,
        ended: Callable[[str], Awaitable[None]],
        notice_after_s: float,
        retry_s: float,
    ) -> None:
        self._redis = redis
        self._ended = ended
        self.notice_after_s = notice_after_s
        self._retry_s = retry_s
        self._jobs: Counter[str] = Counter()  # runs with long jobs here: how many
        self._kept: OrderedDict[str, None] = OrderedDict()  # runs executors keep, oldest first
        self._pubsub: PubSub | None = None
        self._subscribed: set[str] = set()  # channels asked for on the current connection
        self._holding = asyncio.Event()  # something is held: the listener reads
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections = 0  # listening connections made so far
        self._running: set[_Running] = set()

    def held(self) -> set[str]:
        """The runs whose end this process listens for."""
        return set(self._jobs) | set(self._kept)

    def watch(self, job: WorkerCoroutine, *, keeps: bool) -> WorkerCoroutine:
        """`job`, listening on its run's channel once it has run `notice_after_s`
        (`hold_long_jobs` looks), and from its start to the run's end when `keeps` (its
        executors keep state)."""

        @functools.wraps(job)
        async def watched(ctx: dict[str, Any], payload: Any) -> Any:
            run_id = payload.get("run_id") if isinstance(payload, dict) else None
            # Only a run's own jobs (their ids carry its tag): those its end aborts.
            if not isinstance(run_id, str) or not str(ctx.get("job_id", "")).startswith(
                job_prefix(run_id)
            ):
                return await job(ctx, payload)
            if keeps:
                self._keep(run_id)
            # No timer per job: a timer's cost on every job was measured at a third of
            # one process's throughput; one look per period costs nothing per job.
            running = _Running(run_id, time.monotonic())
            self._running.add(running)
            try:
                return await job(ctx, payload)
            finally:
                self._running.discard(running)
                if running.held:
                    self._let_go_job(run_id)

        return watched

    async def hold_long_jobs(self) -> None:
        """Listen for the runs of jobs that have run `notice_after_s` (looked at twice
        per period, so within 1.5 periods)."""
        while True:
            await asyncio.sleep(self.notice_after_s / 2)
            due = time.monotonic() - self.notice_after_s
            for running in list(self._running):
                if not running.held and running.started <= due:
                    running.held = True
                    self._hold_job(running.run_id)

    # -- holding: counted at once, the channel asked for in a task ------------------

    def _hold_job(self, run_id: str) -> None:
        if not (run_id in self._jobs or run_id in self._kept):
            self._spawn(self._subscribe(run_id))
        self._jobs[run_id] += 1

    def _let_go_job(self, run_id: str) -> None:
        self._jobs[run_id] -= 1
        if self._jobs[run_id] <= 0:
            del self._jobs[run_id]
            if run_id not in self._kept:
                self._spawn(self._unlisten(run_id))

    def _keep(self, run_id: str) -> None:
        if run_id in self._kept:
            self._kept.move_to_end(run_id)
            return
        self._kept[run_id] = None
        if run_id not in self._jobs:
            self._spawn(self._subscribe(run_id))
        if len(self._kept) > MAX_KEPT_RUNS:
            oldest, _ = self._kept.popitem(last=False)
            if oldest not in self._jobs:
                self._spawn(self._unlisten(oldest))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _subscribe(self, run_id: str) -> None:
        pubsub = self._pubsub
        channel = run_ended_channel(run_id)
        if pubsub is not None and channel not in self._subscribed:
            self._subscribed.add(channel)
            try:
                await pubsub.subscribe(channel)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                # The listener asks again (and rides out the outage).
                self._subscribed.discard(channel)
        self._holding.set()

    async def _unlisten(self, run_id: str) -> None:
        pubsub = self._pubsub
        channel = run_ended_channel(run_id)
        if pubsub is None or channel not in self._subscribed:
            return
        self._subscribed.discard(channel)
        try:
            await pubsub.unsubscribe(channel)
        except Exception as exc:  # a new connection subscribes only what is held
            if not is_transient(exc):
                raise

    # -- listening ---------------------------------------------------------------

    async def run_forever(self) -> None:
        while True:
            try:
                async with self._redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    try:
                        await self._read(pubsub)
                    finally:  # no subscribe reaches a closed listener
                        self._pubsub = None
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await asyncio.sleep(max(OUTAGE.failed(exc), self._retry_s))

    async def _read(self, pubsub: PubSub) -> None:
        self._pubsub, self._subscribed = pubsub, set()
        self._connections += 1
        if self._connections > 1:
            # Ends missed while disconnected: the executors' idle timeouts drop what
            # they keep (the long jobs' aborts are the fallback poll's).
            self._kept.clear()
        while True:
            raise_if_cancel_requested()  # a cancel a timed read swallowed
            held = {run_ended_channel(run_id) for run_id in self.held()}
            if not held and not self._subscribed:
                self._holding.clear()
                await self._holding.wait()
                continue
            # Asked for while disconnected, or never connected (a subscribe that failed).
            missing = held if pubsub.connection is None else held - self._subscribed
            if missing:
                self._subscribed |= missing
                await pubsub.subscribe(*missing)
            # A read bounded below the socket timeout: silence is no dead Redis.
            message = await pubsub.get_message(timeout=MAX_BLOCK_S)
            OUTAGE.succeeded()
            if message is None:
                continue
            data = message["data"]
            run_id = data.decode() if isinstance(data, bytes) else str(data)
            if run_id in self._kept:
                del self._kept[run_id]
                if run_id not in self._jobs:
                    self._spawn(self._unlisten(run_id))
            await self._ended(run_id)
