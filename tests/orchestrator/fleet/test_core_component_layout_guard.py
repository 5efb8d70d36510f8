"""A worker joins only a fleet of its own state layout (`fleet/layout_guard.py`), on the
embedded Redis: the live records and the fleet's layout key, each of which refuses a
newcomer of another layout; a record an earlier release wrote (no layout) is layout 0;
a fleet gone (records stale, key expired or let go) takes any layout."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.fleet import layout_guard, listings
from agentq.orchestrator.fleet.layout import (
    EARLIER_LAYOUT,
    STATE_LAYOUT,
    TEST_OVERRIDE,
    this_layout,
)
from agentq.orchestrator.fleet.layout_guard import LAYOUT, MixedFleetError
from agentq.orchestrator.redis.connect import connect

pytestmark = pytest.mark.component


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = connect(f"memory://layout-{uuid.uuid4().hex}")
    yield client
    await client.aclose()


def record(worker_id: str, layout: int, seen_at: float | None = None) -> listings.WorkerRecord:
    now = time.time() if seen_at is None else seen_at
    return listings.WorkerRecord(
        id=worker_id,
        host="h",
        pid=1,
        queues=["model"],
        concurrency=1,
        started_at=now,
        layout=layout,
    )


async def beat_as_before_layouts(redis: Redis, worker_id: str) -> None:
    """A record as a release from before layouts wrote it: the same JSON, no `layout`."""
    fields = record(worker_id, 0).model_dump()
    del fields["layout"]
    fields["seen_at"] = time.time()
    await redis.hset(listings.WORKERS, worker_id, json.dumps(fields))  # type: ignore[misc]


def test_this_release_is_past_the_earlier_layout_and_a_test_may_pretend_otherwise() -> None:
    assert STATE_LAYOUT > EARLIER_LAYOUT
    assert this_layout({}) == STATE_LAYOUT
    assert this_layout({TEST_OVERRIDE: "7"}) == 7


async def test_a_record_without_a_layout_is_the_earlier_release(redis: Redis) -> None:
    await beat_as_before_layouts(redis, "old-1")
    [old] = await listings.live_workers(redis)
    assert old.layout == EARLIER_LAYOUT


async def test_an_earlier_release_alive_refuses_the_newcomer_and_leaves_the_key(
    redis: Redis,
) -> None:
    await beat_as_before_layouts(redis, "old-1")
    with pytest.raises(MixedFleetError) as refused:
        await layout_guard.join(redis, STATE_LAYOUT)
    message = refused.value.message
    assert isinstance(refused.value, InfrastructureError)  # the CLI's exit 3
    assert "\n" not in message
    assert f"layout {STATE_LAYOUT}" in message
    assert "layout 0 (a release from before layouts were recorded)" in message
    assert "old-1" in message
    assert "Drain the old pool first" in message
    assert "docs/deploy/helm.md#upgrading-across-a-change-of-the-run-states-layout" in message
    assert await redis.get(LAYOUT) is None


async def test_the_same_layout_joins_and_holds_the_key(redis: Redis) -> None:
    await listings.heartbeat(redis, record("w1", STATE_LAYOUT))
    await layout_guard.join(redis, STATE_LAYOUT)
    assert await redis.get(LAYOUT) == str(STATE_LAYOUT).encode()
    ttl_ms = await redis.pttl(LAYOUT)
    assert 0 < ttl_ms <= listings.WORKER_STALE_S * 1000


async def test_the_key_refuses_another_layout_before_any_record_is_written(
    redis: Redis,
) -> None:
    # Two start at once: neither has beaten yet, the first to claim the key wins.
    await layout_guard.join(redis, 2)
    with pytest.raises(MixedFleetError) as refused:
        await layout_guard.join(redis, 1)
    assert "layout 1" in refused.value.message
    assert "layout 2" in refused.value.message
    # The holder's beat keeps it; the refused one's claim changed nothing.
    assert await layout_guard.claim(redis, 2) == 2
    assert await layout_guard.claim(redis, 1) == 2


async def test_a_fleet_gone_takes_any_layout(redis: Redis) -> None:
    # Records not heard from for WORKER_STALE_S are gone; so is a key no beat kept.
    await listings.heartbeat(redis, record("old-1", 1))
    stale = time.time() + listings.WORKER_STALE_S + 1
    assert await listings.live_workers(redis, now=stale) == []
    await layout_guard.join(redis, 2)  # the stale record dropped on the way
    assert await redis.get(LAYOUT) == b"2"


async def test_the_last_worker_to_stop_lets_the_layout_go_and_no_other(redis: Redis) -> None:
    await listings.heartbeat(redis, record("w1", 1))
    await listings.heartbeat(redis, record("w2", 1))
    await layout_guard.join(redis, 1)
    await listings.forget_worker(redis, "w1")
    await layout_guard.leave(redis, 1)
    assert await redis.get(LAYOUT) == b"1"  # w2 still runs
    await listings.forget_worker(redis, "w2")
    await layout_guard.leave(redis, 2)  # not its layout: nothing to let go
    assert await redis.get(LAYOUT) == b"1"
    await layout_guard.leave(redis, 1)
    assert await redis.get(LAYOUT) is None
    await layout_guard.join(redis, 2)
