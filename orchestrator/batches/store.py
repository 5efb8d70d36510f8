"""The batch store: a batch's every change is one atomic Lua transition in its tenant's
slot (`orchestrator/batches/lua/*.lua`), and its reads page through Redis.

A batch is a durable object: its lines (specs and compact records), its pending list
and its counts live in Redis, not in the process that submitted it. Admission happens
in `batch_settle`, run by whichever worker picks up an admission job: the job a run's
end enqueues (in the run's own end transition), or the kick a seal or retry enqueues.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

from redis.asyncio import Redis

from agentq.orchestrator.batches.state import (
    BATCH_INPUTS,
    BATCH_KEY_CONSTANTS,
    BATCH_TABLES,
    BatchCancel,
    BatchField,
    BatchInput,
    BatchOpen,
    BatchRedrive,
    BatchReply,
    BatchRetry,
    BatchSeal,
    BatchSettle,
    BatchUpload,
    CancelBatchReply,
    RedriveBatchReply,
    RetryReply,
    SettleReply,
    UploadReply,
)
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.tenant_limits import TenantLimit, limit_for
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Store, resolved, text
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.state import lua_constants

R = TypeVar("R", bound=BatchReply)

# How many records one read of the results fetches.
RESULTS_PAGE = 500


# Each batch transition's full source: the constants with the batch tables, the batch
# prelude, its own file.
_SCRIPTS = scripts.load(
    "agentq.orchestrator.batches",
    (m.script for m in BATCH_INPUTS),
    constants=lua_constants.render(BATCH_TABLES, {"BK": BATCH_KEY_CONSTANTS}),
    prelude="prelude",
)


class BatchStore(Store):
    def __init__(self, redis: Redis, tenant_limits: Mapping[str, TenantLimit]) -> None:
        super().__init__(redis, _SCRIPTS)
        self.tenant_limits = tenant_limits

    def tenant_cap(self, tenant: str) -> int:
        """The in-flight cap of the tenant's batches together: its max_in_flight (0: none),
        the one AGENTQ_TENANT_LIMITS its own runs are refused at (core/tenant_limits.py)."""
        limit = limit_for(self.tenant_limits, tenant)
        if limit is None or limit.max_in_flight is None:
            return 0
        return limit.max_in_flight

    async def _apply(self, tenant: str, transition: BatchInput, reply: type[R]) -> R:
        return await self._send(
            transition.script, keys.batch_tenant_keys(tenant), transition, reply
        )

    # -- transitions (see orchestrator/batches/lua/*.lua for each one's replies) -----

    async def open(self, tenant: str, transition: BatchOpen) -> BatchReply:
        return await self._apply(tenant, transition, BatchReply)

    async def upload(self, tenant: str, transition: BatchUpload) -> UploadReply:
        return await self._apply(tenant, transition, UploadReply)

    async def seal(self, tenant: str, transition: BatchSeal) -> BatchReply:
        return await self._apply(tenant, transition, BatchReply)

    async def settle(self, tenant: str, transition: BatchSettle) -> SettleReply:
        capped = transition.model_copy(update=await self._capped(tenant))
        return await self._apply(tenant, capped, SettleReply)

    async def cancel(self, tenant: str, transition: BatchCancel) -> CancelBatchReply:
        return await self._apply(tenant, transition, CancelBatchReply)

    async def retry(self, tenant: str, transition: BatchRetry) -> RetryReply:
        return await self._apply(tenant, transition, RetryReply)

    async def redrive(self, tenant: str, transition: BatchRedrive) -> RedriveBatchReply:
        capped = transition.model_copy(update=await self._capped(tenant))
        return await self._apply(tenant, capped, RedriveBatchReply)

    async def _capped(self, tenant: str) -> dict[str, int]:
        """The tenant's cap for an admission, and its runs in flight that are not its
        batches' lines (counted in each partition's load hash, `create` transition)."""
        cap = self.tenant_cap(tenant)
        if cap <= 0:
            return {"tenant_cap": 0, "others_in_flight": 0}
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for partition in keys.partitions():
                    pipe.hget(keys.tenant_load(partition), keys.TENANT_IN_FLIGHT + tenant)
                counts = await pipe.execute()
        return {"tenant_cap": cap, "others_in_flight": sum(int(c or 0) for c in counts)}

    # -- reads ---------------------------------------------------------------

    async def meta(self, tenant: str, batch_id: str) -> dict[str, str]:
        """The batch's meta hash ({} when there is no such batch)."""
        return await self._hash(keys.batch_meta(tenant, batch_id))

    async def records(
        self, tenant: str, batch_id: str, *, lines: int, first: int = 1
    ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """Line records in input order, a page at a time: memory flat in the batch size."""
        key = keys.batch_records(tenant, batch_id)
        start = first
        while start <= lines:
            numbers = list(range(start, min(lines, start + RESULTS_PAGE - 1) + 1))
            with redis_errors_mapped():
                raw = await resolved(self.redis.hmget(key, [str(n) for n in numbers]))
            for n, value in zip(numbers, raw, strict=True):
                if value is not None:
                    yield n, json.loads(value)
            start = numbers[-1] + 1

    async def batch_ids(self, tenant: str, limit: int = 50) -> list[str]:
        """The tenant's batches, newest first (those past their retention left out)."""
        index = keys.batch_index(tenant)
        with redis_errors_mapped():
            raw = await resolved(self.redis.zrevrange(index, 0, max(0, limit * 2)))
            ids = [text(v) for v in raw]
            async with self.redis.pipeline(transaction=False) as pipe:
                for batch_id in ids:
                    pipe.exists(keys.batch_meta(tenant, batch_id))
                alive = await pipe.execute()
            gone = [b for b, a in zip(ids, alive, strict=True) if not a]
            if gone:
                await resolved(self.redis.zrem(index, *gone))
        return [b for b, a in zip(ids, alive, strict=True) if a][:limit]

    async def field(self, tenant: str, batch_id: str, name: BatchField) -> str | None:
        with redis_errors_mapped():
            raw = await resolved(self.redis.hget(keys.batch_meta(tenant, batch_id), name))
        return text(raw) if raw is not None else None
