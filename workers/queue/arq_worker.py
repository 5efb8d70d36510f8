"""arq's worker, taking its jobs agentq's way: the one module that relies on arq's internals.

`WakeableWorker` subclasses `arq.worker.Worker` and replaces how jobs are taken (a
wake-up list and one Lua claim instead of arq's poll) and how they end (the end rides
with the job's last transition). Everything else of arq it keeps, and it relies on
these parts of arq 0.28 that arq does not document as public; the test
`test_arq_internals` fails loudly when an installed arq changes any of them:

- `Worker.__init__(functions=, queue_name=, poll_delay=, ...)`, and its attributes
  `pool`, `ctx`, `functions`, `max_jobs`, `job_counter`, `tasks`, `job_tasks`,
  `aborting_tasks`, `allow_abort_jobs`, `allow_pick_jobs`, `max_tries`, `on_startup`,
  `jobs_complete`, `jobs_failed`, `jobs_retried`, `main()`;
- `arq.worker.func` (a `Function` with `.coroutine`, `.max_tries`, `.timeout_s`) and
  `arq.worker.RetryJob`;
- `arq.jobs.deserialize_job_raw` and `SerializationError` (a job's payload layout);
- `arq.utils.timestamp_ms`;
- arq's key layout (`arq:job:`, `arq:in-progress:`, `arq:result:`, `arq:retry:`,
  `arq:abort`), written by agentq's Lua too (orchestrator/core/keys.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Iterable
from functools import cached_property, partial
from typing import Any

from arq import Retry, Worker
from arq.jobs import SerializationError, deserialize_job_raw
from arq.utils import timestamp_ms
from arq.worker import RetryJob
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from agentq.orchestrator.core import keys as state_keys
from agentq.orchestrator.core.envelopes import (
    queue_key,
)
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.redis.acks import acknowledged, pipeline_to
from agentq.orchestrator.redis.connect import (
    is_cluster,
)
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.workers.queue.claims import (
    JOB_RIDE,
    TAKE_RIDING,
    Claimed,
    ClaimLedger,
    Taker,
    ending,
)
from agentq.workers.queue.deadlines import Deadlines
from agentq.workers.queue.liveness import (
    ARQ_RETRY_PREFIX,
    OUTAGE,
    RETRY_KEEP_S,
)

log = logging.getLogger("agentq.worker")

# How long a worker's shutdown waits for its wake-up listener to take its cancel.
LISTENER_STOP_S = 2.0


def consume_outcome(task: asyncio.Task[Any]) -> None:
    """Retrieve a background task's outcome, so a late error is not logged as lost."""
    if not task.cancelled():
        task.exception()


# arq's own timeout only backstops ours: calls carry their deadlines, and a
# dead worker is found by its lapsed lease, not by this.
ARQ_FUNCTION_TIMEOUT_S = 6 * 3600

# How long a cancel's abort marker is kept for a job that has not started yet.
ABORT_KEEP_MS = 60_000
# A job whose in-progress key outlives every worker record (lost by a crash of
# Redis itself) is freed after this long anyway.
BACKSTOP_MS = ARQ_FUNCTION_TIMEOUT_S * 1000
# How often a worker looks for jobs it holds from claims whose reply was lost: at every
# chores pass for this long after a claim call failed, and this often otherwise (a lost
# reply can also come from a request a broken network delivers late).
_GIVE_BACK_AFTER_FAILURE_S = 30.0
_GIVE_BACK_EVERY_S = 2.0

# The claim loops of each worker process (by its worker id) that wait behind a BLPOP, by
# the wake-up list they wait on (one partition on one Redis: `_claim_forever`). A job's end
# hands the job its last transition enqueues to the loop that would wake for it: the
# transition pushes no token for it (enqueue.lua: `rider_wake`) and a claim for that loop
# rides in the same round trip (`_ride`), so that hop costs no LPUSH and no BLPOP.
_SLEEPERS: dict[str, dict[str, WakeableWorker]] = {}


