"""Tool calls leased to services outside the fleet (remote tools), one lease per call.

A remote service is a worker like any other, seen from Redis: each lease is a worker
id with its own liveness key (`aq:worker:LEASE`, TTL = the lease), which claims one
tool-call job with the workers' own claim script, so the in-progress key names the
lease. A heartbeat renews the key with the workers' renewal script; a lease that
lapses is re-delivered by any reaper (workers', or `agentq serve`'s) exactly like a
dead worker's job, and counted as a delivery toward AGENTQ_MAX_DELIVERIES. The liveness
key holds the lease's holder (the API key that took it, or a pushed call's queue), and
only that holder heartbeats, reports progress or records a result: a lease id reaching
anyone else is worth nothing (to another holder a lease is unknown, live or ended). How a
lease ended (answered, timed out, or lapsed) is remembered a while for its holder only
(`lease_done`). The call
is claimed, read and its result recorded through its home (orchestrator/calls/home.py),
as on a worker: results are write-once, and a result for a lapsed lease is refused. A
call without a run (a `call` job, whose run id is the call's id) is leased the same
way; only its home is the call's own hash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from redis.asyncio import Redis

from agentq.orchestrator.calls.home import CallHome, call_home
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import (
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    JobEnvelope,
    JobKind,
    deserialize,
)
from agentq.orchestrator.core.fairness import INDEXED_OFFSET_MS
from agentq.orchestrator.core.keys import lease_deadline, lease_done
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.run_ids import call_idempotency_key
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import bounded_result, progress_value
from agentq.orchestrator.loop.plan import error_result
from agentq.orchestrator.redis.connect import is_cluster
from agentq.orchestrator.runs.result_guards import guarded_result
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.queue.arq_worker import BACKSTOP_MS
from agentq.workers.queue.claims import (
    CLAIM_ONE,
    Taker,
    lease_wake_key,
    record_prefix,
)
from agentq.workers.queue.liveness import (
    ARQ_RETRY_PREFIX,
    OUTAGE,
    RENEW,
    holders_key,
    jobs_key,
    liveness_key,
    reap_cadence,
    reap_lapsed,
)

log = logging.getLogger("agentq.remote")

LEASE_PREFIX = "lease-"
# The job functions a remote queue holds: a run's tool call, and a call without a run.
_LEASABLE = frozenset({JobKind.TOOL_CALL, JobKind.CALL})
# How many due jobs one look at a queue reads.
_READ_LIMIT = 1000
# The longest one shared wake-up read waits (the long-polls' fallback poll).
_WAKE_READ_S = 1.0
# A delivery counter outlives any lease (arq keeps its own for a day too).
_RETRY_KEEP_S = 24 * 3600


class LeaseGone(Exception):
    """The lease holds nothing: one of the subclasses says why."""


class LeaseUnknown(LeaseGone):
    """No lease of this holder has this id: none ever had it, another holder's has, or
    its end was forgotten. Which, only its holder is told."""


class LeaseLapsed(LeaseGone):
    """The holder's lease lapsed unrenewed: its call went back to its queue."""


class CallTimedOut(LeaseGone):
    """The call's deadline passed while leased: a timeout error was recorded for it."""


class Holder(Protocol):
    """Who takes leases and acts on them (agentq serve's API keys, a queue's pusher)."""

    @property
    def holder_id(self) -> str:
        """Stored with each lease it takes."""
        ...

    def holds(self, holder_id: str) -> bool:
        """Whether it may act on a lease stored with this holder id."""
        ...


@dataclass(frozen=True)
class QueueHolder:
    """A pushed call's lease: held by its queue (`queue:NAME`), so that a receiver that
    keeps it (202) answers with a key of that queue."""

    queue: str

    @property
    def holder_id(self) -> str:
        return f"queue:{self.queue}"

    def holds(self, holder_id: str) -> bool:
        return holder_id == self.holder_id


class LeaseAnswered(LeaseGone):
    """The lease ended with its call's result recorded: the call is done."""


# How long an ended lease remembers how it ended (for a late or repeated request).
_DONE_KEEP_S = 3600
_ANSWERED = "answered"
_TIMED_OUT = "timed-out"
# What a started lease remembers until it ends otherwise: if its liveness key expires
# first, it lapsed (a reaper gives its call back to the queue and writes nothing).
_LAPSED = "lapsed"


def _ended(how: str, holder_id: str) -> str:
    """What an ended lease remembers: how it ended, and who held it (told only them)."""
    return f"{how}\n{holder_id}"


