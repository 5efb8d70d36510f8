"""How deep each job queue is: what autoscalers and dashboards read.

A queue is arq's sorted set of job ids scored by the time each is due (ms). A claimed
job stays in the set until it ends (scored +inf while it runs: workers/queue/claims.py).
`depth` is the work a pool has on hand, **ready + running**, which is what scaling on
queue depth wants (a pool scaled to zero sees its first job here, and an idle pool
reads 0). `ready` counts jobs due now and not running, timers fallen due included (a
parked call's deadline waits in the queue's timer set until a claim moves it over: a
pool at zero has no claim, so it must see the timer here to wake). Timers not yet due
and retries waiting out their delay are not work on hand: `scheduled` counts the
timers. A job whose run's concurrency key is at its max is `held`, not ready: it waits
in the queue for a slot that only the key's own runs can free, so a pool scaled on
depth would add workers that cannot run it (`orchestrator/concurrency/`); `held` counts
those apart, and neither `ready` nor `depth` counts them. `oldest_age_s` says how long
the oldest due job has been due. A queue is partitioned (`core/keys.py`): its figures
are summed over its partitions.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from arq.constants import health_check_key_suffix
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.fairness import due_of

QUEUE_KEY_PREFIX = keys.QUEUE_PREFIX


@dataclass(frozen=True)
class QueueStats:
    queue: str
    depth: int
    ready: int
    running: int
    held: int
    scheduled: int
    oldest_age_s: float


# What one partition of one queue costs to read: each count is O(log n).
_READS = 7


async def queue_stats(
    redis: Redis, queues: Iterable[str], now_s: float | None = None
) -> dict[str, QueueStats]:
    """Stats of `queues`, read in one pipeline (an unknown queue is empty)."""
    names = list(queues)
    parts = list(keys.partitions())
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    pipe = redis.pipeline(transaction=False)
    for name in names:
        for p in parts:
            key, timers = keys.queue(name, p), keys.timers(name, p)
            pipe.zcount(key, "-inf", now_ms)
            pipe.zcount(key, "+inf", "+inf")
            pipe.zrange(key, 0, 0, withscores=True)
            pipe.zcount(timers, "-inf", now_ms)
            pipe.zcard(timers)
            pipe.zrange(timers, 0, 0, withscores=True)
            pipe.zcard(keys.held(name, p))
    replies = await pipe.execute()
    stats: dict[str, QueueStats] = {}
    per_queue = _READS * len(parts)
    for i, name in enumerate(names):
        mine = replies[per_queue * i : per_queue * (i + 1)]
        due = sum(int(r) for r in mine[0::_READS]) + sum(int(r) for r in mine[3::_READS])
        held = sum(int(r) for r in mine[6::_READS])
        # A held job stays due in its queue (conc.lua holds it where it is): not ready.
        ready = due - held
        running = sum(int(r) for r in mine[1::_READS])
        firsts = [due_of(first[0][1]) for first in mine[2::_READS] + mine[5::_READS] if first]
        first_due_ms = min(firsts) if firsts else now_ms
        stats[name] = QueueStats(
            queue=name,
            depth=ready + running,
            ready=ready,
            running=running,
            held=held,
            scheduled=sum(int(t) for t in mine[4::_READS]),
            oldest_age_s=max(0.0, (now_ms - first_due_ms) / 1000) if ready else 0.0,
        )
    return stats


async def known_queues(redis: Redis) -> list[str]:
    """Every queue that holds a job now (an empty queue's key does not exist); a worker's
    arq health-check key beside a queue's is not a queue."""
    names = {
        keys.queue_name(key.decode() if isinstance(key, bytes) else str(key))
        async for key in redis.scan_iter(match=QUEUE_KEY_PREFIX + "*", count=1000)
    }
    return sorted(name for name in names if not name.endswith(health_check_key_suffix))


def queues_document(stats: dict[str, QueueStats]) -> dict[str, Any]:
    """The JSON an HTTP endpoint serves for KEDA's metrics-api scaler:
    `{"queues": {"model": {"depth": 3, ...}}}`, read with valueLocation `queues.model.depth`."""
    return {
        "queues": {
            name: {k: v for k, v in asdict(s).items() if k != "queue"} for name, s in stats.items()
        }
    }
