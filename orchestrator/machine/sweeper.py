"""The sweeper's shape, shared by every machine whose jobs a failover can drop (runs,
calls without a run, batches): a moving index and a pass over its stale window.

Each machine's transitions score its live records in a per-partition sorted set by when
each last moved (Redis's clock, `moving.lua`), and take them out when they end. A pass
reads only the entries that have not moved for `after_s`, at most `limit` per partition,
and each one it looks at is scored anew or leaves the index, so the next pass goes on
with the next ones: the window is the cursor, and a pass costs the same however many
healthy records there are. What "stuck" means and what is enqueued again is each
machine's own `redrive`, one transition that never doubles a job that survived.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.redis.faults import redis_errors_mapped


@dataclass
class SweepPass:
    """What one pass did: entries looked at (the stale window), jobs enqueued again."""

    examined: int = 0
    redriven: int = 0


class Sweeper(ABC):
    """A machine's sweeper over its moving `index` (a partition's key builder)."""

    def __init__(
        self, redis: Redis, index: Callable[[int], str], *, after_s: float, limit: int
    ) -> None:
        self.redis = redis
        self.index = index
        self.after_ms = int(after_s * 1000)
        self.limit = limit

    @abstractmethod
    async def redrive(self, entry: str) -> int:
        """Enqueue again what the entry's record waits for and lost; how many jobs. The
        entry is scored anew, or leaves the index."""

    async def sweep(self) -> SweepPass:
        """One pass over every partition's stale window."""
        with redis_errors_mapped():
            seconds, micros = await resolved(self.redis.time())
        # Scored by Redis's clock (the transitions' TIME), so workers' clocks do not matter.
        stale_before = seconds * 1000 + micros // 1000 - self.after_ms
        done = SweepPass()
        for partition in keys.partitions():
            with redis_errors_mapped():
                entries = await resolved(
                    self.redis.zrangebyscore(
                        self.index(partition), "-inf", stale_before, start=0, num=self.limit
                    )
                )
            for entry in entries:
                done.examined += 1
                done.redriven += await self.redrive(text(entry))
        return done
