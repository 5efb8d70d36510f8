"""A tenant's usage and cost: what every model step of its runs recorded, summed over
the partitions (`commit_step` adds each step to its partition's `keys.tenant_usage`
hash in the same transition, so a step counts exactly once)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.runs.state import COST_FIELDS, USAGE_FIELDS, MetaField, stored_usage

# The tenant hash names each field as the meta hash's readers expect it, by Usage field.
_TOKENS = {name: name for name in USAGE_FIELDS}
_COSTS = {name: name for name in COST_FIELDS}


async def tenant_usage(redis: Redis, tenant: str) -> Usage:
    """Everything `tenant`'s runs used (sub-agents' runs included: each is the tenant's)."""
    fields = [*_TOKENS, *_COSTS, MetaField.UNPRICED.value]
    async with redis.pipeline(transaction=False) as pipe:
        for partition in keys.partitions():
            pipe.hmget(keys.tenant_usage(partition), [f"{tenant}:{f}" for f in fields])
        rows = cast(list[list[Any]], await cast(Awaitable[Any], pipe.execute()))
    total = Usage()
    for row in rows:
        meta = {
            field: (value.decode() if isinstance(value, bytes) else value)
            for field, value in zip(fields, row, strict=True)
            if value is not None
        }
        total += stored_usage(meta, token_fields=_TOKENS, cost_fields=_COSTS)
    return total
