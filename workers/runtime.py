"""A worker process: one arq worker per queue, woken by Redis instead of polling.

arq polls its queue every `poll_delay` (0.5 s by default), which would put half
a second into every hop. Here each enqueue also pushes a token onto the
queue's wake-up list; a worker with spare capacity waits on that list with
BLPOP and polls as soon as a token arrives. The poll interval remains only as
a fallback (deferred retries, lost tokens), so an idle worker sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from typing import Any, cast

import httpx
from arq import Worker
from arq.utils import timestamp_ms
from arq.worker import func
from redis.asyncio import Redis

from agentq.orchestrator import fleet, keys, listings
from agentq.orchestrator.endpoints import EndpointPolicy
from agentq.orchestrator.envelopes import (
    ARQ_IN_PROGRESS_PREFIX,
    MODEL_QUEUE,
    TOOLS_QUEUE,
    deserialize,
    queue_key,
    serialize,
    wake_key,
)
from agentq.orchestrator.errors import AgentqError, InfrastructureError
from agentq.orchestrator.redis_conn import connect
from agentq.orchestrator.settings import Settings
from agentq.orchestrator.store import RunStore
from agentq.orchestrator.tool_kinds.mcp import MCP_SERVER_KIND
from agentq.orchestrator.tool_resolution import MODEL_PROVIDER_KIND, ToolAnnouncement
from agentq.workers import handlers
from agentq.workers.catalog import served_announcements
from agentq.workers.executors.base import ToolExecutor, WorkerServices
from agentq.workers.metrics import TimedRateLimiter, WorkerMetrics, instrument
from agentq.workers.providers.model_client import ModelClient
from agentq.workers.providers.ratelimit import Limits, RedisLike

log = logging.getLogger("agentq.worker")

# Registry entries that announce something other than a tool.
_NOT_TOOLS = frozenset({MODEL_PROVIDER_KIND, MCP_SERVER_KIND})

# arq's own timeout only backstops ours: calls carry their deadlines, and a
# dead worker is found by its lapsed lease, not by this.
_ARQ_FUNCTION_TIMEOUT_S = 6 * 3600
ANNOUNCE_EVERY_S = 60.0

# arq claims a job with WATCH, EXISTS, ZSCORE and MULTI/PSETEX/EXEC: four round trips.
# This makes the same checks in one, and starts the in-progress key as the job's lease.
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
"""


