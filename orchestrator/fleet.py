"""What the fleet looks like from Redis: queue depths and the workers alive.

Workers beat into a sorted set (score: last beat); one not heard from within
`stale_s` is counted gone (its entry is trimmed on the next beat or read).
"""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio import Redis

from agentq.orchestrator.envelopes import MODEL_QUEUE, queue_key

WORKERS = "aq:workers"
BEAT_EVERY_S = 10.0
STALE_S = 3 * BEAT_EVERY_S


async def beat(redis: Redis, worker_id: str, queues: list[str]) -> None:
    now = time.time()
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(WORKERS, {f"{worker_id} {','.join(queues)}": now})
        pipe.zremrangebyscore(WORKERS, "-inf", now - STALE_S)
        await pipe.execute()


async def gone(redis: Redis, worker_id: str, queues: list[str]) -> None:
    await redis.zrem(WORKERS, f"{worker_id} {','.join(queues)}")


async def status(redis: Redis) -> dict[str, Any]:
    now = time.time()
    members = await redis.zrangebyscore(WORKERS, now - STALE_S, "+inf")
    workers = [(m.decode() if isinstance(m, bytes) else str(m)).split(" ", 1) for m in members]
    queues = {MODEL_QUEUE}
    for _, served in workers:
        queues.update(q for q in served.split(",") if q)
    async with redis.pipeline(transaction=False) as pipe:
        ordered = sorted(queues)
        for queue in ordered:
            pipe.zcard(queue_key(queue))
        depths = await pipe.execute()
    return {
        "workers": len(workers),
        "worker_ids": sorted(w for w, _ in workers),
        "queues": {q: int(d) for q, d in zip(ordered, depths, strict=True)},
    }
