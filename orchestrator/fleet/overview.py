"""What the fleet looks like from Redis: the workers alive and their queues' depths.

The workers are those `orchestrator/fleet/listings.py` holds a fresh record of (each worker
refreshes its record every `listings.BEAT_EVERY_S`); the depths are the queues they serve,
and the model queue.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.fleet import listings
from agentq.orchestrator.fleet.queues import queue_stats


async def status(redis: Redis) -> dict[str, Any]:
    workers = await listings.live_workers(redis)
    queues = {MODEL_QUEUE}
    for worker in workers:
        queues.update(worker.queues)
    stats = await queue_stats(redis, sorted(queues))
    return {
        "workers": len(workers),
        "worker_ids": sorted(w.id for w in workers),
        "queues": {q: s.depth for q, s in stats.items()},
    }
