"""The Redis records of provider batches (keys in orchestrator/core/keys.py).

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
from typing import Any, TypeVar

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import resolved, text, texts
from agentq.orchestrator.runs.state import TERMINAL_STATUSES, MetaField, lua_constants

T = TypeVar("T")

_PACKAGE = "agentq.workers.models.batch"
_PARK = scripts.script(_PACKAGE, "park")
_LEASE = scripts.script(_PACKAGE, "lease")
_FORM = scripts.script(_PACKAGE, "form")
# Enqueues in arq's layout: the constants chunk gives it the job key's prefix.
_DELIVER = scripts.load(_PACKAGE, ["deliver"], constants=lua_constants.render())["deliver"]


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
        status = await resolved(self.redis.hget(keys.meta(run_id), MetaField.STATUS))
        return status is None or text(status) in TERMINAL_STATUSES

    async def parked(self, run_id: str, step: int) -> ParkedStep:
        raw = await resolved(self.redis.hgetall(keys.batch_step(run_id, step)))
        return ParkedStep(texts(raw))

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
        return sorted(
            text(g) for g in await resolved(self.redis.smembers(keys.PROVIDER_BATCH_GROUPS))
        )

    async def group_ref(self, group: str) -> str | None:
        raw = await resolved(self.redis.hget(keys.provider_batch_group(group), "ref"))
        return None if raw is None else text(raw)

    async def take_lease(self, group: str, owner: str, lease_s: float) -> bool:
        held = await self._lease(
            keys=[keys.provider_batch_lease(group)], args=[owner, int(lease_s * 1000)]
        )
        return bool(held)

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
        return None if raw is None else [str(m) for m in json.loads(text(raw))]

    async def inflight(self, group: str) -> list[str]:
        raw = await resolved(self.redis.smembers(keys.provider_batch_inflight(group)))
        return sorted(text(b) for b in raw)

    async def batch(self, group: str, batch_id: str) -> dict[str, str]:
        raw = await resolved(self.redis.hgetall(keys.provider_batch(group, batch_id)))
        return texts(raw)

    async def update_batch(self, group: str, batch_id: str, **fields: str) -> None:
        await resolved(self.redis.hset(keys.provider_batch(group, batch_id), mapping=fields))

    async def deliver(self, group: str, member: str, result: str) -> bool:
        """Store a member's answer and wake its step; then it is no longer known."""
        run_id, step = keys.parse_batch_member(member)
        job = queued_job(JobEnvelope(kind=JobKind.MODEL_STEP, run_id=run_id, step=step))
        delivered = await self._deliver(
            keys=[
                keys.batch_step(run_id, step),
                keys.arq_job(job.job_id),
                job.queue_key,
                job.wake_key,
            ],
            args=[result, job.model_dump_json()],
        )
        await resolved(self.redis.srem(keys.provider_batch_known(group), member))
        return bool(delivered)

    async def end_batch(self, group: str, batch_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.srem(keys.provider_batch_inflight(group), batch_id)
            pipe.delete(keys.provider_batch(group, batch_id))
            await pipe.execute()
