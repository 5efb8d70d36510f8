"""A worker process: one arq worker per queue, woken by Redis instead of polling.

arq polls its queue every `poll_delay` (0.5 s by default), which would put half
a second into every hop, and spends several round trips per job on its own
bookkeeping. Here each enqueue also pushes a token onto the queue's wake-up list;
a worker with free slots waits on that list with BLPOP and, in the same round trip,
claims up to its free slots with one Lua call (`claims.TAKE`), whose reply carries
each job's payload and delivery count. A job's end rides in the round trip of its
last run transition, with the claim of the next jobs. The wait times out after
`idle_poll_s` as the fallback poll (deferred jobs falling due), so an idle worker
sleeps.

Jobs are leased to the worker process (see `liveness`): a claimed job's
in-progress key names the worker, and a job ends in one of two ways. Done
(whatever its outcome), or released by a live worker (it drains, its lease
lapsed, Redis failed around the job, it lacks the job's tool): a release hands
the job back at once and takes back the delivery arq counted, so only deaths
count toward AGENTQ_MAX_DELIVERIES.

Redis outages and a full Redis are ridden out: the loops back off (one log line
per outage), claiming resumes when Redis answers, and no transient Redis error
becomes a failed run.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

import httpx
from arq import Retry, Worker
from arq.jobs import SerializationError, deserialize_job_raw
from arq.utils import ms_to_datetime, timestamp_ms
from arq.worker import RetryJob, func
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import (
    MODEL_QUEUE,
    TOOLS_QUEUE,
    deserialize,
    queue_key,
    serialize,
)
from agentq.orchestrator.core.errors import AgentqError, InfrastructureError, SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.fleet import listings
from agentq.orchestrator.loop.prepare import PREPARE_STEP_KIND
from agentq.orchestrator.machine import keys
from agentq.orchestrator.machine import keys as state_keys
from agentq.orchestrator.machine.keys import job_prefix
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.redis.connect import (
    MAX_BLOCK_S,
    check_partitions,
    connect,
    connect_sync,
    is_cluster,
    is_memory_url,
)
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools.http import HTTP_EXECUTOR_KIND
from agentq.orchestrator.tools.mcp import MCP_SERVER_KIND
from agentq.orchestrator.tools.resolution import (
    MODEL_PROVIDER_KIND,
    ToolAnnouncement,
    registry_key,
)
from agentq.workers.jobs import batch_admit as batch_jobs
from agentq.workers.jobs.base import WorkerDeps
from agentq.workers.jobs.registry import job_handlers
from agentq.workers.models.batch.collector import Collector
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.model_client import ModelClient
from agentq.workers.models.ratelimit import Limits, RedisLike
from agentq.workers.queue.claims import (
    ARQ_RETRY_PREFIX,
    JOB_RIDE,
    RETRY_KEEP_S,
    Claimed,
    Taker,
    lease_wake_key,
    parse_take,
)
from agentq.workers.steps.hooks import hook_announcements
from agentq.workers.tools.base import ToolExecutor, WorkerServices
from agentq.workers.worker.catalog import served_announcements
from agentq.workers.worker.liveness import (
    OUTAGE,
    LeaseRenewer,
    jobs_key,
    liveness_key,
    pool_key,
    reap_cadence,
    reap_lapsed,
)
from agentq.workers.worker.metrics import TimedRateLimiter, WorkerMetrics, instrument
from agentq.workers.worker.startup_gc import freeze_startup_objects
from agentq.workers.worker.webhooks import WebhookDispatcher

log = logging.getLogger("agentq.worker")

# How long a worker's shutdown waits for its wake-up listener to take its cancel.
_LISTENER_STOP_S = 2.0


def _consume_outcome(task: asyncio.Task[Any]) -> None:
    """Retrieve a background task's outcome, so a late error is not logged as lost."""
    if not task.cancelled():
        task.exception()


# Registry entries that announce something other than a tool.
_NOT_TOOLS = frozenset(
    {MODEL_PROVIDER_KIND, MCP_SERVER_KIND, PREPARE_STEP_KIND, HTTP_EXECUTOR_KIND}
)

# arq's own timeout only backstops ours: calls carry their deadlines, and a
# dead worker is found by its lapsed lease, not by this.
_ARQ_FUNCTION_TIMEOUT_S = 6 * 3600
ANNOUNCE_EVERY_S = 60.0

# How long a cancel's abort marker is kept for a job that has not started yet.
ABORT_KEEP_MS = 60_000
# A job whose in-progress key outlives every worker record (lost by a crash of
# Redis itself) is freed after this long anyway.
_BACKSTOP_MS = _ARQ_FUNCTION_TIMEOUT_S * 1000
# A call this worker cannot serve is left for others for this long.
_NOT_SERVED_S = 5.0
# How often a worker checks that the jobs Redis says it holds are the ones it runs.
_RECONCILE_S = 2.0


