"""`runs.wait` blocks on the run's end notice (a stream its waiters make and its end
writes its status to: runs/lua/prelude.lua, `ended_key`; RunStore.watch_end), not on
every event the run emits on the way: a wait reads the status as it makes the notice
ready, blocks once, and reads the result. Every waiter of a run returns, one that comes
late too; a run nobody waits for has no notice; a full Redis (which refuses the notice)
is waited through by the status. On the real redis-server and the embedded (memory://)
one alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.runs.store import END_NOTICE_TTL_S
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


@pytest.fixture(params=["redis", "memory"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    real = request.param == "redis"
    url = request.getfixturevalue("redis_url") if real else f"memory://w-{uuid.uuid4().hex}"
    async with Client(url) as opened:
        yield opened


async def _progress(client: Client, run_id: str, times: int, pause_s: float = 0.0) -> None:
    """Events on the way, each of which woke a follower of the run's events."""
    for n in range(times):
        said = event_json("text-delta", run_id, step=0, delta=f"part {n}")
        await client.runs.store.emit(run_id, [said])
        await asyncio.sleep(pause_s)


async def test_every_waiter_returns_at_the_runs_end(client: Client) -> None:
    run_id = await client.runs.submit(scripted({"text": "done"}))  # no worker: it waits
    waiters = [asyncio.create_task(client.runs.wait(run_id, timeout_s=30)) for _ in range(3)]
    await asyncio.sleep(0.2)  # blocked on the notice
    await _progress(client, run_id, 3, 0.03)  # they wake no waiter for good
    assert not any(w.done() for w in waiters)
    await client.runs.cancel(run_id, "enough")
    results = await asyncio.gather(*waiters)
    assert [r.status for r in results] == ["cancelled"] * 3
    # One that comes after the end returns at once.
    assert (await client.runs.wait(run_id, timeout_s=5)).status == "cancelled"
    # The notice outlives its last waiter by a while, not the run's retention.
    assert 0 < await client.redis.ttl(keys.ended(run_id)) <= END_NOTICE_TTL_S


async def test_a_run_nobody_waits_for_has_no_notice(client: Client) -> None:
    run_id = await client.runs.submit(scripted({"text": "done"}))
    await client.runs.cancel(run_id)
    assert not await client.redis.exists(keys.ended(run_id))


async def test_a_wait_for_no_run_raises_at_once(client: Client) -> None:
    with pytest.raises(RunNotFoundError):
        await client.runs.wait("no-such-run", timeout_s=30)


async def test_a_wait_blocks_once_not_per_event(redis_url: str) -> None:
    admin = aioredis.Redis.from_url(redis_url)
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(scripted({"text": "done"}))
        before = await admin.info("commandstats")
        waiter = asyncio.create_task(client.runs.wait(run_id, timeout_s=30))
        await asyncio.sleep(0.2)
        await _progress(client, run_id, 5, 0.05)
        await client.runs.cancel(run_id)
        assert (await waiter).status == "cancelled"
        after = await admin.info("commandstats")
    await admin.aclose()

    def calls(name: str) -> int:
        return int(after.get(f"cmdstat_{name}", {}).get("calls", 0)) - int(
            before.get(f"cmdstat_{name}", {}).get("calls", 0)
        )

    assert calls("xread") == 1  # the end notice, once (a follower read 6 times)
    assert calls("exec") == 1  # the status read as the notice is made ready


async def test_a_run_that_ended_before_its_notice_existed_is_waited_for(client: Client) -> None:
    # Ended by an older version (no notice): its status says so.
    run_id = await client.runs.submit(scripted({"text": "done"}))
    await client.runs.cancel(run_id)
    await client.redis.delete(keys.ended(run_id))
    assert (await client.runs.wait(run_id, timeout_s=5)).status == "cancelled"


async def test_a_full_redis_is_waited_through_by_the_status(redis_url: str) -> None:
    admin = aioredis.Redis.from_url(redis_url)
    try:
        async with Client(redis_url) as client:
            run_id = await client.runs.submit(scripted({"text": "done"}))
            await admin.config_set("maxmemory", "1")  # the notice is a write: refused
            waiter = asyncio.create_task(client.runs.wait(run_id, timeout_s=30))
            await asyncio.sleep(1.5)
            assert not waiter.done()  # waiting, not failed
            await admin.config_set("maxmemory", "0")
            await client.runs.cancel(run_id)
            assert (await waiter).status == "cancelled"
    finally:
        await admin.config_set("maxmemory", "0")
        await admin.aclose()
