"""`call_redrive` applied directly on a real redis-server: a call whose job was lost is
enqueued again, once; a surviving or held job is not doubled; a done or vanished call
leaves the moving index."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.calls.catalogue import create_call_args, finish_call_args
from agentq.orchestrator.calls.redrive import CallRedriver
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.keys import ARQ_IN_PROGRESS_PREFIX
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.tools import ToolDef

pytestmark = pytest.mark.component

TOOL = ToolDef(name="add", kind="function", queue="tools", timeout_s=5)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def _index(redis: Redis, call_id: str) -> float | None:
    score: float | None = await redis.zscore(keys.moving_calls(keys.partition_of(call_id)), call_id)
    return score


async def _lose(redis: Redis, job_id: str) -> None:
    assert await redis.delete(keys.arq_job(job_id)) == 1
    assert await redis.zrem(keys.job_queue("tools", job_id), job_id) == 1


async def test_a_lost_call_job_is_enqueued_again_once(redis: Redis) -> None:
    store = CallStore(redis)
    create = create_call_args("c1", TOOL, {"a": 1}, tenant="t", trace={"traceparent": "x"})
    await store.create(create)
    assert await _index(redis, "c1") is not None
    job_id = keys.call_job_id("c1")
    await _lose(redis, job_id)

    sweeper = CallRedriver(store, after_s=30.0, limit=10)
    assert await sweeper.redrive("c1") == 1
    assert await redis.get(keys.arq_job(job_id)) is not None
    assert await redis.zscore(keys.job_queue("tools", job_id), job_id) is not None
    assert await sweeper.redrive("c1") == 0  # delivered twice: the job is there now

    # Held by a worker (arq read its key; the lease names it): not doubled either.
    await redis.delete(keys.arq_job(job_id))
    await redis.set(ARQ_IN_PROGRESS_PREFIX + job_id, "w1")
    assert await sweeper.redrive("c1") == 0
    assert await redis.get(keys.arq_job(job_id)) is None


async def test_a_done_or_vanished_call_leaves_the_index(redis: Redis) -> None:
    store = CallStore(redis)
    await store.create(create_call_args("c1", TOOL, {"a": 1}, tenant="t", trace={}))
    result = ToolResultPart(tool_call_id="c1", tool_name="add", output=2)
    await store.finish(finish_call_args("c1", result))
    assert await _index(redis, "c1") is None
    await _lose(redis, keys.call_job_id("c1"))
    assert await CallRedriver(store, after_s=30.0, limit=10).redrive("c1") == 0
    assert await redis.get(keys.arq_job(keys.call_job_id("c1"))) is None

    await redis.zadd(keys.moving_calls(), {"ghost": 0})
    assert await CallRedriver(store, after_s=30.0, limit=10).sweep() is not None
    assert await _index(redis, "ghost") is None


async def test_a_pass_reads_only_the_stale_calls(redis: Redis) -> None:
    store = CallStore(redis)
    ids = [f"c{i}" for i in range(50)]
    for call_id in ids:
        await store.create(create_call_args(call_id, TOOL, {"a": 1}, tenant="t", trace={}))
    await redis.zadd(keys.moving_calls(), {"c7": 0})
    await _lose(redis, keys.call_job_id("c7"))

    swept = await CallRedriver(store, after_s=30.0, limit=10).sweep()

    assert (swept.examined, swept.redriven) == (1, 1)
    assert await redis.get(keys.arq_job(keys.call_job_id("c7"))) is not None
