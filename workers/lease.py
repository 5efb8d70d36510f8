"""A job's lease: arq's in-progress key, kept short and renewed while the job runs.

arq derives the in-progress expiry from the longest function timeout, which
would make a killed worker's job wait that long before re-delivery. Renewing
a short lease instead bounds recovery by the lease, whatever the call's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from redis.asyncio import Redis

from agentq.orchestrator.envelopes import ARQ_IN_PROGRESS_PREFIX


@contextlib.asynccontextmanager
async def held_lease(redis: Redis, job_id: str, lease_s: float) -> AsyncIterator[None]:
    # The worker's claim started the lease (the in-progress key's TTL); this renews it.
    key = ARQ_IN_PROGRESS_PREFIX + job_id
    lease_ms = max(1, int(lease_s * 1000))

    async def renew() -> None:
        while True:
            await asyncio.sleep(lease_s / 3)
            await redis.pexpire(key, lease_ms)

    renewer = asyncio.create_task(renew())
    try:
        yield
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await renewer