class WakeableWorker(Worker):
    """arq's worker, with agentq's claim and end-of-job path (workers/queue/claims.py).

    One loop claims: it waits on the queue's wake-up list and claims up to its free
    slots in the same round trip (a pipeline of BLPOP and TAKE), and goes on claiming
    while ready jobs are left behind. Each claimed job arrives with its payload and its
    delivery count, so running it costs no round trip of arq's; when it ends, the same
    TAKE call that ends it claims the jobs its freed slot can take. Chores (the abort
    set's fallback check, arq's health record) run on their own timer.
    """

    def __init__(
        self,
        *args: Any,
        queue: str,
        idle_poll_s: float,
        worker_id: str,
        leased: Callable[[], bool] = lambda: True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, queue_name=queue_key(queue), poll_delay=idle_poll_s, **kwargs)
        self.idle_poll_s = idle_poll_s
        self.worker_id = worker_id
        # One taker per partition of the queue (state/keys.py): each touches one slot.
        self.takers = [
            Taker(self.pool, worker_id, queue, p, _BACKSTOP_MS, leased)
            for p in state_keys.partitions()
        ]
        self.taker = self.takers[0]
        self.wake_key = self.taker.wake_key
        self.wake_keys = [t.wake_key for t in self.takers]
        self._due: set[int] = set()  # partitions woken since the claim loop last looked
        self._woken = asyncio.Event()
        self._capacity = asyncio.Event()
        self._capacity.set()
        self._outage = OUTAGE
        self._not_served: dict[str, float] = {}
        self._next_abort_prune_ms = 0
        self._context = contextvars.copy_context()
        self.ctx["not_served"] = self.not_served

    async def main(self) -> None:
        # arq's main, less its INFO call (the embedded Redis has none) and its polling.
        self.ctx["redis"] = self.pool
        self._context = contextvars.copy_context()
        if self.on_startup:
            await self.on_startup(self.ctx)
        chores = asyncio.create_task(self._chores_forever())
        try:
            await self._claim_forever()
        finally:
            self.allow_pick_jobs = False  # jobs that end from now on claim nothing
            chores.cancel()
            # A cancel that lands while redis-py's read is timing out can be lost in
            # its connection (seen on Python 3.11: the read then waits on a reply that
            # never comes). Bounded, so shutdown never hangs on it: closing the pool
            # ends that read, and the callback takes its outcome.
            chores.add_done_callback(_consume_outcome)
            await asyncio.wait({chores}, timeout=_LISTENER_STOP_S)

    def taker_of(self, job_id: str) -> Taker:
        """The taker of a job's partition (its id's hash tag says which)."""
        return self.takers[state_keys.job_partition(job_id)]

    async def _claim_forever(self) -> None:
        if len(self.takers) > 1 or is_cluster(self.pool):
            # (a cluster client pipelines no EVALSHA: no claim rides behind a BLPOP)
            await self._claim_partitions()
            return
        block = False  # the first claim looks at once
        while True:
            raise_if_cancel_requested()
            await self._capacity.wait()
            if not self.allow_pick_jobs:  # draining: claim nothing more
                await asyncio.sleep(self.idle_poll_s)
                continue
            try:
                more = await self._claim(block)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await asyncio.sleep(max(self._outage.failed(exc), self.idle_poll_s))
                block = False
                continue
            self._outage.succeeded()
            block = not more

    async def _claim_partitions(self) -> None:
        """The claim loop over several partitions: listeners wait on the wake-up lists
        (one BLPOP over all of them on a single Redis, one per partition on a cluster,
        where a blocking read takes one slot's keys) and say which partitions were
        woken; claims take from those (all of them at the fallback poll, and after the
        worker was full: it may have left jobs behind)."""
        groups = (
            [[p] for p in range(len(self.takers))]
            if is_cluster(self.pool)
            else [list(range(len(self.takers)))]
        )
        listeners = [asyncio.create_task(self._listen(group)) for group in groups]
        pending = set(range(len(self.takers)))  # the first round looks everywhere
        try:
            while True:
                raise_if_cancel_requested()
                if not self._capacity.is_set():
                    await self._capacity.wait()
                    pending.update(range(len(self.takers)))
                if not self.allow_pick_jobs:  # draining: claim nothing more
                    await asyncio.sleep(self.idle_poll_s)
                    continue
                if not pending:
                    if not self._due:
                        self._woken.clear()
                        try:
                            await asyncio.wait_for(self._woken.wait(), self.idle_poll_s)
                        except TimeoutError:
                            self._due.update(range(len(self.takers)))  # the fallback poll
                    pending, self._due = self._due, set()
                    continue
                p = pending.pop()
                try:
                    more = await self._claim(False, self.takers[p])
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    pending.add(p)
                    await asyncio.sleep(max(self._outage.failed(exc), self.idle_poll_s))
                    continue
                self._outage.succeeded()
                if more:
                    pending.add(p)
        finally:
            for listener in listeners:
                listener.cancel()
                listener.add_done_callback(_consume_outcome)
            await asyncio.wait(set(listeners), timeout=_LISTENER_STOP_S)

    async def _listen(self, partitions: list[int]) -> None:
        """Pop wake-up tokens of some partitions while this worker has free slots."""
        lists = {self.takers[p].wake_key: p for p in partitions}
        outage = OUTAGE
        while True:
            raise_if_cancel_requested()
            await self._capacity.wait()
            try:
                popped = await self.pool.blpop(  # type: ignore[misc]
                    list(lists), timeout=max(1, int(self.idle_poll_s))
                )
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await asyncio.sleep(max(outage.failed(exc), self.idle_poll_s))
                continue
            outage.succeeded()
            if popped:
                woken = popped[0].decode() if isinstance(popped[0], bytes) else str(popped[0])
                self._due.add(lists.get(woken, partitions[0]))
                self._woken.set()

    async def _claim(self, block: bool, taker: Taker | None = None) -> bool:
        """Claim up to the free slots (after a wake-up token, or the fallback poll's
        timeout, when `block`). Whether ready jobs were left behind."""
        taker = taker or self.taker
        free = self.max_jobs - self.job_counter
        if free <= 0:
            self._capacity.clear()
            return False
        self.job_counter += free  # reserved while the claim is in flight
        claimed: list[Claimed] = []
        try:
            args = taker.args(free, skipped=self._skipping())
            if block:
                more, claimed = await taker.wait_and_take(max(1, int(self.idle_poll_s)), args)
            else:
                more, claimed = await taker.take(args)
        finally:
            self.job_counter -= free - len(claimed)
        if not self.allow_pick_jobs:
            # Claiming stopped (a drain) while this claim waited for a token: hand the
            # jobs straight back rather than start them here.
            self._start(claimed, run=False)
            return False
        self._start(claimed)
        if self.job_counter >= self.max_jobs:
            self._capacity.clear()
        return more

    def _start(self, claimed: list[Claimed], *, run: bool = True) -> None:
        """Run claimed jobs (or only release them, not counted); their slots are already
        counted in `job_counter`."""
        for job in claimed:
            work = self._run(job) if run else self._end(job.job_id, "release", 0)
            # The worker's own context: a job claimed in another job's round trip must
            # not inherit that job's (its trace span, its rider).
            task = self.loop.create_task(work, context=self._context.copy())
            self.tasks[job.job_id] = task
            task.add_done_callback(partial(self._ended, job.job_id))

    def _ended(self, job_id: str, task: asyncio.Task[None]) -> None:
        if self.tasks.get(job_id) is task:
            del self.tasks[job_id]
        self.job_counter -= 1
        if self.job_counter < self.max_jobs:
            self._capacity.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("worker %s: ending job %s failed", self.worker_id, job_id, exc_info=exc)

    async def _chores_forever(self) -> None:
        """The fallback check for cancelled jobs (a run's end usually triggers it at once,
        see `WorkerRuntime._abort_now`) and arq's health record, every `idle_poll_s`."""
        while True:
            raise_if_cancel_requested()
            await asyncio.sleep(self.idle_poll_s)
            try:
                if self.allow_abort_jobs:
                    await self._cancel_aborted_jobs()
                await self.heart_beat()
            except Exception as exc:
                if not is_transient(exc):  # the next round looks again
                    log.exception("worker %s: checking for cancelled jobs", self.worker_id)
                    continue
                await asyncio.sleep(self._outage.failed(exc))

    def not_served(self, job_id: str) -> None:
        """This worker lacks the job's tool: leave it to other workers for a while."""
        self._not_served[job_id] = time.monotonic() + _NOT_SERVED_S

    def _skipping(self) -> list[str]:
        if not self._not_served:
            return []
        now = time.monotonic()
        for job_id in [j for j, until in self._not_served.items() if until < now]:
            del self._not_served[job_id]
        return list(self._not_served)

    # -- running a job: arq's run_job, fed by the claim ------------------------------

    async def _run(self, job: Claimed) -> None:
        how, defer_ms, claim = "release", 0, False
        end = _JobEnd(self, job.job_id)
        try:
            how, defer_ms = await self._execute(job, end)
            if end.ended:  # in its last transition's round trip
                return
            # A job cancelled by a stop or a lapsed lease hands its slot to nobody.
            claim = how == "done" or defer_ms > 0 or job.job_id in self._not_served
        except Exception as exc:
            if not is_transient(exc):
                log.exception("job %s failed in the worker", job.job_id)
                how = "done"
        finally:
            if not end.ended:
                # Shielded like arq's finish_job: a cancelled run still ends its job.
                await asyncio.shield(self._end(job.job_id, how, defer_ms, claim=claim))

    async def _execute(self, job: Claimed, end: _JobEnd) -> tuple[str, int]:
        """Run one claimed job (arq's run_job, less its fetch): how it ends ('done' or
        'release') and, for a release, how much later it is due again (ms)."""
        job_id = job.job_id
        try:
            function_name, args, kwargs, enqueue_try, enqueue_ms = deserialize_job_raw(
                job.payload, deserializer=self.job_deserializer
            )
        except SerializationError:
            log.exception("deserializing job %s failed", job_id)
            self.jobs_failed += 1
            return "done", 0
        function = self.functions.get(function_name)
        if function is None:
            log.warning("job %s, function %r not found", job_id, function_name)
            self.jobs_failed += 1
            return "done", 0
        job_try = job.deliveries
        if enqueue_try and enqueue_try > job_try:
            job_try = enqueue_try
            await self.pool.setex(ARQ_RETRY_PREFIX + job_id, RETRY_KEEP_S, str(job_try))
        max_tries = self.max_tries if function.max_tries is None else function.max_tries
        if job_try > max_tries:
            log.warning("job %s: max retries %d exceeded", job_id, max_tries)
            self.jobs_failed += 1
            return "done", 0
        ctx = {
            **self.ctx,
            "job_id": job_id,
            "job_try": job_try,
            "enqueue_time": ms_to_datetime(enqueue_ms),
            "score": job.score,
        }
        if self.on_job_start:
            await self.on_job_start(ctx)
        timeout_s = self.job_timeout_s if function.timeout_s is None else function.timeout_s
        started_ms = timestamp_ms()
        how, defer_ms = "done", 0
        # The job hands its last transition to `end` (claims.job_ride): a cluster client
        # pipelines no EVALSHA, so there a job's end is its own round trip.
        if not is_cluster(self.pool):
            ctx[JOB_RIDE] = end
        task = self.loop.create_task(function.coroutine(ctx, *args, **kwargs))
        self.job_tasks[job_id] = task
        try:
            async with asyncio.timeout(timeout_s):
                await task
        except Retry as exc:
            how = "release"
            if exc.defer_score:
                defer_ms = exc.defer_score
            self.jobs_retried += 1
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this worker's own task is stopped: the job is released
            if job_id in self.aborting_tasks:  # its run was cancelled
                self.aborting_tasks.discard(job_id)
                self.jobs_failed += 1
            else:  # its worker stops or lost its lease: it runs again, here or elsewhere
                how = "release"
                self.jobs_retried += 1
        except RetryJob:
            how = "release"
            self.jobs_retried += 1
        except Exception:
            log.exception("job %s (%s) failed", job_id, function_name)
            self.jobs_failed += 1
        else:
            self.jobs_complete += 1
        finally:
            del self.job_tasks[job_id]
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "job %s (%s) %s in %d ms", job_id, function_name, how, timestamp_ms() - started_ms
            )
        if self.on_job_end:
            await self.on_job_end(ctx)
        return how, defer_ms

    async def _end(self, job_id: str, how: str, defer_ms: int, *, claim: bool = False) -> None:
        """Apply a job's end, retrying through an outage: a live worker's job must not
        stay held by it, nor be counted as a death, because Redis blinked. With `claim`,
        the same call claims what the job's freed slot (and any other free one) can take:
        the job's task still counts its own slot until it returns, so it hands it over."""
        outage = OUTAGE
        taker = self.taker_of(job_id)
        while True:
            n = 0
            if claim and self.allow_pick_jobs:
                n = self.max_jobs - self.job_counter + 1
            self.job_counter += n
            claimed: list[Claimed] = []
            try:
                _, claimed = await taker.take(
                    taker.args(n, job_id, how, defer_ms, self._skipping())
                )
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await asyncio.sleep(outage.failed(exc))
                claim = False
                continue
            finally:
                self.job_counter -= n - len(claimed)
            outage.succeeded()
            self._start(claimed, run=self.allow_pick_jobs)
            return

    async def _ride(
        self, end: _JobEnd, script: AsyncScript, keys: list[str], args: list[Any]
    ) -> Any:
        """Send a job's last transition and, pipelined behind it, the TAKE that ends the
        job and claims what its slot (and any other free one) can take."""
        n = self.max_jobs - self.job_counter + 1 if self.allow_pick_jobs else 0
        self.job_counter += n
        claimed: list[Claimed] = []
        try:
            # The job's partition: the same slot as its run's transition.
            taker = self.taker_of(end.job_id)
            take = taker.args(n, end.job_id, "done", 0, self._skipping(), riding=True)
            async with self.pool.pipeline(transaction=False) as pipe:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
                pipe.evalsha(taker.sha, len(taker.keys), *taker.keys, *take)
                raw, took = await pipe.execute(raise_on_error=False)
            if not isinstance(took, BaseException):
                end.ended = True
                _, claimed = parse_take(took)
        finally:
            self.job_counter -= n - len(claimed)
        self._start(claimed)
        if isinstance(raw, NoScriptError):
            # Redis lost its scripts (a restart): the transition, alone, loads it.
            return await script(keys=keys, args=args)
        if isinstance(raw, BaseException):
            raise raw
        return raw

    async def _cancel_aborted_jobs(self) -> None:
        """Cancel running jobs whose run was cancelled: look up only the jobs running
        here (arq reads the whole abort set on every poll), and prune old markers."""
        now_ms = timestamp_ms()
        if now_ms >= self._next_abort_prune_ms:
            self._next_abort_prune_ms = now_ms + 10_000
            async with self.pool.pipeline(transaction=False) as pipe:
                for taker in self.takers:
                    pipe.zremrangebyscore(taker.keys[4], "-inf", now_ms - ABORT_KEEP_MS)
                await pipe.execute()
        by_set: dict[str, list[str]] = {}
        for job_id in self.job_tasks:
            by_set.setdefault(state_keys.abort_set_of(job_id), []).append(job_id)
        if not by_set:
            return
        async with self.pool.pipeline(transaction=False) as pipe:
            for abort_key, running in by_set.items():
                pipe.zmscore(abort_key, running)
            replies = await pipe.execute()
        aborted: dict[str, list[str]] = {}
        for (abort_key, running), scores in zip(by_set.items(), replies, strict=True):
            hits = [job_id for job_id, score in zip(running, scores, strict=True) if score]
            if hits:
                aborted[abort_key] = hits
        for hits in aborted.values():
            for job_id in hits:
                task = self.job_tasks.get(job_id)
                if task is not None:
                    task.cancel()
            self.aborting_tasks.update(hits)
        for abort_key, hits in aborted.items():
            await self.pool.zrem(abort_key, *hits)

    def cancel_running(self) -> int:
        """Cancel every running job; each is released (not counted) as it unwinds."""
        running = [task for task in self.job_tasks.values() if not task.done()]
        for task in running:
            task.cancel()
        return len(running)