def _gone(lease_id: str, ended: bytes | str | None, holder: Holder) -> LeaseGone:
    """Why a lease holds nothing: it ended with a result, at its call's deadline, or it
    lapsed, as its holder is told; to anyone else it is unknown."""
    text = ended.decode() if isinstance(ended, bytes) else ended or ""
    how, _, holder_id = text.partition("\n")
    if not holder_id or not holder.holds(holder_id):
        return LeaseUnknown(lease_id)
    if how == _ANSWERED:
        return LeaseAnswered(lease_id)
    if how == _TIMED_OUT:
        return CallTimedOut(lease_id)
    return LeaseLapsed(lease_id)


@dataclass(frozen=True)
class Lease:
    """One call leased to a remote service, as the lease endpoint returns it."""

    id: str
    deadline_at: float  # unix seconds: heartbeat or report before then
    run_id: str
    step: int
    call_id: str
    tool: str
    input: Any
    attempt: int
    call_deadline_at: float  # the call's own timeout
    tenant: str  # whose run (or call) it is

    @property
    def idempotency_key(self) -> str:
        """What a `@tool`'s `ctx.idempotency_key` would be: the same for every lease of
        the call."""
        return call_idempotency_key(self.run_id, self.step, self.call_id)

    def document(self) -> dict[str, Any]:
        return {
            "lease": {"id": self.id, "deadline_at": self.deadline_at},
            "call": {
                "run_id": self.run_id,
                "step": self.step,
                "call_id": self.call_id,
                "tool": self.tool,
                "input": self.input,
                "attempt": self.attempt,
                "idempotency_key": self.idempotency_key,
                "deadline_at": self.call_deadline_at,
                "tenant": self.tenant,
            },
        }


@dataclass(frozen=True)
class _Held:
    job_id: str
    queue: str
    envelope: JobEnvelope
    holder_id: str


