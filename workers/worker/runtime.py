"""A worker process: one arq worker per queue, woken by Redis instead of polling.

arq polls its queue every `poll_delay` (0.5 s by default), which would put half
a second into every hop, and spends several round trips per job on its own
bookkeeping. Here each enqueue also pushes a token onto the queue's wake-up list;
a worker with free slots waits on that list with BLPOP and, in the same round trip,
claims up to its free slots with one Lua call (`claims.TAKE`), whose reply carries
each job's payload and delivery count. A job's end rides in the round trip of its
last run transition, with the claim of the next jobs; when the job that transition
enqueues goes to a queue this process's own claim loop waits on, no token is pushed and
that loop's claim rides in the same round trip (`arq_worker._HandOff`). The wait times out after
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
import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, cast

import httpx
from arq.worker import func
from redis.asyncio import Redis

from agentq.orchestrator.batches.redrive import BatchRedriver
from agentq.orchestrator.budgets.tenants import tenant_budgets
from agentq.orchestrator.calls.redrive import CallRedriver
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import (
    MODEL_QUEUE,
    TOOLS_QUEUE,
    deserialize,
    serialize,
)
from agentq.orchestrator.core.errors import AgentqError, InfrastructureError
from agentq.orchestrator.core.keys import job_prefix
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.cost.prices import load_prices
from agentq.orchestrator.fleet import layout_guard, listings
from agentq.orchestrator.fleet.layout import this_layout
from agentq.orchestrator.loop.prepare import HOOK_KINDS
from agentq.orchestrator.machine.sweeper import Sweeper
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.redis.connect import (
    check_partitions,
    connect,
    connect_sync,
    is_memory_url,
)
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.orchestrator.runs.redrive import Redriver
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools import ToolAnnouncement, registry_key
from agentq.orchestrator.tools.announcements import (
    MODEL_ENDPOINT_KIND,
    MODEL_PROVIDER_KIND,
    endpoint_announcements,
)
from agentq.orchestrator.tools.http import HTTP_EXECUTOR_KIND
from agentq.orchestrator.tools.mcp import MCP_SERVER_KIND
from agentq.workers.jobs.base import WorkerDeps
from agentq.workers.jobs.registry import job_handlers
from agentq.workers.models.batch.collector import Collector
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.model_client import ModelClient
from agentq.workers.models.ratelimit import Limits, RedisLike
from agentq.workers.queue.arq_worker import (
    ARQ_FUNCTION_TIMEOUT_S,
    WakeableWorker,
    consume_outcome,
)
from agentq.workers.queue.claims import publish_tool_set
from agentq.workers.queue.liveness import (
    OUTAGE,
    LeaseRenewer,
    liveness_key,
    reap_cadence,
    reap_pass,
)
from agentq.workers.steps.hooks import hook_announcements
from agentq.workers.steps.llm_guard import serve_llm_guard
from agentq.workers.tools.base import ToolExecutor, WorkerServices
from agentq.workers.worker.catalog import served_announcements
from agentq.workers.worker.metrics import TimedRateLimiter, WorkerMetrics, instrument
from agentq.workers.worker.run_ends import RunEnds
from agentq.workers.worker.startup_gc import freeze_startup_objects
from agentq.workers.worker.upkeep import UpkeepTurn
from agentq.workers.worker.webhooks import WebhookDispatcher

log = logging.getLogger("agentq.worker")

_ENDERS_KEPT = 1024  # runs ended here whose end notice has not come yet

# Registry entries that announce something other than a tool.
_NOT_TOOLS = frozenset(
    {
        MODEL_PROVIDER_KIND,
        MODEL_ENDPOINT_KIND,
        MCP_SERVER_KIND,
        *HOOK_KINDS,
        HTTP_EXECUTOR_KIND,
    }
)
# How often a worker lists what its executors serve again (an MCP server's tools may
# change); its heartbeat refreshes the last list far more often (listings.BEAT_EVERY_S).
RELIST_EVERY_S = 60.0


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    """Hand a callback from another thread to the event loop, unless it is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _upkeep_failed(what: str, exc: Exception) -> None:
    """A periodic chore failed: Redis trouble is the outage's one line, anything else its own."""
    if is_transient(exc):
        OUTAGE.failed(exc)
    else:
        log.warning("%s: %s", what, exc)


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
        wait_for_redis: bool = False,
    ) -> None:
        self.settings = settings or Settings()
        # A worker process waits for a Redis that is down at its start; an embedded
        # session (a person at a terminal) is told at once instead.
        self._wait_for_redis = wait_for_redis
        self.metrics = metrics
        # A worker process owns its heap; an embedded session shares its host's, whose
        # objects it must not make uncollectable.
        self._freeze_startup_heap = freeze_startup_heap
        self.announced = False  # readiness: the tools are in the registry
        # The models file its model steps resolve against (its endpoints are announced).
        self.endpoint_policy = EndpointPolicy.from_settings(self.settings)
        self.prices = load_prices(self.settings.prices)  # a bad file stops the start here
        tenant_budgets(self.settings.tenant_budgets)  # so does a bad AGENTQ_TENANT_BUDGETS
        self.redis_url = redis_url
        self.queues = list(queues)
        self.tool_queue = tool_queue
        self.executors = list(executors)
        self.env = dict(os.environ) if env is None else env
        self.worker_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.layout = this_layout(self.env)  # the run state's layout it reads and writes
        self._joined = False  # whether it holds the fleet's layout with the others
        self._mixed_warned = False  # a beat found another layout holding it (said once)
        self._http = http
        self.announcements: list[ToolAnnouncement] = []
        self._announced: list[ToolAnnouncement] = []  # everything, providers included
        self._reconnected = asyncio.Event()  # set when a Redis outage ends
        self._stop_listening: Callable[[], None] = lambda: None
        self.started_at = time.time()
        self._tasks: list[asyncio.Task[None]] = []
        self._workers: list[WakeableWorker] = []
        # Run id -> the job task here whose transition ended the run (_ended_by_a_job).
        self._enders: OrderedDict[str, asyncio.Task[Any]] = OrderedDict()
        self._renewer: LeaseRenewer | None = None
        self._upkeep: UpkeepTurn | None = None  # with the renewer: the fleet's upkeep turn
        self._turn_taken = asyncio.Event()  # set when a renewal takes the upkeep turn
        self._leased = False  # whether this process ever held its lease
        # The registry keys it serves, by queue: its claims take only jobs needing them.
        self._served: dict[str, list[str]] = {}
        self.redis: Redis | None = None
        self._collector: Collector | None = None
        self._run_ends: RunEnds | None = None

    async def start(self) -> None:
        self.redis = connect(self.redis_url, self.settings)
        try:
            await self._first_contact()
            await self._join_fleet()
        except BaseException:
            await self.redis.aclose()
            self.redis = None
            raise
        store = RunStore(self.redis, retention_s=self.settings.retention_s)
        store.ended_here.append(self._ended_by_a_job)
        if self.metrics is not None:
            store.end_listeners.append(self.metrics.run_ended)
        http = self._http or httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))
        self._http = http
        models = ModelClient(
            http,
            self.env,
            policy=self.endpoint_policy,
            prices=self.prices,
            # redis-py types its async commands as `Awaitable[X] | X`, which no
            # protocol of awaitables matches; the client is the limiter's RedisLike.
            limiter=TimedRateLimiter(
                cast(RedisLike, self.redis), self._rate_limits(), metrics=self.metrics
            ),
        )
        # Served by every worker, with its model client: a spec's llm guardrails.
        serve_llm_guard(models)
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
        await self._listen_for_run_ends()
        self._served = await self._tool_sets()
        await self.announce()
        for queue in self.queues:
            worker = WakeableWorker(
                functions=[
                    # One delivery past ours, so that our job sees it and settles the run
                    # instead of arq dropping the job silently.
                    func(
                        instrument(handler),
                        name=kind.value,
                        timeout=ARQ_FUNCTION_TIMEOUT_S,
                        max_tries=self.settings.max_deliveries + 1,
                    )
                    for kind, handler in job_handlers().items()
                ],
                queue=queue,
                tools=self._served.get(queue, ()),
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
        loop = asyncio.get_running_loop()

        def reconnected() -> None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(self._reconnected.set)

        self._stop_listening = OUTAGE.on_end(reconnected)
        self._tasks.append(asyncio.create_task(self._beat_forever(), name="agentq-beat"))
        run_ends = self._run_ends
        assert run_ends is not None
        self._tasks.append(asyncio.create_task(run_ends.run_forever(), name="agentq-run-ended"))
        self._tasks.append(asyncio.create_task(self._reap_forever(), name="agentq-reaper"))
        self._tasks.append(asyncio.create_task(self._redrive_forever(), name="agentq-redrive"))
        if MODEL_QUEUE in self.queues:
            self._tasks.append(
                asyncio.create_task(collector.run_forever(), name="agentq-provider-batch")
            )
            # The run's own workers deliver its webhooks.
            webhooks = WebhookDispatcher(
                self.redis,
                store,
                self.worker_id,
                settings=self.settings,
                env=self.env,
                idle_poll_s=self.settings.idle_poll_s,
                busy=self._holding,
            )
            self._tasks.append(asyncio.create_task(webhooks.run_forever(), name="agentq-webhooks"))
        # Everything the jobs will use is loaded: full collections need not walk it again.
        if self._freeze_startup_heap:
            freeze_startup_objects()

    async def _first_contact(self) -> None:
        """A worker process started while Redis is down or full waits for it as a running
        worker does (one line per outage) instead of exiting: pods and hosts start in
        any order."""
        redis = self.redis
        assert redis is not None
        await self._until_redis_answers(lambda: check_partitions(redis))

    async def _join_fleet(self) -> None:
        """Refuse to start beside live workers of another state layout (`layout_guard`):
        before anything is claimed, announced or started here."""
        redis = self.redis
        assert redis is not None
        if is_memory_url(self.redis_url):
            return  # one process holds the embedded Redis: there is no fleet to mix
        await self._until_redis_answers(lambda: layout_guard.join(redis, self.layout))
        self._joined = True

    async def _until_redis_answers(self, command: Callable[[], Awaitable[object]]) -> None:
        """Run a start-up command (idempotent) until Redis answers it, as `_first_contact`
        waits: a Redis slow to answer one command (an fsync on every write, a loaded
        host) is an outage to ride out, not a reason to exit."""
        while True:
            try:
                await command()
            except Exception as exc:
                if not (self._wait_for_redis and is_transient(exc)):
                    raise
                await asyncio.sleep(OUTAGE.failed(exc))
            else:
                OUTAGE.succeeded()
                return

    async def _listen_for_run_ends(self) -> None:
        """Subscribe before the first claim: the end of a run whose job this process
        holds then always reaches it."""
        assert self.redis is not None
        channels = [keys.run_ended_to(self.worker_id)]
        if any(executor.keeps_runs for executor in self.executors):
            channels.append(keys.RUN_ENDED)  # every run's end: any run may have left state
        self._run_ends = RunEnds(
            self.redis, channels, heard=self._run_ended, retry_s=self.settings.idle_poll_s
        )
        await self._until_redis_answers(self._run_ends.subscribe)

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
        self._upkeep = UpkeepTurn(
            self.worker_id,
            lease_s,
            reap_cadence(lease_s),
            on_taken=partial(_call_soon, loop, self._turn_taken.set),
        )
        self._renewer = LeaseRenewer(
            client,
            self.worker_id,
            lease_s,
            on_lapse=lambda why: loop.call_soon_threadsafe(self._lease_lost, why),
            rider=self._upkeep,
            holding=self._holding,
        )
        # The lease's client times out after a fifth of a lease (0.2 s by default), so
        # that a renewal fails in time to cancel jobs; a registration that outlasts it
        # is tried again rather than ending the start.
        renewer = self._renewer
        await self._until_redis_answers(lambda: asyncio.to_thread(renewer.register))
        self._leased = True
        self._renewer.start()

    def _holding(self) -> bool:
        """Whether a job runs here (read by the lease's renewer, from its thread)."""
        return any(worker.in_flight for worker in self._workers)

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
        """Re-deliver the jobs of workers whose lease lapsed (they died), at once, while
        it is this process's upkeep turn (`upkeep`)."""
        redis, upkeep = self.redis, self._upkeep
        assert redis is not None
        if upkeep is None:  # an embedded Redis: one process holds it, nobody else could reap
            return
        # Redis counts as steady while reapers pass at least this often; after a gap,
        # live workers get time to renew before anyone's jobs are re-delivered.
        # (Slower while no lease holds a job: `Cadence.after`.)
        cadence = reap_cadence(self.settings.lease_s)
        wait_s = cadence.every_s
        while True:
            await asyncio.sleep(wait_s)
            raise_if_cancel_requested()
            wait_s = cadence.every_s
            if not upkeep.held():
                # Not its turn: it waits for a renewal to take it (`on_taken`), not a pass.
                # (Cleared and checked with no await between: a set comes on this loop.)
                self._turn_taken.clear()
                if not upkeep.held():
                    await self._turn_taken.wait()
                    wait_s = 0.0  # taken: its pass at once
                continue
            # Its own jobs need no look while its lease is held (`reap_pass`).
            me = self.worker_id if self._lease_held() else ""
            seen = await OUTAGE.periodic_pass(
                partial(reap_pass, redis, cadence, me),
                failure=f"worker {self.worker_id}: reaping lapsed workers failed",
                log=log,
            )
            wait_s = cadence.after(seen)
            if seen is not None and seen.reaped:
                log.info("re-delivered %d job(s) of workers whose lease lapsed", seen.reaped)

    async def _redrive_forever(self) -> None:
        """Re-drive runs whose current step, calls without a run, and batches and their
        lines whose admission job was lost (a failover dropped it)."""
        redis = self.redis
        assert redis is not None
        if is_memory_url(self.redis_url):
            return  # one process holds the embedded Redis: no failover can drop a job
        after_s, limit = self.settings.redrive_after_s, self.settings.redrive_batch
        retention_s = self.settings.retention_s
        runs = Redriver(RunStore(redis, retention_s=retention_s), after_s=after_s, limit=limit)
        client = Client(redis=redis, settings=self.settings)
        sweepers: dict[str, Sweeper] = {
            "runs": runs,
            "calls": CallRedriver(
                CallStore(redis, retention_s=retention_s), after_s=after_s, limit=limit
            ),
            "batches": BatchRedriver(client, runs, after_s=after_s, limit=limit),
        }
        # A few passes per threshold: a lost job waits at most about 1⅓ thresholds.
        while True:
            await asyncio.sleep(after_s / 3)
            raise_if_cancel_requested()
            for what, sweeper in sweepers.items():
                swept = await OUTAGE.periodic_pass(
                    sweeper.sweep,
                    failure=f"worker {self.worker_id}: re-driving stuck {what} failed",
                    log=log,
                )
                if swept is not None and swept.redriven:
                    log.info("re-drove %d lost job(s) of %s", swept.redriven, what)

    # -- routing: each worker claims the jobs of the tools it serves -------------

    async def _tool_sets(self) -> dict[str, list[str]]:
        """The tools this worker serves, by the queue it announces them on."""
        sets: dict[str, list[str]] = {q: [] for q in self.queues if q != MODEL_QUEUE}
        for executor in self.executors:
            queue = executor.queue or self.tool_queue
            for ann in await executor.announcements(queue):
                sets.setdefault(ann.queue, []).append(registry_key(ann))
        # Its hooks too.
        for ann in hook_announcements(self.tool_queue):
            sets.setdefault(ann.queue, []).append(registry_key(ann))
        return {q: sorted(set(t)) for q, t in sets.items() if q in self.queues}

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
        """List what this worker serves, and publish it."""
        announced = await served_announcements(self.executors, self.tool_queue)
        if MODEL_QUEUE in self.queues:  # the endpoints its model steps can reach
            announced += endpoint_announcements(self.endpoint_policy.models.endpoints)
        self._announced = announced
        # What `agentq workers` lists: the tools, not providers or tool-less MCP servers.
        self.announcements = [a for a in self._announced if a.kind not in _NOT_TOOLS]
        await self._refresh()
        self.announced = True

    async def _refresh(self) -> None:
        """The heartbeat: this worker's record, its announcements (a tool stays live as
        long as a worker serving it beats) and its tool sets (which its claims read),
        written again each time, so a Redis that lost its data has them back within a
        beat."""
        assert self.redis is not None
        await RunStore(self.redis).announce(self._announced)
        for served in self._served.values():
            await publish_tool_set(self.redis, served)
        await listings.heartbeat(self.redis, self._record())
        if self._joined:  # the fleet's layout lives while its workers beat
            held = await layout_guard.claim(self.redis, self.layout)
            if held != self.layout and not self._mixed_warned:
                # Only a Redis that lost the key lets a newcomer of another layout in
                # (records gone too): nothing to undo from here, but the operator must know.
                self._mixed_warned = True
                log.warning(
                    "worker %s: a worker of state layout %d started beside this one (%d); "
                    "stop one of the two pools",
                    self.worker_id,
                    held,
                    self.layout,
                )

    async def _withdraw(self) -> None:
        """A stopping worker's tools stop being live at once, unless another live
        worker serves them too."""
        assert self.redis is not None
        others = [w for w in await listings.live_workers(self.redis) if w.id != self.worker_id]
        still = {key for w in others for key in w.serves}
        await RunStore(self.redis).withdraw(
            [k for k in sorted({registry_key(a) for a in self._announced}) if k not in still]
        )

    def _record(self) -> listings.WorkerRecord:
        return listings.WorkerRecord(
            id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=self.queues,
            tools=sorted({a.name for a in self.announcements}),
            serves=sorted({registry_key(a) for a in self._announced}),
            concurrency=self.settings.concurrency,
            started_at=self.started_at,
            jobs_in_flight=sum(worker.in_flight for worker in self._workers),
            layout=self.layout,
        )

    async def _run_ended(self, run_id: str) -> None:
        """A run whose job this process holds ended, or (for executors that keep state
        for runs) any run: abort its jobs here, and let executors drop what they keep
        for it (sandbox sessions)."""
        await self._abort_now(run_id)
        for executor in self.executors:
            try:
                await executor.release_run(run_id)
            except Exception as exc:  # one executor's trouble stops no other
                log.warning("releasing run %s: %s", run_id, exc)

    def _ended_by_a_job(self, run_id: str) -> None:
        """A job here ended the run (its transition's reply said so, in its own task):
        the run's end notice, which comes to this process because it holds that job, need
        not look the job's abort mark up (one round trip a run)."""
        task = asyncio.current_task()
        if task is None:
            return
        self._enders[run_id] = task
        while len(self._enders) > _ENDERS_KEPT:  # notices lost in an outage never pop theirs
            self._enders.popitem(last=False)

    async def _abort_now(self, run_id: str) -> None:
        """A run ended (cancelled, failed): if any of its jobs runs here, look up their
        abort marks now instead of at the next fallback poll (up to `idle_poll_s`); not
        for the job whose own transition ended it (told before the notice, most often)."""
        prefix = job_prefix(run_id)
        ender = self._enders.pop(run_id, None)
        for worker in self._workers:
            if any(
                job_id.startswith(prefix) and task is not ender
                for job_id, task in worker.job_tasks.items()
            ):
                try:
                    await worker._cancel_aborted_jobs()
                except Exception as exc:  # the fallback poll looks again
                    log.warning("checking aborts of run %s: %s", run_id, exc)

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(RELIST_EVERY_S)
            try:
                await self.announce()
            except Exception as exc:  # keep serving; the next round retries
                _upkeep_failed("tool announcement failed", exc)

    @property
    def running(self) -> bool:
        """Started, and no queue worker or background task has ended."""
        return bool(self._tasks) and not any(task.done() for task in self._tasks)

    async def _beat_forever(self) -> None:
        """Keep this process's record and announcements fresh (`agentq workers`, `agentq
        serve` list it; submit resolves against what live workers announce)."""
        while True:
            # At once when Redis comes back from an outage: it may have lost everything
            # (a restart without persistence), and submits would be refused meanwhile.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reconnected.wait(), listings.BEAT_EVERY_S)
            self._reconnected.clear()
            try:
                await self._refresh()
            except Exception as exc:  # keep serving; the next beat retries
                _upkeep_failed("worker record not refreshed", exc)
            else:
                # The record written: the one write an idle worker makes, so the end of
                # an outage in which Redis refused writes (full) is seen within a beat.
                OUTAGE.succeeded(wrote=True)

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
            task.add_done_callback(consume_outcome)
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
        self._stop_listening()
        if self._run_ends is not None:
            await self._run_ends.aclose()
        await self._leave()
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await listings.forget_worker(self.redis, self.worker_id)
                await self._withdraw()
                if self._joined:
                    await layout_guard.leave(self.redis, self.layout)
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
            await self.redis.delete(liveness_key(self.worker_id))
        except Exception as exc:
            log.warning("worker %s: leaving: %s", self.worker_id, exc)
        if self._renewer is not None:
            self._renewer.client.close()
