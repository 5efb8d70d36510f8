"""Which runs a tenant has, newest first: a sorted set per tenant, scored by creation time.

Written right after a run is created (not inside the create transition, so the Lua
scripts stay the store's alone); a crash between the two leaves the run unlisted but
otherwise whole, until its submission is repeated (a re-delivered job's is), which lists
it. Entries older than the retention are trimmed on every write, and the
set itself expires with the retention, so the index never outlives the runs it names.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.runs.state.usage import stored_usage


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
        await self.add_many([(run_id, tenant, created_at)])

    async def add_many(self, runs: list[tuple[str, str | None, float | None]]) -> None:
        """`add` for many (run id, tenant, created at), in one round trip."""
        if not runs:
            return
        now = time.time()
        indexes: set[str] = set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for run_id, tenant, created_at in runs:
                tenant = tenant or DEFAULT_TENANT
                indexes.add(index_key(tenant))
                pipe.hsetnx(keys.meta(run_id), "tenant", tenant)
                pipe.zadd(index_key(tenant), {run_id: created_at or now}, nx=True)
            for key in indexes:
                pipe.zremrangebyscore(key, "-inf", now - self.retention_s)
                pipe.expire(key, self.retention_s)
            await pipe.execute()

    async def page(
        self,
        tenant: str | None,
        *,
        after: Cursor | None,
        created_after: float | None,
        count: int,
        created_before: float | None = None,
    ) -> list[tuple[str, float]]:
        """Up to `count` (run id, created at) pairs older than the cursor and created in
        (created_after, created_before], newest first."""
        bounds = [t for t in (after.created_at if after else None, created_before) if t is not None]
        high: Any = min(bounds) if bounds else "+inf"
        low: Any = f"({created_after}" if created_after is not None else "-inf"
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
    start_at: float | None = None  # a delayed run's start
    total_tokens: int = 0
    # What its own steps cost in USD (its sub-agents' runs are listed with their own);
    # None: a step's model had no price.
    cost_usd: float | None = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    thread_id: str | None = None  # the thread it continues (orchestrator/threads/)
    # The id the spec chose (in its tenant's namespace the run's id ends with it).
    custom_id: str | None = None
    # A failed run's failure kind (`provider`, `tool`, `limit`, ...: RunFailure.kind).
    error_kind: str | None = None
    # A sub-agent's run: the run whose call started it.
    parent: str | None = None


class RunPage(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None = None
    # How many runs this page read to find its runs (a filtered page may read many).
    scanned: int = 0


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
        start_at=float(meta["start_at"]) if "start_at" in meta else None,
        total_tokens=int(meta.get("u_total", 0)),
        cost_usd=stored_usage(meta).cost_usd,
        metadata=spec.get("metadata") or {},
        thread_id=spec.get("thread_id"),
        custom_id=spec.get("id"),
        error_kind=json.loads(meta["error"]).get("type") if "error" in meta else None,
        parent=json.loads(meta["parent"])["run_id"] if "parent" in meta else None,
    )


def _text(value: Any) -> str:
    """A metadata value as text, the way it arrives in a query string."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class RunFilter:
    """Which runs a list shows: every field given must hold (the time range is the
    index's, applied before a run is read)."""

    status: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    # A substring of the provider:model, case-insensitive ("gpt-4o" finds openai:gpt-4o-mini).
    model: str | None = None
    error_kind: str | None = None
    # A substring of the run's id, its custom id or any metadata value, case-insensitive.
    search: str | None = None
    # A tool the run called (by name): not a summary's, read from its steps (listing.py).
    tool: str | None = None

    def admits(self, run: RunSummary) -> bool:
        if self.status is not None and run.status != self.status:
            return False
        if self.error_kind is not None and run.error_kind != self.error_kind:
            return False
        if self.model is not None and self.model.lower() not in run.model.lower():
            return False
        for key, wanted in self.metadata.items():
            if key not in run.metadata or _text(run.metadata[key]) != wanted:
                return False
        return self.search is None or self._found(run)

    def _found(self, run: RunSummary) -> bool:
        assert self.search is not None
        needle = self.search.lower()
        texts = [run.id, run.custom_id or "", *map(_text, run.metadata.values())]
        return any(needle in text.lower() for text in texts)
