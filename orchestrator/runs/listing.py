"""Reading a tenant's runs a page at a time: the index's pages, each run's meta, the filter.

A filtered list reads runs until its page is full or `scan_limit` runs are read, and
hands back a cursor where it stopped, so one request costs at most `scan_limit` reads
however rare the match; a caller that wants more goes on from the cursor (the dashboard
does, saying how many runs it has searched). This is a scan and not an index of the
searched text on purpose: `search` matches substrings of ids and metadata values, which
a sorted set cannot answer without a full-text engine the deployment's Redis (and Redis
Cluster) does not have, and an index written by every create would serve exact ids only.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.runs.index import Cursor, RunFilter, RunIndex, RunPage, summarize
from agentq.orchestrator.runs.state import MetaField, StepField


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def list_runs(
    redis: Redis,
    index: RunIndex,
    tenant: str | None,
    wanted: RunFilter,
    *,
    after: Cursor | None,
    created_after: float | None,
    created_before: float | None,
    limit: int,
    scan_limit: int,
) -> RunPage:
    """Up to `limit` of the tenant's runs older than `after` that `wanted` admits, newest
    first, having read at most `scan_limit` runs (`RunPage.scanned`)."""
    page = RunPage(runs=[])
    while len(page.runs) < limit and page.scanned < scan_limit:
        batch = await index.page(
            tenant,
            after=after,
            created_after=created_after,
            created_before=created_before,
            count=min(200, scan_limit - page.scanned),
        )
        if not batch:
            return page
        async with redis.pipeline(transaction=False) as pipe:
            for run_id, _ in batch:
                pipe.hgetall(keys.meta(run_id))
            metas = await pipe.execute()
        admitted = {
            run_id: meta
            for (run_id, _), raw in zip(batch, metas, strict=True)
            if raw  # an empty one expired with its retention
            for meta in [{_text(k): _text(v) for k, v in raw.items()}]
            if wanted.admits(summarize(run_id, meta))
        }
        if wanted.tool is not None:
            admitted = await _calling(redis, admitted, wanted.tool)
        for run_id, created_at in batch:
            if len(page.runs) == limit:
                break
            page.scanned += 1
            after = Cursor(created_at, run_id)
            if run_id in admitted:
                page.runs.append(summarize(run_id, admitted[run_id]))
    page.next_cursor = after.encode() if after else None
    return page


Metas = dict[str, dict[str, str]]  # run id -> its meta hash


async def _calling(redis: Redis, runs: Metas, tool: str) -> Metas:
    """The runs whose steps called `tool`: only the runs offered it are read further (their
    steps' call records), so a rare tool costs few reads beyond the metas."""
    offered = {
        r: m for r, m in runs.items() if tool in json.loads(m.get(MetaField.TOOL_ORDER, "[]"))
    }
    steps = {r: range(int(m.get(MetaField.STEP, 0)) + 1) for r, m in offered.items()}
    async with redis.pipeline(transaction=False) as pipe:
        for run_id, numbers in steps.items():
            for n in numbers:
                pipe.hgetall(keys.step(run_id, n))
        records = iter(await pipe.execute())
    called: Metas = {}
    for run_id, numbers in steps.items():
        names = {
            json.loads(_text(value)).get("name")
            for _ in numbers
            for field, value in next(records).items()
            if _text(field).startswith(StepField.CALL)
        }
        if tool in names:
            called[run_id] = offered[run_id]
    return called