class RemoteLeases:
    """Lease, heartbeat, progress and result for calls on remote tools' queues."""

    def __init__(
        self,
        redis: Redis,
        store: RunStore,
        *,
        max_deliveries: int,
        max_output_bytes: int,
    ) -> None:
        self.redis = redis
        self.store = store
        self.max_deliveries = max_deliveries
        self.max_output_bytes = max_output_bytes
        self._claim = redis.register_script(CLAIM_ONE)
        self._renew = redis.register_script(RENEW)
        self.calls = CallStore(redis, retention_s=store.retention_s)
        self._wakes: dict[str, asyncio.Future[None]] = {}

    # -- leasing -----------------------------------------------------------------

    async def lease(
        self, queue: str, max_calls: int, wait_s: float, lease_s: float, *, holder: Holder
    ) -> list[Lease]:
        """Up to `max_calls` calls due on `queue`, waiting up to `wait_s` for one, each
        leased to `holder`."""
        until = time.monotonic() + wait_s
        leases: list[Lease] = []
        while True:
            for job_id in await self._free(queue):
                if len(leases) >= max_calls:
                    break
                lease = await self._take(queue, job_id, lease_s, holder.holder_id)
                if lease is not None:
                    leases.append(lease)
            left_s = until - time.monotonic()
            if leases or left_s <= 0:
                return leases
            # Woken by an enqueue; the timeout is the fallback poll (deferred retries).
            # Redis takes a fractional timeout; redis-py types it as whole seconds.
            wait: Any = min(1.0, max(left_s, 0.01))
            await self._woken(queue, wait)

    async def _woken(self, queue: str, wait: Any) -> None:
        """Wait for a wake-up on `queue`, at most `wait` seconds. Every long-poll of this
        process on a queue shares one read (and one connection), which wakes them all."""
        shared = self._wakes.get(queue)
        if shared is None or shared.done():
            shared = asyncio.ensure_future(self._read_wake(queue, _WAKE_READ_S))
            self._wakes[queue] = shared
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(shared), wait)

    async def _read_wake(self, queue: str, wait: Any) -> None:
        """Wait for a wake-up on any partition of `queue` (a cluster's BLPOP takes one
        slot's keys: one read per partition there, the first to return ends the wait)."""
        lists = [keys.wake(queue, p) for p in keys.partitions()]
        if not is_cluster(self.redis):
            await self.redis.blpop(lists, timeout=wait)  # type: ignore[misc]
            return
        reads = [
            asyncio.ensure_future(self.redis.blpop([key], timeout=wait))  # type: ignore[arg-type]
            for key in lists
        ]
        try:
            await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for read in reads:
                read.cancel()
            await asyncio.gather(*reads, return_exceptions=True)

    async def _free(self, queue: str) -> list[str]:
        """Jobs due on `queue` and not held by their concurrency key (a claimed job
        leaves the ready range, so nobody holds these; the claim itself refuses one taken
        or held meanwhile)."""
        now_ms = int(time.time() * 1000)
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in keys.partitions():
                pipe.zrangebyscore(keys.queue(queue, p), "-inf", now_ms, start=0, num=_READ_LIMIT)
                pipe.zrange(keys.held(queue, p), 0, -1)
            reads = await pipe.execute()
        held = {raw for ids in reads[1::2] for raw in ids}
        return [
            raw.decode() if isinstance(raw, bytes) else str(raw)
            for ids in reads[0::2]
            for raw in ids
            if raw not in held
        ]

    async def _take(self, queue: str, job_id: str, lease_s: float, holder_id: str) -> Lease | None:
        lease_id = LEASE_PREFIX + uuid.uuid4().hex
        lease_ms = max(1, int(lease_s * 1000))
        await self.redis.set(liveness_key(lease_id), holder_id, px=lease_ms)
        p = keys.job_partition(job_id)
        score = await self._claim(
            keys=[
                ARQ_IN_PROGRESS_PREFIX + job_id,
                keys.queue(queue, p),
                jobs_key(lease_id, p),
                holders_key(p),
            ],
            args=[
                job_id,
                int(time.time() * 1000),
                lease_id,
                record_prefix(keys.queue(queue, p), keys.wake(queue, p)),
                BACKSTOP_MS,
                INDEXED_OFFSET_MS,
                ARQ_JOB_PREFIX,
            ],
        )
        if score is None:  # leased by another, finished, deferred, or its key is full
            await self.redis.delete(liveness_key(lease_id))
            return None
        held = await self._job(job_id, queue, holder_id)
        if held is None:
            await self._end(lease_id, job_id, queue)
            return None
        return await self._start(lease_id, held, lease_s)

    async def _start(self, lease_id: str, held: _Held, lease_s: float) -> Lease | None:
        env = held.envelope
        retry_key = ARQ_RETRY_PREFIX + held.job_id
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(retry_key)
            pipe.expire(retry_key, _RETRY_KEEP_S)
            attempt = int((await pipe.execute())[0])
        home = self._home(held)
        claimed = await home.claim(attempt)
        if claimed is None:
            await self._end(lease_id, held.job_id, held.queue)
            return None
        call, tool = claimed.call, claimed.tool
        if attempt > self.max_deliveries:
            crashed = error_result(
                call.id,
                call.name,
                f"the call to {call.name!r} was leased {self.max_deliveries} times "
                "and each lease lapsed",
                ToolErrorKind.EXECUTION,
            )
            await self._record(held, crashed)
            await self._end(lease_id, held.job_id, held.queue)
            return None
        timeout_s = tool.timeout_s if tool is not None else env.timeout_s or 60.0
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(
                lease_deadline(lease_id),
                int((now + timeout_s) * 1000),
                px=int((timeout_s + lease_s) * 1000) + 60_000,
            )
            # Unless it ends otherwise (`_end`), the lease lapsed: told to its holder only.
            pipe.set(
                lease_done(lease_id),
                _ended(_LAPSED, held.holder_id),
                ex=int(lease_s) + _DONE_KEEP_S,
            )
            await pipe.execute()
        return Lease(
            id=lease_id,
            deadline_at=now + lease_s,
            run_id=env.run_id,
            step=env.step,
            call_id=call.id,
            tool=call.name,
            input=call.input,
            attempt=attempt,
            call_deadline_at=now + timeout_s,
            tenant=(await home.owner()).tenant,
        )

    async def _job(self, job_id: str, queue: str, holder_id: str) -> _Held | None:
        raw = await self.redis.get(ARQ_JOB_PREFIX + job_id)
        if raw is None:
            return None
        body = deserialize(raw)
        if body.get("f") not in _LEASABLE:
            return None
        return _Held(job_id, queue, JobEnvelope.model_validate(body["a"][0]), holder_id)

    def _home(self, held: _Held) -> CallHome:
        return call_home(held.envelope, self.store, self.calls)

    # -- a held lease ------------------------------------------------------------

    async def _held(self, lease_id: str, holder: Holder) -> _Held:
        """The job a live lease of `holder` holds, or LeaseGone."""
        if not lease_id.startswith(LEASE_PREFIX):
            raise LeaseUnknown(lease_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(lease_done(lease_id))
            pipe.get(liveness_key(lease_id))
            for p in keys.partitions():  # a lease holds one job, in one of them
                pipe.hgetall(jobs_key(lease_id, p))
            ended, alive, *held_by_partition = await pipe.execute()
        jobs = next((held for held in held_by_partition if held), None)
        if alive is None or not jobs:
            raise _gone(lease_id, ended, holder)
        holder_id = alive.decode() if isinstance(alive, bytes) else str(alive)
        if not holder.holds(holder_id):
            raise LeaseUnknown(lease_id)
        raw_id, raw_record = next(iter(jobs.items()))
        job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
        wake = lease_wake_key(raw_record)
        # The holder's lease, but its job was re-delivered meanwhile: it lapsed.
        taker = await self.redis.get(ARQ_IN_PROGRESS_PREFIX + job_id)
        if taker is None or (taker.decode() if isinstance(taker, bytes) else taker) != lease_id:
            raise LeaseLapsed(lease_id)
        queue = keys.queue_name(wake)
        held = await self._job(job_id, queue, holder_id)
        if held is None:
            raise LeaseLapsed(lease_id)
        return held

    async def _in_time(self, lease_id: str, held: _Held) -> None:
        """A call past its deadline gets a timeout error (as on any worker) and its lease
        ends: the service learns it from the 410 its heartbeat or progress gets."""
        raw = await self.redis.get(lease_deadline(lease_id))
        if raw is None or int(raw) >= time.time() * 1000:
            return
        call = await self._home(held).call()
        if call is not None:
            await self._record(
                held,
                error_result(
                    call.id,
                    call.name,
                    f"the call to {call.name!r} timed out",
                    ToolErrorKind.TIMEOUT,
                ),
            )
        await self._end(lease_id, held.job_id, held.queue, _ended(_TIMED_OUT, held.holder_id))
        raise CallTimedOut(lease_id)

    async def heartbeat(self, lease_id: str, lease_s: float, *, holder: Holder) -> float:
        """Extend the lease by `lease_s` from now; its new deadline."""
        held = await self._held(lease_id, holder)
        await self._in_time(lease_id, held)
        renewed = await self._renew(
            keys=[liveness_key(lease_id)], args=[held.holder_id, max(1, int(lease_s * 1000))]
        )
        if not renewed:
            raise LeaseLapsed(lease_id)
        # Its holder is remembered a while past the lease's new end: a lapse is told as one.
        await self.redis.expire(lease_done(lease_id), int(lease_s) + _DONE_KEEP_S)
        return time.time() + lease_s

    async def progress(self, lease_id: str, value: Any, *, holder: Holder) -> None:
        held = await self._held(lease_id, holder)
        await self._in_time(lease_id, held)
        home = self._home(held)
        call = await home.call()
        await home.emit(
            "tool-progress",
            tool_call_id=home.call_id,
            tool_name=call.name if call is not None else "",
            output=progress_value(value),
        )

    async def complete(self, lease_id: str, output: Any, is_error: bool, *, holder: Holder) -> bool:
        """Record the call's result and end the lease. False when the call had a result
        already (a re-delivered call's first result stands)."""
        held = await self._held(lease_id, holder)
        call = await self._home(held).call()
        if call is None:
            await self._end(lease_id, held.job_id, held.queue, _ended(_ANSWERED, held.holder_id))
            return False
        result = ToolResultPart(
            tool_call_id=call.id,
            tool_name=call.name,
            output=output,
            is_error=is_error,
            error_kind=ToolErrorKind.EXECUTION if is_error else None,
        )
        recorded = await self._record(held, result)
        await self._end(lease_id, held.job_id, held.queue, _ended(_ANSWERED, held.holder_id))
        return recorded

    async def _record(self, held: _Held, result: ToolResultPart) -> bool:
        """The result, guarded as any tool's is (a run's `tool_output` guardrails, asked
        of a worker that announced them: this process registers none), bounded, recorded."""
        home = self._home(held)
        tool = await home.tool(result.tool_name)
        if home.step is not None:
            result = await guarded_result(self.store, home.stream_id, home.step, tool, result)
        limit = (tool.max_output_bytes if tool else None) or self.max_output_bytes
        return await home.record(bounded_result(result, limit))

    async def _end(self, lease_id: str, job_id: str, queue: str, how: str | None = None) -> None:
        """The job is done; the lease is given up (nothing is left for a reaper) and, for
        a lease a service holds, remembers `how` it ended."""
        p = keys.job_partition(job_id)
        taker = Taker(self.redis, lease_id, queue, p, BACKSTOP_MS)
        await taker.take(taker.args(0, job_id, "done"))
        # Other slots than the job's: no transaction (a reaper finds nothing left held).
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.srem(holders_key(p), lease_id)
            pipe.delete(liveness_key(lease_id))
            pipe.delete(lease_deadline(lease_id))
            if how is not None:
                pipe.set(lease_done(lease_id), how, ex=_DONE_KEEP_S)
            await pipe.execute()

    # -- re-delivery -----------------------------------------------------------------

    async def reap_forever(self, lease_s: float) -> None:
        """Re-deliver lapsed leases (and dead workers' jobs) like any worker's reaper, so
        that a deployment whose only other processes are remote services recovers too."""
        cadence = reap_cadence(lease_s)
        while True:
            await asyncio.sleep(cadence.every_s)
            reaped = await OUTAGE.periodic_pass(
                lambda: reap_lapsed(self.redis, cadence),
                failure="reaping lapsed leases failed",
                log=log,
            )
            if reaped:
                log.info("re-delivered %d call(s) whose lease lapsed", reaped)
