"""The Redis records of provider batches (keys in orchestrator/machine/keys.py).

Never submitting a request twice rests on two records. A step joins its group's
`known` set and `pending` queue in one script, only if it is not known already
(a re-delivered model job parks nothing twice). A batch is formed by moving
members from `pending` into a batch record in one script, before anything is
uploaded: after a crash the members are in exactly one batch, whose record says
how far its submission got.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

from redis.asyncio import Redis

from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, queued_job
from agentq.orchestrator.machine import keys
from agentq.orchestrator.runs.state import TERMINAL_STATUSES, MetaField

T = TypeVar("T")

# KEYS: known, pending. ARGV: member, now ms. Joins the queue once.
_PARK = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""

# KEYS: lease. ARGV: owner, lease ms. Take or renew the group's lease.
_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: pending, inflight, batch. ARGV: batch id, max members, max age ms, now ms.
# When the queue is full enough or old enough, move its oldest members into a new batch.
_FORM = """
local n = redis.call('ZCARD', KEYS[1])
if n == 0 then return false end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if n < tonumber(ARGV[2]) and tonumber(ARGV[4]) - tonumber(oldest[2]) < tonumber(ARGV[3]) then
  return false
end
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('ZREM', KEYS[1], unpack(members))
redis.call('HSET', KEYS[3], 'members', cjson.encode(members), 'state', 'new', 'at', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return cjson.encode(members)
"""

# KEYS: batch step, arq job, queue, wake list. ARGV: result, job payload, score, expires ms.
# The answer is written once, and the step's model job enqueued to take it.
_DELIVER = """
if redis.call('HSETNX', KEYS[1], 'result', ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('PSETEX', KEYS[2], ARGV[4], ARGV[2])
  redis.call('ZADD', KEYS[3], ARGV[3], string.match(KEYS[2], '^arq:job:(.*)$'))
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 63)
end
return 1
"""


async def _r(value: Awaitable[T] | T) -> T:
    if isinstance(value, Awaitable):
        return cast(T, await value)
    return value


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def now_ms() -> int:
    return int(time.time() * 1000)


class ParkedStep:
    """A parked step's record: its request, and the answer once delivered."""

    def __init__(self, raw: dict[str, str]) -> None:
        self.path = raw.get("path")
        self.body = raw.get("body")
        self.group = raw.get("group")
        self.result = raw.get("result")


class ProviderBatchStore:
    def __init__(self, redis: Redis, *, retention_s: int) -> None:
        self.redis = redis
        self.retention_s = retention_s
        self._park = redis.register_script(_PARK)
        self._lease = redis.register_script(_LEASE)
        self._form = redis.register_script(_FORM)
        self._deliver = redis.register_script(_DELIVER)

    # -- the step's side ---------------------------------------------------------------

    async def run_ended(self, run_id: str) -> bool:
        """The run is gone or closed (cancelled meanwhile): its request need not be sent."""
        status = await _r(self.redis.hget(keys.meta(run_id), MetaField.STATUS))
        return status is None or _s(status) in TERMINAL_STATUSES

    async def parked(self, run_id: str, step: int) -> ParkedStep:
        raw = await _r(self.redis.hgetall(keys.batch_step(run_id, step)))
        return ParkedStep({_s(k): _s(v) for k, v in raw.items()})

    async def park(
        self, run_id: str, step: int, group: str, ref: str, path: str, body: dict[str, Any]
    ) -> bool:
        """Record the request and join the group's queue; False if it had parked before."""
        record = keys.batch_step(run_id, step)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hsetnx(record, "body", json.dumps(body))
            pipe.hset(record, mapping={"path": path, "group": group})
            pipe.expire(record, self.retention_s)
            pipe.hsetnx(keys.provider_batch_group(group), "ref", ref)
            pipe.sadd(keys.PROVIDER_BATCH_GROUPS, group)
            await pipe.execute()
        joined = await self._park(
            keys=[keys.provider_batch_known(group), keys.provider_batch_pending(group)],
            args=[keys.batch_member(run_id, step), now_ms()],
        )
        return bool(joined)

    # -- the collector's side ---------------------------------------------------------

    async def groups(self) -> list[str]:
        return sorted(_s(g) for g in await _r(self.redis.smembers(keys.PROVIDER_BATCH_GROUPS)))

    async def group_ref(self, group: str) -> str | None:
        raw = await _r(self.redis.hget(keys.provider_batch_group(group), "ref"))
        return None if raw is None else _s(raw)

    async def take_lease(self, group: str, owner: str, lease_s: float) -> bool:
        held = await self._lease(
            keys=[keys.provider_batch_lease(group)], args=[owner, int(lease_s * 1000)]
        )
        return bool(held)

    async def lease_holder(self, group: str) -> str | None:
        raw = await _r(self.redis.get(keys.provider_batch_lease(group)))
        return None if raw is None else _s(raw)

    async def form(
        self, group: str, batch_id: str, max_requests: int, max_age_s: float
    ) -> list[str] | None:
        raw = await self._form(
            keys=[
                keys.provider_batch_pending(group),
                keys.provider_batch_inflight(group),
                keys.provider_batch(group, batch_id),
            ],
            args=[batch_id, max_requests, int(max_age_s * 1000), now_ms()],
        )
        return None if raw is None else [str(m) for m in json.loads(_s(raw))]

    async def inflight(self, group: str) -> list[str]:
        raw = await _r(self.redis.smembers(keys.provider_batch_inflight(group)))
        return sorted(_s(b) for b in raw)

    async def batch(self, group: str, batch_id: str) -> dict[str, str]:
        raw = await _r(self.redis.hgetall(keys.provider_batch(group, batch_id)))
        return {_s(k): _s(v) for k, v in raw.items()}

    async def update_batch(self, group: str, batch_id: str, **fields: str) -> None:
        await _r(self.redis.hset(keys.provider_batch(group, batch_id), mapping=fields))

    async def deliver(self, group: str, member: str, result: str) -> bool:
        """Store a member's answer and wake its step; then it is no longer known."""
        run_id, step = keys.parse_batch_member(member)
        job = queued_job(JobEnvelope(kind="model_step", run_id=run_id, step=step), MODEL_QUEUE)
        delivered = await self._deliver(
            keys=[
                keys.batch_step(run_id, step),
                keys.arq_job(job.job_id),
                job.queue_key,
                job.wake_key,
            ],
            args=[result, job.payload, job.score_ms, job.expires_ms],
        )
        await _r(self.redis.srem(keys.provider_batch_known(group), member))
        return bool(delivered)

    async def end_batch(self, group: str, batch_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.srem(keys.provider_batch_inflight(group), batch_id)
            pipe.delete(keys.provider_batch(group, batch_id))
            await pipe.execute()