class _JobEnd:
    """Ends a job in the round trip of its last run transition, once: the job passes it
    to that transition (`RunStore.commit_step(..., ride=claims.job_ride(ctx))`). `ended`
    says whether it did (if not, the worker ends the job on its own)."""

    def __init__(self, worker: WakeableWorker, job_id: str) -> None:
        self.worker = worker
        self.job_id = job_id
        self.ended = False
        self._used = False

    async def __call__(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        if self._used:  # the job's end went already: what comes after goes alone
            return await script(keys=keys, args=args)
        self._used = True
        return await self.worker._ride(self, script, keys, args)


class ToolSetConflict(SpecError):
    """A worker would share a queue with workers that serve other tools: the calls of
    one set would reach workers of the other. Such a worker must name its own queue."""


class WorkerRuntime:
    """The workers of one process, their executors, their lease and their announcements."""

    def __init__(
        self,
        redis_url: str,
        *,
        executors: Sequence[ToolExecutor] = (),
        queues: Sequence[str] = (MODEL_QUEUE, TOOLS_QUEUE),
        tool_queue: str = TOOLS_QUEUE,
        settings: Settings | None = None,
        env: dict[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        metrics: WorkerMetrics | None = None,
        freeze_startup_heap: bool = False,
    ) -> None:
        self.settings = settings or Settings()
        self.metrics = metrics
        # A worker process owns its heap; an embedded session shares its host's, whose
        # objects it must not make uncollectable.
        self._freeze_startup_heap = freeze_startup_heap
        self.announced = False  # readiness: the tools are in the registry
        self.redis_url = redis_url
        self.queues = list(queues)
        self.tool_queue = tool_queue
        self.executors = list(executors)
        self.env = dict(os.environ) if env is None else env
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._http = http
        self.announcements: list[ToolAnnouncement] = []
        self.started_at = time.time()
        self._tasks: list[asyncio.Task[None]] = []
        self._workers: list[WakeableWorker] = []
        self._renewer: LeaseRenewer | None = None
        self._leased = False  # whether this process ever held its lease
        self._pools: list[str] = []
        self.redis: Redis | None = None
        self._collector: Collector | None = None

    async def start(self) -> None:
        self.redis = connect(self.redis_url, self.settings)
        try:
            await check_partitions(self.redis)
        except BaseException:
            await self.redis.aclose()
            self.redis = None
            raise
        store = RunStore(self.redis, retention_s=self.settings.retention_s)
        http = self._http or httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))
        self._http = http
        models = ModelClient(
            http,
            self.env,
            policy=EndpointPolicy.from_settings(self.settings),
            # redis-py types its async commands as `Awaitable[X] | X`, which no
            # protocol of awaitables matches; the client is the limiter's RedisLike.
            limiter=TimedRateLimiter(
                cast(RedisLike, self.redis), self._rate_limits(), metrics=self.metrics
            ),
        )
        await self._start_executors(WorkerServices(models=models))
        deps = WorkerDeps(
            store=store,
            models=models,
            executors={e.kind: e for e in self.executors},
            max_deliveries=self.settings.max_deliveries,
            max_output_bytes=self.settings.max_tool_output_bytes,
            metrics=self.metrics,
            settings=self.settings,
            batches=ProviderBatchStore(self.redis, retention_s=self.settings.retention_s),
        )
        collector = Collector(self.redis, models, self.settings, self.worker_id)
        self._collector = collector
        await self._take_lease()
        await self._join_pools()
        await self.announce()
        for queue in self.queues:
            worker = WakeableWorker(
                functions=[
                    # One delivery past ours, so that our job sees it and settles the run
                    # instead of arq dropping the job silently.
                    func(
                        instrument(handler),
                        name=kind.value,
                        timeout=_ARQ_FUNCTION_TIMEOUT_S,
                        max_tries=self.settings.max_deliveries + 1,
                    )
                    for kind, handler in job_handlers().items()
                ],
                queue=queue,
                redis_pool=self.redis,
                idle_poll_s=self.settings.idle_poll_s,
                worker_id=self.worker_id,
                leased=self._lease_held,
                handle_signals=False,
                max_jobs=self.settings.concurrency,
                keep_result=0,
                allow_abort_jobs=True,
                job_serializer=serialize,
                job_deserializer=deserialize,
                ctx={"agentq": deps, "queue": queue, "metrics": self.metrics},
            )
            self._workers.append(worker)
            self._tasks.append(asyncio.create_task(worker.main(), name=f"agentq-worker-{queue}"))
        self._tasks.append(asyncio.create_task(self._announce_forever(), name="agentq-announce"))
        self._tasks.append(asyncio.create_task(self._beat_forever(), name="agentq-beat"))
        self._tasks.append(asyncio.create_task(self._release_ended_runs(), name="agentq-run-ended"))
        self._tasks.append(asyncio.create_task(self._reap_forever(), name="agentq-reaper"))
        if MODEL_QUEUE in self.queues:
            self._tasks.append(
                asyncio.create_task(collector.run_forever(), name="agentq-provider-batch")
            )
            # The run's own workers deliver its webhooks.
            webhooks = WebhookDispatcher(
                self.redis, store, self.worker_id, settings=self.settings, env=self.env
            )
            self._tasks.append(asyncio.create_task(webhooks.run_forever(), name="agentq-webhooks"))
            sweep = batch_jobs.sweep_forever(
                Client(redis=self.redis, settings=self.settings), self.settings.batch_sweep_s
            )
            self._tasks.append(asyncio.create_task(sweep, name="agentq-batch-sweep"))
        # Everything the jobs will use is loaded: full collections need not walk it again.
        if self._freeze_startup_heap:
            freeze_startup_objects()

    # -- the lease -------------------------------------------------------------

    async def _take_lease(self) -> None:
        assert self.redis is not None
        if is_memory_url(self.redis_url):
            # One process holds the whole embedded Redis: nobody else could reap.
            await self.redis.set(liveness_key(self.worker_id), self.worker_id)
            self._leased = True
            return
        lease_s = self.settings.lease_s
        client = connect_sync(
            self.redis_url,
            socket_timeout=lease_s / 5,
            socket_connect_timeout=lease_s / 5,
        )
        loop = asyncio.get_running_loop()
        self._renewer = LeaseRenewer(
            client,
            self.worker_id,
            lease_s,
            on_lapse=lambda why: loop.call_soon_threadsafe(self._lease_lost, why),
        )
        await asyncio.to_thread(self._renewer.register)
        self._leased = True
        self._renewer.start()

    def _lease_held(self) -> bool:
        return self._renewer is None or self._renewer.held()

    def _lease_lost(self, why: str) -> None:
        """Our jobs may be re-delivered elsewhere now: stop running them here."""
        cancelled = sum(worker.cancel_running() for worker in self._workers)
        log.warning(
            "worker %s: %s; cancelled %d running job(s), they will run again",
            self.worker_id,
            why,
            cancelled,
        )

    async def _reap_forever(self) -> None:
        """Re-deliver the jobs of workers whose lease lapsed (they died), at once."""
        assert self.redis is not None
        if is_memory_url(self.redis_url):
            return
        outage = OUTAGE
        # Redis counts as steady while reapers pass at least this often; after a gap,
        # live workers get time to renew before anyone's jobs are re-delivered.
        cadence = reap_cadence(self.settings.lease_s)
        # Our own claims are checked against our running jobs far less often: what
        # they catch (a restored AOF's stale claim) is rare, and held by a live worker.
        reconcile_every = max(1, round(_RECONCILE_S / cadence.every_s))
        suspects: set[str] = set()
        passes = 0
        while True:
            await asyncio.sleep(cadence.every_s)
            raise_if_cancel_requested()
            passes += 1
            try:
                reaped = await reap_lapsed(self.redis, cadence)
                if passes % reconcile_every == 0:
                    suspects = await self._reconcile(suspects)
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("worker %s: reaping lapsed workers failed", self.worker_id)
                    continue
                await asyncio.sleep(outage.failed(exc))
                continue
            outage.succeeded()
            if reaped:
                log.info("re-delivered %d job(s) of workers whose lease lapsed", reaped)

    async def _reconcile(self, suspects: set[str]) -> set[str]:
        """Release jobs Redis says we hold but we do not run (a Redis restarted from its
        AOF can bring back a claim whose job had ended here). A job must look so twice
        in a row: a claim's reply may still be on its way."""
        assert self.redis is not None
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in state_keys.partitions():
                pipe.hgetall(jobs_key(self.worker_id, p))
            replies = await pipe.execute()
        held = {
            (k.decode() if isinstance(k, bytes) else str(k)): v
            for jobs in replies
            for k, v in jobs.items()
        }
        running = {job_id for w in self._workers for job_id in w.tasks}
        now_missing = set(held) - running
        for job_id in now_missing & suspects:
            wake = lease_wake_key(held[job_id])
            worker = next((w for w in self._workers if wake in w.wake_keys), None)
            if worker is not None:
                log.warning("worker %s: releasing job %s it no longer runs", self.worker_id, job_id)
                await worker._end(job_id, "release", 0)
        return now_missing - suspects

    # -- routing: one tool set per queue ------------------------------------------

    async def _tool_sets(self) -> dict[str, list[str]]:
        """The tools this worker serves, by the queue it announces them on."""
        sets: dict[str, list[str]] = {q: [] for q in self.queues if q != MODEL_QUEUE}
        for executor in self.executors:
            queue = executor.queue or self.tool_queue
            for ann in await executor.announcements(queue):
                sets.setdefault(ann.queue, []).append(registry_key(ann))
        # Its prepare_step hooks too: a hook's job must find it on any worker of the queue.
        for ann in hook_announcements(self.tool_queue):
            sets.setdefault(ann.queue, []).append(registry_key(ann))
        return {q: sorted(set(t)) for q, t in sets.items() if q in self.queues}

    async def _join_pools(self) -> None:
        """Refuse to serve a queue whose live workers serve another tool set: a job on a
        queue goes to any of its workers, so they must all be able to run it."""
        assert self.redis is not None
        for queue, tools in (await self._tool_sets()).items():
            members = await self.redis.hgetall(pool_key(queue))  # type: ignore[misc]
            for raw_id, raw_tools in members.items():
                other = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                if other == self.worker_id:
                    continue
                if not await self.redis.exists(liveness_key(other)):
                    await self.redis.hdel(pool_key(queue), other)  # type: ignore[misc]
                    continue
                theirs = json.loads(raw_tools)
                if theirs != tools:
                    missing = sorted(set(theirs) - set(tools))
                    extra = sorted(set(tools) - set(theirs))
                    detail = "; ".join(
                        part
                        for part in (
                            f"lacks {', '.join(missing)}" if missing else "",
                            f"adds {', '.join(extra)}" if extra else "",
                        )
                        if part
                    )
                    raise ToolSetConflict(
                        f"queue {queue!r} is served by workers with other tools (this worker "
                        f"{detail}): give this worker its own queue with --queue"
                    )
            await self.redis.hset(  # type: ignore[misc]
                pool_key(queue), self.worker_id, json.dumps(tools)
            )
            self._pools.append(queue)

    async def _start_executors(self, services: WorkerServices) -> None:
        for executor in self.executors:
            try:
                await executor.start(services)
            except AgentqError:
                raise
            except Exception as exc:
                raise InfrastructureError(
                    f"the {executor.kind} executor cannot start here ({type(exc).__name__}: {exc})"
                ) from None

    def _rate_limits(self) -> dict[tuple[str, str], Limits]:
        limits: dict[tuple[str, str], Limits] = {}
        for label, (rpm, tpm, *window) in self.settings.rate_limits.items():
            provider, _, model = label.partition(":")
            limits[(provider, model or "*")] = Limits(rpm, tpm, *window)
        return limits

    async def announce(self) -> None:
        assert self.redis is not None
        announced = await served_announcements(self.executors, self.tool_queue)
        await RunStore(self.redis).announce(announced)
        # What `agentq workers` lists: the tools, not providers or tool-less MCP servers.
        self.announcements = [a for a in announced if a.kind not in _NOT_TOOLS]
        self.announced = True
        await listings.heartbeat(self.redis, self._record())

    def _record(self) -> listings.WorkerRecord:
        return listings.WorkerRecord(
            id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.queues,
            tools=sorted({a.name for a in self.announcements}),
            concurrency=self.settings.concurrency,
            started_at=self.started_at,
        )

    async def _release_ended_runs(self) -> None:
        """Let executors drop what they keep for a run (sandbox sessions) when it ends,
        wherever it ended. A message missed while disconnected is covered by the
        executors' own idle timeouts."""
        assert self.redis is not None
        outage = OUTAGE
        while True:
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(keys.RUN_ENDED)
                    outage.succeeded()
                    while True:
                        raise_if_cancel_requested()  # a cancel a timed read swallowed
                        # A read bounded below the socket timeout: an idle channel is
                        # silence, not a dead Redis (`listen()` would time out and log
                        # an outage every socket timeout while no run ends).
                        message = await pubsub.get_message(timeout=MAX_BLOCK_S)
                        if message is None:
                            continue
                        run_id = message["data"]
                        run_id = run_id.decode() if isinstance(run_id, bytes) else str(run_id)
                        await self._abort_now(run_id)
                        for executor in self.executors:
                            try:
                                await executor.release_run(run_id)
                            except Exception as exc:  # one executor's trouble stops no other
                                log.warning("releasing run %s: %s", run_id, exc)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await asyncio.sleep(max(outage.failed(exc), self.settings.idle_poll_s))

    async def _abort_now(self, run_id: str) -> None:
        """A run ended (cancelled, failed): if any of its jobs runs here, look up their
        abort marks now instead of at the next fallback poll (up to `idle_poll_s`)."""
        prefix = job_prefix(run_id)
        for worker in self._workers:
            if any(job_id.startswith(prefix) for job_id in worker.job_tasks):
                try:
                    await worker._cancel_aborted_jobs()
                except Exception as exc:  # the fallback poll looks again
                    log.warning("checking aborts of run %s: %s", run_id, exc)

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_EVERY_S)
            try:
                await self.announce()
            except Exception as exc:  # keep serving; the next round retries
                log.warning("tool announcement failed: %s", exc)

    @property
    def running(self) -> bool:
        """Started, and no queue worker or background task has ended."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    async def _beat_forever(self) -> None:
        """Keep this process's record fresh (`agentq workers`, `agentq serve` list it)."""
        assert self.redis is not None
        while True:
            try:
                await listings.heartbeat(self.redis, self._record())
            except Exception as exc:  # keep serving; the next beat retries
                log.warning("worker record not refreshed: %s", exc)
            await asyncio.sleep(listings.BEAT_EVERY_S)

    async def wait(self) -> None:
        """Run until a worker task ends (it only does on error) or we are cancelled."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()

    # -- stopping ----------------------------------------------------------------

    def _running(self) -> list[asyncio.Task[Any]]:
        return [t for w in self._workers for t in w.tasks.values() if not t.done()]

    async def drain(self, timeout_s: float) -> int:
        """Stop claiming and let running jobs finish for up to `timeout_s`; then release
        what still runs for immediate re-delivery elsewhere (not counted as a death).
        Returns how many jobs were released."""
        for worker in self._workers:
            worker.allow_pick_jobs = False
        deadline = time.monotonic() + timeout_s
        # A claim in flight when claiming stopped may still start a job: look again.
        while (running := self._running()) and (left_s := deadline - time.monotonic()) > 0:
            await asyncio.wait(running, timeout=left_s)
        released = sum(worker.cancel_running() for worker in self._workers)
        running = self._running()
        if running:
            # Releasing takes one Redis round trip each; an outage must not hold the exit.
            await asyncio.wait(running, timeout=max(5.0, self.settings.lease_s))
        if released:
            log.warning(
                "worker %s: drain timeout (%g s) reached; released %d running job(s)",
                self.worker_id,
                timeout_s,
                released,
            )
        return released

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            task.add_done_callback(_consume_outcome)
        if self._tasks:
            # Bounded: a task that lost its cancel (see raise_if_cancel_requested) must
            # not hold the process; closing the connections below ends what it awaits.
            await asyncio.wait(self._tasks, timeout=max(5.0, self.settings.lease_s))
            stuck = [task.get_name() for task in self._tasks if not task.done()]
            if stuck:
                log.warning("worker %s: tasks outlived their cancel: %s", self.worker_id, stuck)
        for worker in self._workers:
            # Jobs still running are released (not counted) as they unwind.
            worker.cancel_running()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.gather(*worker.tasks.values(), return_exceptions=True),
                    max(5.0, self.settings.lease_s),
                )
        for executor in self.executors:
            with contextlib.suppress(Exception):
                await executor.aclose()
        if self._http is not None:
            await self._http.aclose()
        await self._leave()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await listings.forget_worker(self.redis, self.worker_id)
            await self.redis.aclose()
        self._tasks.clear()
        self._workers.clear()

    async def _leave(self) -> None:
        """Give up the lease: a graceful stop leaves nothing for a reaper to count."""
        if self._renewer is not None:
            await asyncio.to_thread(self._renewer.stop)
        if self.redis is None or not self._leased:
            if self._renewer is not None:
                self._renewer.client.close()
            return  # never started: nothing to give up, and Redis may be the reason
        # The reaper removes us from the workers set: anything a failed release left held
        # is then re-delivered rather than stranded.
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                for queue in self._pools:
                    pipe.hdel(pool_key(queue), self.worker_id)
                pipe.delete(liveness_key(self.worker_id))
                await pipe.execute()
        except Exception as exc:
            log.warning("worker %s: leaving: %s", self.worker_id, exc)
        if self._renewer is not None:
            self._renewer.client.close()
