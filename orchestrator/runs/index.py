"""Which runs a tenant has, newest first: a sorted set per tenant, scored by creation time.

Written right after a run is created (not inside the create transition, so the Lua
scripts stay the store's alone); a crash between the two leaves the run unlisted but
otherwise whole. Entries older than the retention are trimmed on every write, and the
set itself expires with the retention, so the index never outlives the runs it names.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT


def index_key(tenant: str) -> str:
    return f"aq:tenant:{tenant}:runs"


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the last run shown and its creation time."""

    created_at: float
    run_id: str

    def encode(self) -> str:
        raw = json.dumps([self.created_at, self.run_id], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            created_at, run_id = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            return cls(float(created_at), str(run_id))
        except (ValueError, TypeError) as exc:
            raise ValueError("not a cursor this service handed out") from exc


class RunIndex:
    def __init__(self, redis: Redis, *, retention_s: int) -> None:
        self.redis = redis
        self.retention_s = retention_s

    async def add(self, run_id: str, tenant: str | None, created_at: float | None = None) -> None:
        """Record the run's tenant on the run and list it under that tenant."""
        tenant = tenant or DEFAULT_TENANT
        now = time.time()
        key = index_key(tenant)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hsetnx(keys.meta(run_id), "tenant", tenant)
            pipe.zadd(key, {run_id: created_at or now}, nx=True)
            pipe.zremrangebyscore(key, "-inf", now - self.retention_s)
            pipe.expire(key, self.retention_s)
            await pipe.execute()

    async def page(
        self, tenant: str | None, *, after: Cursor | None, created_after: float | None, count: int
    ) -> list[tuple[str, float]]:
        """Up to `count` (run id, created at) pairs older than the cursor, newest first."""
        high: Any = after.created_at if after else "+inf"
        low: Any = created_after if created_after is not None else "-inf"
        if created_after is not None:
            low = f"({created_after}"
        # Ties at the cursor's time come in descending member order: skip the ones shown.
        fetched = await self.redis.zrevrangebyscore(
            index_key(tenant or DEFAULT_TENANT), high, low, start=0, num=count + 64, withscores=True
        )
        out: list[tuple[str, float]] = []
        for member, score in fetched:
            run_id = member.decode() if isinstance(member, bytes) else str(member)
            if after and score == after.created_at and run_id >= after.run_id:
                continue
            out.append((run_id, float(score)))
            if len(out) == count:
                break
        return out


class RunSummary(BaseModel):
    """One line of a runs list: what the run is and how far it got, without its messages."""

    id: str
    status: str
    tenant: str
    model: str = ""
    step: int = 0
    created_at: float = 0.0
    finished_at: float | None = None
    total_tokens: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    thread_id: str | None = None  # the thread it continues (orchestrator/threads/)


class RunPage(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None = None


def summarize(run_id: str, meta: dict[str, str]) -> RunSummary:
    spec = json.loads(meta.get("spec", "{}"))
    model = spec.get("model", {})
    return RunSummary(
        id=run_id,
        status=meta.get("status", "running"),
        tenant=meta.get("tenant", DEFAULT_TENANT),
        model=f"{model.get('provider', '')}:{model.get('name', '')}" if model else "",
        step=int(meta.get("step", 0)),
        created_at=float(meta.get("created_at", 0)),
        finished_at=float(meta["finished_at"]) if "finished_at" in meta else None,
        total_tokens=int(meta.get("u_total", 0)),
        metadata=spec.get("metadata") or {},
        thread_id=spec.get("thread_id"),
    )


def matches(summary: RunSummary, status: str | None, metadata: dict[str, str]) -> bool:
    """Metadata values compare as text, the way they arrive in a query string."""
    if status is not None and summary.status != status:
        return False
    for key, wanted in metadata.items():
        value = summary.metadata.get(key)
        shown = value if isinstance(value, str) else json.dumps(value)
        if key not in summary.metadata or shown != wanted:
            return False
    return True
