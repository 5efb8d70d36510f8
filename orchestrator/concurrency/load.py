"""What concurrency keys hold now, read from Redis (`client.concurrency`): a tenant's
active keys with their slots in use, max and held jobs, and a run's place in its key.

A key is active from its first claim until it holds no slot and no held job; each
partition lists its active keys (`keys.concurrency_active`, kept by
`orchestrator/machine/lua/conc.lua`), so listing a tenant's reads the active keys of
every tenant, never the keyspace. A key's counter names its tenant (`<tenant>/<key>`),
so a tenant is only ever shown its own.
"""

from __future__ import annotations

from pydantic import BaseModel
from redis.asyncio import Redis

from agentq.orchestrator.concurrency.slots import COUNTER_FIELD, KeyLimit, SlotState
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.redis.faults import maps_redis_errors


class KeyLoad(BaseModel):
    """One active key of a tenant: its runs holding a slot, its max, its jobs held."""

    key: str
    in_use: int
    max: int
    held: int


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


class ConcurrencyKeys:
    """The concurrency keys of one Client."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    @maps_redis_errors
    async def active(self, tenant: str | None = None) -> list[KeyLoad]:
        """`tenant`'s keys holding a slot or a held job (the default tenant's by default),
        by key."""
        mine = f"{tenant or DEFAULT_TENANT}/"
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in keys.partitions():
                pipe.hgetall(keys.concurrency_active(p))
            indexes: list[dict[bytes | str, bytes | str]] = await pipe.execute()
        found: dict[str, tuple[str, int]] = {}  # counter -> key, max
        for index in indexes:
            for raw_counter, raw_max in index.items():
                counter = _text(raw_counter)
                name = counter.rpartition(keys.TAG_CLOSE + keys.JOB_SEPARATOR)[2]
                name = name.removeprefix(keys.CONCURRENCY_PREFIX)
                if name.startswith(mine):
                    found[counter] = (name.removeprefix(mine), int(raw_max))
        async with self.redis.pipeline(transaction=False) as pipe:
            for counter in found:
                pipe.hlen(counter)
                pipe.zcard(counter + keys.CONCURRENCY_WAIT_SUFFIX)
            loads = await pipe.execute()
        listed = [
            KeyLoad(key=key, in_use=int(loads[2 * i]), max=max_, held=int(loads[2 * i + 1]))
            for i, (key, max_) in enumerate(found.values())
        ]
        return sorted((k for k in listed if k.in_use or k.held), key=lambda k: k.key)

    @maps_redis_errors
    async def of_run(self, run_id: str, limit: KeyLimit, *, live: bool) -> KeyLimit:
        """`limit` (a run's key, from its result) with the key's load and what run
        `run_id` does with it; `live`: the run is running (a parked run waits for no slot)."""
        counter = await self.redis.hget(keys.meta(run_id), COUNTER_FIELD)  # type: ignore[misc]
        if counter is None:  # the run ended: its key no longer counts it
            return limit
        name = _text(counter)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hexists(name, run_id)
            pipe.hlen(name)
            pipe.zcard(name + keys.CONCURRENCY_WAIT_SUFFIX)
            holding, in_use, held = await pipe.execute()
        state: SlotState | None = None
        if holding:
            state = "running"
        elif live and int(in_use) >= limit.max:
            state = "waiting"
        return limit.model_copy(update={"in_use": int(in_use), "held": int(held), "state": state})
