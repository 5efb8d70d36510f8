"""The schedule store: a schedule's every change is one Lua transition in its tenant's
slot (`orchestrator/schedules/lua/*.lua`); its reads are plain hash and zset reads."""

from __future__ import annotations

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Store, resolved, text
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.state import lua_constants
from agentq.orchestrator.schedules.state import (
    SCHEDULE_INPUTS,
    SCHEDULE_TABLES,
    ScheduleInput,
    ScheduleReply,
    TickRecord,
)

_SCRIPTS = scripts.load(
    "agentq.orchestrator.schedules",
    (m.script for m in SCHEDULE_INPUTS),
    constants=lua_constants.render(SCHEDULE_TABLES),
    prelude="prelude",
)


class ScheduleStore(Store):
    def __init__(self, redis: Redis) -> None:
        super().__init__(redis, _SCRIPTS)

    async def apply(self, tenant: str, transition: ScheduleInput) -> ScheduleReply:
        return await self._send(
            transition.script,
            keys.schedule_keys(tenant, transition.name),
            transition,
            ScheduleReply,
        )

    async def read(self, tenant: str, name: str) -> dict[str, str]:
        """The schedule's hash as text ({} when there is none)."""
        return await self._hash(keys.schedule_meta(tenant, name))

    async def names(self, tenant: str) -> list[str]:
        """The tenant's schedules, oldest first."""
        with redis_errors_mapped():
            raw = await resolved(self.redis.zrange(keys.schedule_index(tenant), 0, -1))
        return [text(n) for n in raw]

    async def ticks(self, tenant: str, name: str, limit: int) -> list[TickRecord]:
        """The schedule's latest `limit` tick records, newest first."""
        _, _, records, order = keys.schedule_keys(tenant, name)
        with redis_errors_mapped():
            latest = await resolved(self.redis.zrevrange(order, 0, limit - 1))
            if not latest:
                return []
            raw = await resolved(self.redis.hmget(records, [text(t) for t in latest]))
        return [TickRecord.model_validate_json(r) for r in raw if r is not None]
