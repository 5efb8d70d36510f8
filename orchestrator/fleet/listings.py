"""The workers alive, with what they serve: what `agentq workers`, the HTTP API's
`/v1/fleet` and the dashboard show.

A hash of worker records (host, pid, queues, tools, concurrency, state layout, last
seen) that each worker refreshes every `BEAT_EVERY_S`, written from Python beside the
transitions. Job leases are not judged from these records: a worker's lease is its own
liveness key (`workers/queue/liveness.py`). Recent runs are listed from the run index
(`orchestrator/runs/index.py`).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator.fleet.layout import EARLIER_LAYOUT
from agentq.orchestrator.machine.store import resolved, text

WORKERS = "aq:worker-records"  # hash: worker id -> WorkerRecord JSON
BEAT_EVERY_S = 10.0
# A worker not heard from for three beats is gone (its record is dropped on a read).
WORKER_STALE_S = 3 * BEAT_EVERY_S


class WorkerRecord(BaseModel):
    id: str
    host: str
    pid: int
    queues: list[str]
    tools: list[str] = Field(default_factory=list)
    # The registry keys of everything it announces: what stays live when it stops.
    serves: list[str] = Field(default_factory=list)
    concurrency: int
    started_at: float
    seen_at: float = 0.0
    jobs_in_flight: int = 0  # the jobs it was running at its last beat (`seen_at`)
    # The run state's layout it reads and writes (`fleet/layout.py`); a record without
    # one was written by a release from before the field existed.
    layout: int = EARLIER_LAYOUT


async def heartbeat(redis: Redis, record: WorkerRecord) -> None:
    now = time.time()
    await resolved(
        redis.hset(WORKERS, record.id, record.model_copy(update={"seen_at": now}).model_dump_json())
    )


async def forget_worker(redis: Redis, worker_id: str) -> None:
    await resolved(redis.hdel(WORKERS, worker_id))


async def live_workers(redis: Redis, now: float | None = None) -> list[WorkerRecord]:
    """Workers seen recently; records of workers long gone are dropped on the way."""
    now = time.time() if now is None else now
    raw = await resolved(redis.hgetall(WORKERS))
    live: list[WorkerRecord] = []
    stale: list[str] = []
    for worker_id, value in raw.items():
        record = WorkerRecord.model_validate_json(value)
        if now - record.seen_at > WORKER_STALE_S:
            stale.append(text(worker_id))
        else:
            live.append(record)
    if stale:
        await resolved(redis.hdel(WORKERS, *stale))
    return sorted(live, key=lambda r: (r.host, r.pid))