class WakeableWorker(Worker):
    def __init__(
        self, *args: Any, wake: str, idle_poll_s: float, lease_s: float, **kwargs: Any
    ) -> None:
        super().__init__(*args, poll_delay=idle_poll_s, **kwargs)
        self.wake_key = wake
        self.idle_poll_s = idle_poll_s
        self.lease_ms = max(1, int(lease_s * 1000))
        self._claim = self.pool.register_script(_CLAIM)
        self._read_full = False
        self._wake = asyncio.Event()
        self._capacity = asyncio.Event()
        self._capacity.set()

    async def main(self) -> None:
        # arq's main, less its INFO call (the embedded Redis has none) and its fixed sleep.
        self.ctx["redis"] = self.pool
        if self.on_startup:
            await self.on_startup(self.ctx)
        listener = asyncio.create_task(self._listen())
        try:
            while True:
                self._wake.clear()
                self._read_full = False
                await self._poll_iteration()
                saturated = self.job_counter >= self.max_jobs
                self._capacity.clear() if saturated else self._capacity.set()
                if self._read_full and not saturated:
                    continue  # a read takes at most queue_read_limit jobs: more may be queued
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.idle_poll_s)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _listen(self) -> None:
        while True:
            await self._capacity.wait()
            try:
                popped = await self.pool.blpop(  # type: ignore[misc]
                    [self.wake_key], timeout=max(1, int(self.idle_poll_s))
                )
            except (
                OSError,
                ConnectionError,
            ) as exc:  # Redis restarting: the fallback poll covers us
                log.warning("wake-up listener: %s", exc)
                await asyncio.sleep(self.idle_poll_s)
                continue
            if popped:
                self._wake.set()

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs, claiming each job in one round trip instead of four."""
        self._read_full = len(job_ids) >= self.queue_read_limit
        for job_id_b in job_ids:
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = job_id_b.decode()
            score = await self._claim(
                keys=[ARQ_IN_PROGRESS_PREFIX + job_id, self.queue_name],
                args=[job_id, timestamp_ms(), self.lease_ms],
            )
            if score is None:  # running elsewhere, finished, or deferred
                self.job_counter -= 1
                self.sem.release()
                continue
            task = self.loop.create_task(self.run_job(job_id, int(float(score))))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

    def _release_sem_dec_counter_on_complete(self) -> None:
        saturated = self.job_counter >= self.max_jobs
        super()._release_sem_dec_counter_on_complete()
        self._capacity.set()
        if saturated:  # jobs may be waiting that this worker left in the queue
            self._wake.set()


class WorkerRuntime:
    """The workers of one process, their executors, and their registry announcements."""

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
    ) -> None:
        self.settings = settings or Settings()
        self.metrics = metrics
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
        self.redis: Redis | None = None

    async def start(self) -> None:
        self.redis = connect(self.redis_url)
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
        deps = handlers.WorkerDeps(
            store=store,
            models=models,
            executors={e.kind: e for e in self.executors},
            lease_s=self.settings.lease_s,
            max_deliveries=self.settings.max_deliveries,
            max_output_bytes=self.settings.max_tool_output_bytes,
            metrics=self.metrics,
        )
        await self.announce()
        for queue in self.queues:
            worker = WakeableWorker(
                functions=[
                    # One delivery past ours, so that our job sees it and settles the run
                    # instead of arq dropping the job silently.
                    func(
                        instrument(handler),
                        name=kind,
                        timeout=_ARQ_FUNCTION_TIMEOUT_S,
                        max_tries=self.settings.max_deliveries + 1,
                    )
                    for kind, handler in handlers.JOB_FUNCTIONS.items()
                ],
                queue_name=queue_key(queue),
                redis_pool=self.redis,
                wake=wake_key(queue),
                idle_poll_s=self.settings.idle_poll_s,
                lease_s=self.settings.lease_s,
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
        while True:
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(keys.RUN_ENDED)
                    async for message in pubsub.listen():
                        run_id = message["data"]
                        run_id = run_id.decode() if isinstance(run_id, bytes) else str(run_id)
                        for executor in self.executors:
                            try:
                                await executor.release_run(run_id)
                            except Exception as exc:  # one executor's trouble stops no other
                                log.warning("releasing run %s: %s", run_id, exc)
            except (OSError, ConnectionError) as exc:
                log.warning("run-ended listener: %s", exc)
                await asyncio.sleep(self.settings.idle_poll_s)

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
        """Keep this process counted in the fleet (`agentq serve` shows the count)."""
        assert self.redis is not None
        while True:
            try:
                await fleet.beat(self.redis, self.worker_id, list(self.queues))
            except Exception as exc:  # keep serving; the next beat retries
                log.warning("fleet beat failed: %s", exc)
            await asyncio.sleep(fleet.BEAT_EVERY_S)

    async def wait(self) -> None:
        """Run until a worker task ends (it only does on error) or we are cancelled."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for worker in self._workers:
            # arq's in-flight jobs: cancel so re-delivery picks them up elsewhere.
            for job_task in list(worker.tasks.values()):
                job_task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
        for executor in self.executors:
            with contextlib.suppress(Exception):
                await executor.aclose()
        if self._http is not None:
            await self._http.aclose()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await listings.forget_worker(self.redis, self.worker_id)
                await fleet.gone(self.redis, self.worker_id, list(self.queues))
            await self.redis.aclose()
        self._tasks.clear()
        self._workers.clear()
