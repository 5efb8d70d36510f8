"""What `agentq runs` and `agentq workers` list: recent runs and live workers.

Both are plain Redis structures written from Python beside the transitions,
not by them: a sorted set of run ids by submit time (added right after the
run is created, pruned past the retention), and a hash of worker records
that each worker refreshes when it re-announces its tools. Listings are for
people; nothing in a run's life reads them.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator import keys

RUNS_INDEX = "aq:runs"  # sorted set: run id -> submit time (unix seconds)
WORKERS = "aq:workers"  # hash: worker id -> WorkerRecord JSON
# A worker re-announces every minute; one that has not for this long is gone.
WORKER_STALE_S = 150.0

T = TypeVar("T")


async def _resolved(value: Awaitable[T] | T) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RunSummary(BaseModel):
    id: str
    status: str
    step: int
    created_at: float
    model: str = ""


class WorkerRecord(BaseModel):
    id: str
    host: str
    pid: int
    queues: list[str]
    tools: list[str] = Field(default_factory=list)
    concurrency: int
    started_at: float
    seen_at: float = 0.0


async def add_run(redis: Redis, run_id: str, at: float, retention_s: float) -> None:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(RUNS_INDEX, {run_id: at}, nx=True)
        pipe.zremrangebyscore(RUNS_INDEX, "-inf", at - retention_s)
        await pipe.execute()


async def recent_runs(
    redis: Redis, *, limit: int = 20, statuses: Sequence[str] = ()
) -> list[RunSummary]:
    """The newest runs first, optionally only those in `statuses`."""
    found: list[RunSummary] = []
    start, page = 0, max(limit, 50)
    while len(found) < limit:
        ids = await _resolved(redis.zrevrange(RUNS_INDEX, start, start + page - 1))
        if not ids:
            break
        async with redis.pipeline(transaction=False) as pipe:
            for run_id in ids:
                pipe.hmget(keys.meta(_text(run_id)), ["status", "step", "created_at", "spec"])
            metas = await pipe.execute()
        for run_id, (status, step, created_at, spec) in zip(ids, metas, strict=True):
            if status is None or (statuses and _text(status) not in statuses):
                continue  # expired, or filtered out
            found.append(
                RunSummary(
                    id=_text(run_id),
                    status=_text(status),
                    step=int(step or 0),
                    created_at=float(created_at or 0),
                    model=_model_label(spec),
                )
            )
        start += page
    return found[:limit]


def _model_label(spec: Any) -> str:
    try:
        model = json.loads(spec)["model"]
        return f"{model['provider']}:{model['name']}" if isinstance(model, dict) else str(model)
    except (TypeError, ValueError, KeyError):
        return ""


async def heartbeat(redis: Redis, record: WorkerRecord) -> None:
    now = time.time()
    await _resolved(
        redis.hset(WORKERS, record.id, record.model_copy(update={"seen_at": now}).model_dump_json())
    )


async def forget_worker(redis: Redis, worker_id: str) -> None:
    await _resolved(redis.hdel(WORKERS, worker_id))


async def live_workers(redis: Redis, now: float | None = None) -> list[WorkerRecord]:
    """Workers seen recently; records of workers long gone are dropped on the way."""
    now = time.time() if now is None else now
    raw = await _resolved(redis.hgetall(WORKERS))
    live: list[WorkerRecord] = []
    stale: list[str] = []
    for worker_id, value in raw.items():
        record = WorkerRecord.model_validate_json(value)
        if now - record.seen_at > WORKER_STALE_S:
            stale.append(_text(worker_id))
        else:
            live.append(record)
    if stale:
        await _resolved(redis.hdel(WORKERS, *stale))
    return sorted(live, key=lambda r: (r.host, r.pid))
