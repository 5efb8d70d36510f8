"""How deep each job queue is: what autoscalers and dashboards read.

A queue is arq's sorted set of job ids scored by the time each is due (ms). A claimed
job stays in the set until it ends (scored +inf while it runs: workers/claims.py), so
`depth` counts jobs waiting, deferred and running: the work a pool has on hand, which
is what scaling on queue depth wants (a pool scaled to zero sees its first job here).
`ready` counts those due now and not running, and `oldest_age_s` says how long the
oldest of them has been due.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from agentq.orchestrator.envelopes import queue_key

QUEUE_KEY_PREFIX = queue_key("")


@dataclass(frozen=True)
class QueueStats:
    queue: str
    depth: int
    ready: int
    oldest_age_s: float


async def queue_stats(
    redis: Redis, queues: Iterable[str], now_s: float | None = None
) -> dict[str, QueueStats]:
    """Stats of `queues`, read in one round trip (an unknown queue is empty)."""
    names = list(queues)
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    pipe = redis.pipeline(transaction=False)
    for name in names:
        key = queue_key(name)
        pipe.zcard(key)
        pipe.zcount(key, "-inf", now_ms)
        pipe.zrange(key, 0, 0, withscores=True)
    replies = await pipe.execute()
    stats: dict[str, QueueStats] = {}
    for i, name in enumerate(names):
        depth, ready, oldest = replies[3 * i : 3 * i + 3]
        first_due_ms = oldest[0][1] if oldest else now_ms
        stats[name] = QueueStats(
            queue=name,
            depth=int(depth),
            ready=int(ready),
            oldest_age_s=max(0.0, (now_ms - first_due_ms) / 1000) if ready else 0.0,
        )
    return stats


async def known_queues(redis: Redis) -> list[str]:
    """Every queue that holds a job now (an empty queue's key does not exist)."""
    names = {
        (key.decode() if isinstance(key, bytes) else str(key)).removeprefix(QUEUE_KEY_PREFIX)
        async for key in redis.scan_iter(match=QUEUE_KEY_PREFIX + "*", count=1000)
    }
    return sorted(names)


def queues_document(stats: dict[str, QueueStats]) -> dict[str, Any]:
    """The JSON an HTTP endpoint serves for KEDA's metrics-api scaler:
    `{"queues": {"model": {"depth": 3, ...}}}`, read with valueLocation `queues.model.depth`."""
    return {
        "queues": {
            name: {k: v for k, v in asdict(s).items() if k != "queue"} for name, s in stats.items()
        }
    }
