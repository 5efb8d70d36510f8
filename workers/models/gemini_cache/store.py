"""A batch's cached contents in Redis (keys in orchestrator/core/keys.py).

One worker creates each: the first to `claim` the prefix (SET NX, held for the create's
deadline, so a worker that dies mid-create frees it), which then `publish`es the name, or
that there is none. The others `wait` on a list the publisher pushes one token to; each
waiter that takes it pushes it back, so all of them wake in turn. A name lives in Redis
for part of its TTL only (prefix.py: USABLE_FRACTION): after that the next step creates
a new one.
"""

from __future__ import annotations

import math

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import resolved, text

_PACKAGE = "agentq.workers.models.gemini_cache"
_PUBLISH = scripts.script(_PACKAGE, "publish")
_TAKE = scripts.script(_PACKAGE, "take")
NONE = "-"  # the prefix has no cached content (the API refused one)


class PrefixRecord:
    """One prefix's records within one batch."""

    def __init__(self, redis: Redis, tenant: str, batch_id: str, digest: str) -> None:
        self.redis = redis
        self.digest = digest
        self.name_key = keys.batch_cached_content(tenant, batch_id, digest)
        self.claim_key = self.name_key + keys.BATCH_CACHED_CLAIM_SUFFIX
        self.ready_key = self.name_key + keys.BATCH_CACHED_READY_SUFFIX
        self.all_key = keys.batch_cached_contents(tenant, batch_id)
        self._publish = redis.register_script(_PUBLISH)

    async def name(self) -> str | None:
        raw = await resolved(self.redis.get(self.name_key))
        return None if raw is None else text(raw)

    async def claim(self, hold_s: float) -> bool:
        """True for the one worker that is to create it."""
        return bool(await resolved(self.redis.set(self.claim_key, "1", nx=True, px=ms(hold_s))))

    async def unclaim(self) -> None:
        await resolved(self.redis.delete(self.claim_key))

    async def publish(self, name: str, usable_ms: int, entry: str = "") -> None:
        """`name` ("" for no record: the next step tries again) and the batch's `entry`."""
        argv: list[str | int] = [name, usable_ms, self.digest, entry, usable_ms]
        keys_ = [self.name_key, self.claim_key, self.ready_key, self.all_key]
        await self._publish(keys=keys_, args=argv)

    async def wait(self, timeout_s: float, usable_ms: int) -> str | None:
        """The name another worker publishes within `timeout_s` (None: none in time)."""
        whole_s = max(1, math.ceil(timeout_s))  # BLPOP takes whole seconds (0: forever)
        if await resolved(self.redis.blpop([self.ready_key], timeout=whole_s)) is None:
            return None
        # The token passed on: the next waiter wakes in turn.
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.rpush(self.ready_key, "1")
            pipe.pexpire(self.ready_key, usable_ms)
            await pipe.execute()
        return await self.name()


async def take_all(redis: Redis, tenant: str, batch_id: str) -> dict[str, str]:
    """The batch's entries (digest -> entry), for the one caller that deletes them; their
    names are forgotten with them, so no later step names a deleted cached content."""
    take = redis.register_script(_TAKE)
    flat = [text(x) for x in await take(keys=[keys.batch_cached_contents(tenant, batch_id)])]
    entries = dict(zip(flat[::2], flat[1::2], strict=True))
    if entries:
        names = [keys.batch_cached_content(tenant, batch_id, digest) for digest in entries]
        ready = [name + keys.BATCH_CACHED_READY_SUFFIX for name in names]
        await resolved(redis.delete(*names, *ready))
    return entries


def ms(seconds: float) -> int:
    return int(seconds * 1000)