class WakeableWorker(Worker):
    """arq's worker, with agentq's claim and end-of-job path (workers/queue/claims.py).

    One loop claims: it waits on the queue's wake-up list and claims up to its free
    slots in the same round trip (a pipeline of BLPOP and TAKE), and goes on claiming
    while ready jobs are left behind. Each claimed job arrives with its payload and its
    delivery count, so running it costs no round trip of arq's; when it ends, the same
    TAKE call that ends it claims the jobs its freed slot can take, and the job its last
    transition hands on to a queue whose claim loop here waits is claimed for that loop
    in the same round trip, with no wake-up token (`_HandOff`). Chores (the abort
    set's fallback check, arq's health record) run on their own timer.
    """

    def __init__(
        self,
        *args: Any,
        queue: str,
        idle_poll_s: float,
        worker_id: str,
        leased: Callable[[], bool] = lambda: True,
        tools: Iterable[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, queue_name=queue_key(queue), poll_delay=idle_poll_s, **kwargs)
        self.idle_poll_s = idle_poll_s
        self.worker_id = worker_id
        # One taker per partition of the queue (core/keys.py): each touches one slot.
        self.takers = [
            Taker(self.pool, worker_id, queue, p, BACKSTOP_MS, leased, tools)
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
        self._claims = ClaimLedger()
        # The claim loop's BLPOP+TAKE is in flight: any ready work wakes it (a token is a
        # hint of ready work), so a job's end claims nothing itself (workers/queue/claims.py).
        self._armed = False
        # While armed: whether it kept a free slot out of its waiting claim for a job's end
        # to hand it a job (`_hand_off_to`).
        self._spare = False
        # Jobs handed to it that way: the slot of one that ends while it still waits is
        # kept back again.
        self._handed: set[str] = set()
        self._give_back_due = 0.0  # monotonic: when the chores next look for lost claims
        self._give_back_until = 0.0  # ... and until when at every pass
        self._next_abort_prune_ms = 0
        self._context = contextvars.copy_context()

    async def main(self) -> None:
        # arq's main, less its INFO call (the embedded Redis has none) and its polling.
        self.ctx["redis"] = self.pool
        self._context = contextvars.copy_context()
        if self.on_startup:
            await self.on_startup(self.ctx)
        chores = asyncio.create_task(self._chores_forever())
        sleepers = _SLEEPERS.setdefault(self.worker_id, {})
        if len(self.takers) == 1 and not is_cluster(self.pool):
            sleepers[self.wake_key] = self
            # A job's end hands its next job to this loop in a riding TAKE (`_HandOff`):
            # loaded now, the first hand-off finds it (else that one costs a token).
            await self._load_riding_take()
        try:
            await self._claim_forever()
        finally:
            self.allow_pick_jobs = False  # jobs that end from now on claim nothing
            if sleepers.get(self.wake_key) is self:
                del sleepers[self.wake_key]
            if not sleepers:
                _SLEEPERS.pop(self.worker_id, None)
            chores.cancel()
            # A cancel that lands while redis-py's read is timing out can be lost in
            # its connection (seen on Python 3.11: the read then waits on a reply that
            # never comes). Bounded, so shutdown never hangs on it: closing the pool
            # ends that read, and the callback takes its outcome.
            chores.add_done_callback(consume_outcome)
            await asyncio.wait({chores}, timeout=LISTENER_STOP_S)

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
                listener.add_done_callback(consume_outcome)
            await asyncio.wait(set(listeners), timeout=LISTENER_STOP_S)

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
        # A claim that waits for a token keeps one free slot back: a job's end here may
        # hand it the job its transition enqueues (`_hand_off_to`), with no token.
        spare = block and free > 1 and taker is self.taker
        if spare:
            free -= 1
        self.job_counter += free  # reserved while the claim is in flight
        claimed: list[Claimed] = []
        claim = self._claims.open()
        try:
            args = taker.args(free, claim=claim)
            if block:
                self._armed, self._spare = True, spare
                more, claimed = await taker.wait_and_take(max(1, int(self.idle_poll_s)), args)
            else:
                more, claimed = await taker.take(args)
        except BaseException:
            self._claim_failed()
            raise
        finally:
            self._armed = self._spare = False
            self._claims.settle(claim)
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
            work = self._run(job) if run else self._end(job.job_id, "release", 0, keyed=job.keyed)
            # The worker's own context: a job claimed in another job's round trip must
            # not inherit that job's (its trace span, its rider).
            task = self.loop.create_task(work, context=self._context.copy())
            self.tasks[job.job_id] = task
            task.add_done_callback(partial(self._ended, job.job_id))

    @property
    def in_flight(self) -> int:
        """The jobs running now (claimed and started, not yet ended)."""
        return len(self.tasks)

    def _ended(self, job_id: str, task: asyncio.Task[None]) -> None:
        if self.tasks.get(job_id) is task:
            del self.tasks[job_id]
        self.job_counter -= 1
        if job_id in self._handed:
            self._handed.discard(job_id)
            # Its slot was the one the waiting claim kept back (not in its reservation).
            self._spare = self._spare or self._armed
        if self.job_counter < self.max_jobs:
            self._capacity.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("worker %s: ending job %s failed", self.worker_id, job_id, exc_info=exc)

    async def _chores_forever(self) -> None:
        """The fallback check for cancelled jobs (a run's end usually triggers it at once,
        see `WorkerRuntime._abort_now`) and arq's health record, every `idle_poll_s`; while
        no job runs here, not before the look for lost claims falls due (the only chore
        with work then: an idle worker wakes half as often)."""
        while True:
            raise_if_cancel_requested()
            wait_s = self.idle_poll_s
            if not self.job_tasks:
                wait_s = max(wait_s, self._give_back_due - time.monotonic())
            await asyncio.sleep(wait_s)
            try:
                if self.allow_abort_jobs:
                    await self._cancel_aborted_jobs()
                await self._give_back_lost_claims()
                await self.heart_beat()
            except Exception as exc:
                if not is_transient(exc):  # the next round looks again
                    log.exception("worker %s: checking for cancelled jobs", self.worker_id)
                    continue
                await asyncio.sleep(self._outage.failed(exc))

    def _claim_failed(self) -> None:
        """A claim call raised: Redis may still run it (or have run it) for nobody."""
        now = time.monotonic()
        self._give_back_until = now + _GIVE_BACK_AFTER_FAILURE_S
        self._give_back_due = now

    async def _give_back_lost_claims(self) -> None:
        """Release jobs held here by claims whose reply never came (workers/queue/claims.py)."""
        now = time.monotonic()
        if now < self._give_back_due:
            return
        every = self.idle_poll_s if now < self._give_back_until else _GIVE_BACK_EVERY_S
        settled = self._claims.settled_through()
        running = list(self.tasks)
        given = 0
        for taker in self.takers:
            given += await taker.give_back(settled, running)
        self._give_back_due = now + every
        if given:
            log.warning(
                "worker %s: gave back %d job(s) whose claim's reply was lost", self.worker_id, given
            )

    # -- running a job: arq's run_job, fed by the claim ------------------------------

    async def _run(self, job: Claimed) -> None:
        how, defer_ms, claim = "release", 0, False
        end = _JobEnd(self, job.job_id, job.keyed)
        try:
            how, defer_ms = await self._execute(job, end)
            if end.ended:  # in its last transition's round trip
                return
            # A job cancelled by a stop or a lapsed lease hands its slot to nobody.
            claim = how == "done" or defer_ms > 0
        except Exception as exc:
            if not is_transient(exc):
                log.exception("job %s failed in the worker", job.job_id)
                how = "done"
        finally:
            if not end.ended:
                # Shielded like arq's finish_job: a cancelled run still ends its job.
                await asyncio.shield(
                    self._end(job.job_id, how, defer_ms, claim=claim, keyed=job.keyed)
                )

    @cached_property
    def _deadlines(self) -> Deadlines:
        """Its running jobs' deadlines, on one timer (`_execute`)."""
        return Deadlines(self.loop)

    async def _execute(self, job: Claimed, end: _JobEnd) -> tuple[str, int]:
        """Run one claimed job (arq's run_job, less its fetch): how it ends ('done' or
        'release') and, for a release, how much later it is due again (ms)."""
        job_id = job.job_id
        try:
            function_name, args, kwargs, enqueue_try, _ = deserialize_job_raw(
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
            # The counter holds the deliveries before this one (a death counts it).
            await self.pool.setex(ARQ_RETRY_PREFIX + job_id, RETRY_KEEP_S, str(job_try - 1))
        max_tries = self.max_tries if function.max_tries is None else function.max_tries
        if job_try > max_tries:
            log.warning("job %s: max retries %d exceeded", job_id, max_tries)
            self.jobs_failed += 1
            return "done", 0
        # arq's ctx less its `enqueue_time` (a datetime made per job, which no job of
        # agentq's reads).
        ctx = {**self.ctx, "job_id": job_id, "job_try": job_try, "score": job.score}
        if self.on_job_start:
            await self.on_job_start(ctx)
        timeout_s = self.job_timeout_s if function.timeout_s is None else function.timeout_s
        debug = log.isEnabledFor(logging.DEBUG)
        started_ms = timestamp_ms() if debug else 0
        how, defer_ms = "done", 0
        # The job hands its last transition to `end` (claims.job_ride): a cluster client
        # pipelines no EVALSHA, so there a job's end is its own round trip.
        if not is_cluster(self.pool):
            ctx[JOB_RIDE] = end
        # The job runs in this task, not in a task of its own (one task and one event
        # loop turn less per job), so a cancel of the job (`_cancel_aborted_jobs`,
        # `cancel_running`) is this task's: it is taken back below, the job then ended
        # as it always was. Its deadline (a backstop of hours) is an entry on the
        # worker's one deadline timer (workers/queue/deadlines.py), not an
        # `asyncio.timeout` around the job nor a timer of its own.
        task = asyncio.current_task()
        assert task is not None  # (a coroutine run by the event loop, in `_start`'s task)
        deadline = None if timeout_s is None else self._deadlines.add(task, timeout_s)
        self.job_tasks[job_id] = task
        try:
            await function.coroutine(ctx, *args, **kwargs)
        except Retry as exc:
            how = "release"
            if exc.defer_score:
                defer_ms = exc.defer_score
            self.jobs_retried += 1
        except asyncio.CancelledError:
            if task.uncancel() > 0:
                raise  # cancelled once more (this task stopped as well): the job is released
            if deadline is not None and deadline.expired:  # as arq's timeout fails a job
                log.error("job %s (%s) timed out after %g s", job_id, function_name, timeout_s)
                self.jobs_failed += 1
            elif job_id in self.aborting_tasks:  # its run was cancelled
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
            if deadline is not None:
                self._deadlines.remove(deadline)
            # A job whose lease lapsed here can be delivered here again while this run
            # still unwinds: the entry is then the newer run's, and is its to remove.
            if self.job_tasks.get(job_id) is task:
                del self.job_tasks[job_id]
        if debug:
            log.debug(
                "job %s (%s) %s in %d ms", job_id, function_name, how, timestamp_ms() - started_ms
            )
        if self.on_job_end:
            await self.on_job_end(ctx)
        return how, defer_ms

    def _slots_to_claim(self) -> int:
        """How many jobs a job's end claims: its own freed slot and any other free one
        (its task still counts its slot until it returns, so it hands it over). None
        while the claim loop waits on the wake-up list: ready work wakes that wait, so
        an end that looked too would mostly find the queue empty (the next job of a run
        goes to another queue) or take what the woken claim would."""
        if not self.allow_pick_jobs or self._armed:
            return 0
        return self.max_jobs - self.job_counter + 1

    def _hand_off_to(self, jobs: Iterable[QueuedJob]) -> WakeableWorker | None:
        """The claim loop of this process that waits for a token of one of these jobs'
        queues with a slot kept for a hand-off (`_claim`), or None: a job's end then
        claims that job for it in the same round trip (`_ride`)."""
        sleepers = _SLEEPERS.get(self.worker_id)
        if not sleepers:
            return None
        for job in jobs:
            sleeper = sleepers.get(job.wake_key)
            if job.timers_key or sleeper is None:
                continue  # a timer wakes nobody; a queue no loop here waits on
            if (
                sleeper._armed
                and sleeper._spare
                and sleeper.allow_pick_jobs
                and sleeper.taker.leased()
            ):
                return sleeper  # (a claim without the lease takes nothing: a token then)
        return None

    async def _end(
        self, job_id: str, how: str, defer_ms: int, *, claim: bool = False, keyed: bool = True
    ) -> None:
        """Apply a job's end, retrying through an outage: a live worker's job must not
        stay held by it, nor be counted as a death, because Redis blinked. With `claim`,
        the same call claims what the job's freed slot (and any other free one) can take."""
        outage = OUTAGE
        taker = self.taker_of(job_id)
        while True:
            n = self._slots_to_claim() if claim else 0
            self.job_counter += n
            claimed: list[Claimed] = []
            number = self._claims.open()
            try:
                args = taker.args(n, job_id, how, defer_ms, claim=number, keyed=keyed)
                _, claimed = await taker.take(args)
            except Exception as exc:
                self._claim_failed()
                if not is_transient(exc):
                    raise
                await asyncio.sleep(outage.failed(exc))
                claim = False
                continue
            finally:
                self._claims.settle(number)
                self.job_counter -= n - len(claimed)
            outage.succeeded()
            self._start(claimed, run=self.allow_pick_jobs)
            return

    async def _ride(
        self, end: _JobEnd, script: AsyncScript, keys: list[str], args: list[Any]
    ) -> Any:
        """Send a job's last transition and, pipelined behind it, the TAKE that ends the
        job and claims what its slot (and any other free one) can take, and the claim
        that takes the job handed to a waiting claim loop of this process (`end.hand_off`:
        the transition pushed no token for it). An end that claims nothing for itself
        goes inside the transition's own script (`claims.ending`: a job without a
        concurrency key), else in that claim's call (`_HandOff.carries_end`)."""
        n = self._slots_to_claim()
        self.job_counter += n
        claimed: list[Claimed] = []
        unacked: InfrastructureError | None = None
        claim = self._claims.open()
        hand = _HandOff(end.hand_off)
        # The job's partition: the same slot as its run's transition.
        taker = self.taker_of(end.job_id)
        # (the transition's own script when its end goes elsewhere)
        sent = _Sent(script, keys, args)
        folded = n == 0 and not end.keyed and sent.fold(taker, end.job_id)
        try:
            # A job's end that claims nothing for itself rides in the hand-off's claim
            # (one TAKE call instead of two), when both touch the same jobs hash.
            carried = n == 0 and not folded and hand.carries_end(taker)
            async with pipeline_to(self.pool, keys[0]) as (pipe, acks):
                pipe.evalsha(sent.sha, len(sent.keys), *sent.keys, *sent.args)
                if folded:
                    hand.queue(pipe)
                elif carried:
                    hand.queue(pipe, end_of=(taker, end.job_id, end.keyed))
                else:
                    take = taker.args(
                        n, end.job_id, "done", 0, riding=True, claim=claim, keyed=end.keyed
                    )
                    pipe.evalsha(taker.riding_sha, len(taker.keys), *taker.keys, *take)
                    hand.queue(pipe)
                # Both count only once the replicas have them: the WAIT rides along too.
                waited, role = acks.add(pipe, keys[0])
                raw, *rest = await pipe.execute(raise_on_error=False)
            if folded:
                took = raw  # (the end's outcome is the transition's)
                handed, acked = hand.split(rest)
            elif carried:
                took = handed = rest[0]
                acked = rest[1:]
            else:
                took, *rest = rest
                handed, acked = hand.split(rest)
            try:
                acks.check(waited, role, [raw, *([] if folded else [took]), *acked])
            except InfrastructureError as exc:
                # Neither the transition nor the claim is safe yet: the transition fails
                # as on any Redis error (its job retries it), and the jobs claimed are
                # given back rather than started.
                unacked = exc
            if not isinstance(took, BaseException) and unacked is None:
                end.ended = True
                if not carried and not folded:  # (a carried end's reply is the claim's)
                    _, claimed = taker.taken(took)
            elif not folded:
                self._claim_failed()
                if isinstance(took, NoScriptError):
                    # Redis lost its scripts (a restart): the job ends alone this time,
                    # and the next job's end rides again.
                    await self._load_riding_take()
            await hand.settle(handed, unacked is None)
        except BaseException:
            self._claim_failed()
            hand.failed()
            raise
        finally:
            self._claims.settle(claim)
            self.job_counter -= n - len(claimed)
            hand.close()
        self._start(claimed)
        if isinstance(raw, NoScriptError):
            # Redis lost its scripts (a restart), or never had this one: the transition,
            # alone, loads it (with the job's end when that went inside it). It pushes no
            # token for a job it hands off, and the claim for it ran before it: the
            # token comes from here.
            alone = await acknowledged(self.pool, sent.sha, sent.source, sent.keys, sent.args)
            end.ended = end.ended or folded
            await hand.wake()
            return alone
        if isinstance(raw, BaseException):
            raise raw
        if unacked is not None:
            raise unacked
        return raw

    async def _load_riding_take(self) -> None:
        try:
            await self.pool.script_load(TAKE_RIDING)
        except Exception as exc:  # only a later ride is at stake: it tries again
            if not is_transient(exc):
                log.exception("worker %s: loading the riding claim failed", self.worker_id)

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

    def __init__(self, worker: WakeableWorker, job_id: str, keyed: bool) -> None:
        self.worker = worker
        self.job_id = job_id
        self.keyed = keyed
        self.ended = False
        self._used = False
        # The claim loop its transition hands its next job to (`takes_from`).
        self.hand_off: WakeableWorker | None = None

    def takes_from(self, jobs: Iterable[QueuedJob]) -> str | None:
        if self._used:  # only the job's end rides: nothing is claimed with what follows
            return None
        self.hand_off = self.worker._hand_off_to(jobs)
        return None if self.hand_off is None else self.hand_off.wake_key

    async def __call__(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        if self._used:  # the job's end went already: what comes after goes alone
            return await acknowledged(self.worker.pool, script.sha, script.script, keys, args)
        self._used = True
        return await self.worker._ride(self, script, keys, args)


class _Sent:
    """The script a job's last transition goes in: its own, or the same with the job's
    end inside it (`fold`), and the keys and arguments for it."""

    def __init__(self, script: AsyncScript, keys: list[str], args: list[Any]) -> None:
        self.sha: str = script.sha
        self.source: str | bytes | memoryview = script.script
        self.keys = keys
        self.args = args

    def fold(self, taker: Taker, job_id: str) -> bool:
        """Send the job's done end inside the transition's script (claims.ending), when
        that script can carry it; whether it does."""
        source = ending(self.source) if isinstance(self.source, str) else None
        if source is None:
            return False
        end_keys, end_args = taker.end_in(job_id)
        self.sha, self.source = scripts.sha(source), source
        self.keys, self.args = [*self.keys, *end_keys], [*self.args, *end_args]
        return True


class _HandOff:
    """A job's end claiming, for a claim loop of its process that waits on a wake-up
    list, the job its transition enqueued there without a token (`WakeableWorker._ride`).

    The loop's spare slot is taken as the pipeline is built; if it is gone by then, the
    pipeline pushes the token the transition left out instead. Whatever goes wrong with
    the claim pushes that token too (or leaves the job to the loop's fallback poll, at
    most `idle_poll_s` later, when Redis cannot be reached): a hand-off never strands
    a job."""

    def __init__(self, sleeper: WakeableWorker | None) -> None:
        self.sleeper = sleeper
        self.reserved = False
        self.claim = 0
        self.took = 0  # jobs its claim took
        if sleeper is not None and sleeper._armed and sleeper._spare and sleeper.allow_pick_jobs:
            sleeper._spare = False
            sleeper.job_counter += 1
            self.reserved = True
            self.claim = sleeper._claims.open()

    def carries_end(self, ender: Taker) -> bool:
        """Whether the claim can end, in the same TAKE call, a job of `ender`'s queue:
        the loop's slot is reserved and both keep their leases in one jobs hash (the
        same worker and partition; TAKE's KEYS[9] names the ended job's queue)."""
        return (
            self.sleeper is not None
            and self.reserved
            and self.sleeper.taker.keys[2] == ender.keys[2]
        )

    def queue(self, pipe: Any, end_of: tuple[Taker, str, bool] | None = None) -> None:
        """The claim (or the token), and with `end_of` (`carries_end`: the ender's taker,
        the job, whether its lease names a concurrency key) the job's end in the same
        call: a riding TAKE then, which a full Redis refuses whole as the transition."""
        sleeper = self.sleeper
        if sleeper is None:
            return
        taker = sleeper.taker
        if end_of is not None:
            ender, job_id, keyed = end_of
            args = taker.args(1, job_id, "done", 0, riding=True, claim=self.claim, keyed=keyed)
            keys = [*taker.keys, ender.queue_key]
            pipe.evalsha(taker.riding_sha, len(keys), *keys, *args, "1")
        elif self.reserved:
            # Behind a token, as far as the claim's tokens go: it takes the job the
            # transition pushed none for, and leaves the others' tokens be.
            args = taker.args(1, claim=self.claim)
            pipe.evalsha(taker.sha, len(taker.keys), *taker.keys, *args, "1")
        else:
            pipe.lpush(sleeper.wake_key, "1")

    def split(self, rest: list[Any]) -> tuple[Any, list[Any]]:
        """(the hand-off's reply, the replies after it) of the pipeline's last replies."""
        if self.sleeper is None:
            return None, rest
        return rest[0], rest[1:]

    async def settle(self, reply: Any, acked: bool) -> None:
        """Start the job claimed (when the replicas have the claim), or wake the loop."""
        sleeper = self.sleeper
        if sleeper is None or not self.reserved:
            return
        if isinstance(reply, BaseException) or not acked:
            sleeper._claim_failed()
            await self.wake()
            return
        _, claimed = sleeper.taker.taken(reply)
        self.took = len(claimed)
        sleeper.job_counter += len(claimed)  # _start's slots, counted; close() frees the spare
        sleeper._handed.update(job.job_id for job in claimed)
        sleeper._start(claimed, run=sleeper.allow_pick_jobs)

    def failed(self) -> None:
        if self.sleeper is not None and self.reserved:
            self.sleeper._claim_failed()

    def close(self) -> None:
        """Free the spare slot (a claimed job holds its own, counted in `settle`)."""
        sleeper = self.sleeper
        if sleeper is None or not self.reserved:
            return
        self.reserved = False
        sleeper._claims.settle(self.claim)
        sleeper.job_counter -= 1
        if not self.took:
            # Nothing to hand (a result before the step's last one enqueues no job): the
            # slot is kept back again while the loop still waits.
            sleeper._spare = sleeper._spare or sleeper._armed
        if sleeper.job_counter < sleeper.max_jobs:
            sleeper._capacity.set()

    async def wake(self) -> None:
        """Push the token the transition left out for the loop."""
        sleeper = self.sleeper
        if sleeper is None:
            return
        try:
            await sleeper.pool.lpush(sleeper.wake_key, "1")  # type: ignore[misc]
        except Exception as exc:  # its fallback poll claims it
            if not is_transient(exc):
                log.exception("worker %s: waking its claim loop failed", sleeper.worker_id)
