"""The thread store: its two transitions, its record and its tenant's index."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Store, resolved, text, texts
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.threads.state import (
    ThreadField,
    ThreadRelease,
    ThreadTurn,
    TurnReply,
)

_SCRIPTS = scripts.load("agentq.orchestrator.threads", ["thread_turn", "thread_release"])


class ThreadStore(Store):
    def __init__(self, redis: Redis, *, retention_s: int) -> None:
        super().__init__(redis, _SCRIPTS, retention_s=retention_s)
        self.retention: int = retention_s

    async def turn(self, thread_id: str, transition: ThreadTurn) -> TurnReply:
        return await self._send(transition.script, _keys(thread_id), transition, TurnReply)

    async def release(self, thread_id: str, transition: ThreadRelease) -> TurnReply:
        return await self._send(transition.script, _keys(thread_id), transition, TurnReply)

    async def record(self, thread_id: str) -> dict[str, str]:
        """The thread's hash as text ({} when there is none, or it expired)."""
        return await self._hash(keys.thread(thread_id))

    async def runs(self, thread_id: str) -> list[str]:
        with redis_errors_mapped():
            return [text(r) for r in await resolved(self.redis.lrange(_keys(thread_id)[1], 0, -1))]

    async def queued(self, thread_id: str) -> list[str]:
        """The runs waiting for the thread's turn, first in line first (`QueuedRun` JSON)."""
        with redis_errors_mapped():
            found = await resolved(self.redis.lrange(keys.thread_queued(thread_id), 0, -1))
        return [text(q) for q in found]

    async def enqueue(self, thread_id: str, entry: str, *, first: bool = False) -> None:
        """Queue a run for the thread's turn: last in line, or `first` (an interrupt)."""
        key = keys.thread_queued(thread_id)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                if first:
                    pipe.lpush(key, entry)
                else:
                    pipe.rpush(key, entry)
                pipe.expire(key, self.retention)
                await pipe.execute()

    async def drop_queued(self, thread_id: str, entry: str) -> None:
        with redis_errors_mapped():
            await resolved(self.redis.lrem(keys.thread_queued(thread_id), 1, entry))

    async def open(
        self, thread_id: str, tenant: str, metadata_json: str, double_texting: str
    ) -> bool:
        """Create the thread unless it exists; whether it is new."""
        now = time.time()
        key = keys.thread(thread_id)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hsetnx(key, ThreadField.TENANT, tenant)
                pipe.hsetnx(key, ThreadField.CREATED_AT, str(now))
                pipe.hsetnx(key, ThreadField.UPDATED_AT, str(now))
                pipe.hsetnx(key, ThreadField.METADATA, metadata_json)
                pipe.hsetnx(key, ThreadField.DOUBLE_TEXTING, double_texting)
                pipe.expire(key, self.retention)
                created, *_ = await pipe.execute()
        return bool(created)

    async def list_under(self, tenant: str, thread_id: str) -> None:
        """List the thread under its tenant (newest activity first); entries past the
        retention are trimmed, and the index expires with it."""
        now = time.time()
        key = keys.thread_index(tenant)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zadd(key, {thread_id: now})
                pipe.zremrangebyscore(key, "-inf", now - self.retention)
                pipe.expire(key, self.retention)
                await pipe.execute()

    async def listed(self, tenant: str, limit: int) -> list[str]:
        with redis_errors_mapped():
            found = await self.redis.zrevrange(keys.thread_index(tenant), 0, limit - 1)
        return [text(t) for t in found]

    async def records(self, thread_ids: list[str]) -> list[dict[str, str]]:
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for thread_id in thread_ids:
                    pipe.hgetall(keys.thread(thread_id))
                return [texts(raw) for raw in await pipe.execute()]


def _keys(thread_id: str) -> list[str]:
    return [keys.thread(thread_id), keys.thread_runs(thread_id), keys.thread_queued(thread_id)]
