"""A full Redis (over its maxmemory) takes no new run, and a submit asks it with no call
of its own: the create transition is a script under Lua's shebang (`runs/lua/create.lua`,
no `allow-oom`), which Redis 7 refuses whole before it runs. Without the shebang the
create's first write (a DEL) passes a full Redis, and the rest of the script with it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import InfrastructureError, RunNotFoundError
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.config_set("maxmemory", "0")
        await client.aclose()


async def _script_calls(admin: aioredis.Redis) -> int:
    stats = await admin.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0)) + int(
        stats.get("cmdstat_eval", {}).get("calls", 0)
    )


async def test_a_full_redis_refuses_the_create_itself(
    redis_url: str, admin: aioredis.Redis
) -> None:
    async with Client(redis_url) as client:
        await client.runs.submit(scripted({"text": "done"}))  # the scripts loaded
        # No admit call: the create transition alone must refuse.
        client.runs._creation.admit = _nothing  # type: ignore[method-assign]
        written = set(await admin.keys("*"))
        await admin.config_set("maxmemory", "1")
        with pytest.raises(InfrastructureError, match="out of memory") as refused:
            await client.runs.submit(scripted({"text": "done"}, id="while-full"))
        assert refused.value.retryable
        assert set(await admin.keys("*")) == written  # nothing of the run, not even a DEL's
        await admin.config_set("maxmemory", "0")
        with pytest.raises(RunNotFoundError):
            await client.runs.status("while-full")
        # Once memory is freed, the same submit creates it.
        run_id = await client.runs.submit(scripted({"text": "done"}, id="while-full"))
        assert (await client.runs.status(run_id)).status == "running"


async def test_a_submit_is_one_script_call(redis_url: str, admin: aioredis.Redis) -> None:
    async with Client(redis_url) as client:
        await client.runs.submit(scripted({"text": "done"}))  # the scripts loaded
        before = await _script_calls(admin)
        await client.runs.submit(scripted({"text": "done"}))
        assert await _script_calls(admin) - before == 1  # the create (2 with an admit)
        # A full Redis still refuses the next one, with what it means.
        await admin.config_set("maxmemory", "1")
        with pytest.raises(InfrastructureError, match="out of memory"):
            await client.runs.submit(scripted({"text": "done"}))


async def _nothing() -> None:
    return None
