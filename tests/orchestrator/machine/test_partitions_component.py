"""Several partitions on one Redis (what a cluster runs, all on one node): runs spread over
the partitions' queues, workers serve them all, a cancel reaches its partition's abort set."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import forget_memory_server
from agentq.workers.worker.embedded import embedded
from tests.support.sample_tools import nap, noop
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

PARTITIONS = 4
SETTINGS = Settings(partitions=PARTITIONS, idle_poll_s=0.2)
SPEC = scripted(calls(("noop", {}), ("noop", {})), {"text": "done"}, tools=["noop"])


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    try:
        async with embedded(tools=[noop, nap], settings=SETTINGS) as c:
            yield c
    finally:
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


async def test_runs_on_every_partition_succeed(client: Client) -> None:
    assert keys.partition_count() == PARTITIONS
    # Run ids are random: 24 missed a partition once in ~250 (4 x (3/4)^24), so runs are
    # submitted until every partition has some (past 24, rarely more than a few).
    run_ids: list[str] = []
    while len(run_ids) < 24 or {keys.partition_of(r) for r in run_ids} != set(range(PARTITIONS)):
        assert len(run_ids) < 400, "run ids that never reach a partition"
        run_ids.append(await client.runs.submit(SPEC))
    results = await asyncio.gather(*(client.runs.wait(r, timeout_s=30) for r in run_ids))
    assert {r.status for r in results} == {"succeeded"}
    assert {keys.partition_of(r) for r in run_ids} == set(range(PARTITIONS))
    for run_id in run_ids:  # a run's keys carry its partition's tag
        assert await client.redis.exists(keys.meta(run_id))
        assert keys.partition_tag(keys.partition_of(run_id)) in keys.meta(run_id)


async def test_a_cancel_aborts_a_running_job_through_its_partitions_abort_set(
    client: Client,
) -> None:
    spec = scripted(calls(("nap", {"seconds": 60, "tag": "x"})), tools=["nap"])
    run_id = await client.runs.submit(spec)
    call_id = None
    async for event in client.runs.events(run_id, follow=True):
        if event.type == "tool-running":
            call_id = event.tool_call_id
            break
    assert call_id is not None
    job_id = keys.tool_job_id(run_id, 0, call_id)
    running = keys.ARQ_IN_PROGRESS_PREFIX + job_id
    assert await client.redis.exists(running)
    await client.runs.cancel(run_id, "stop")
    # The nap would hold its job for a minute: the abort ends it (its partition's set).
    await eventually_async(
        lambda: _gone(client, running), "the aborted job to end", 20, interval_s=0.02
    )
    assert (await client.runs.wait(run_id, timeout_s=5)).status == "cancelled"


async def _gone(client: Client, key: str) -> bool:
    return not await client.redis.exists(key)


async def test_a_worker_with_another_partition_count_refuses_to_start() -> None:
    url = f"memory://partitions-{uuid.uuid4().hex}"
    try:
        async with embedded(redis_url=url, settings=Settings(partitions=2)):
            pass  # the first worker records the deployment's count
        with pytest.raises(InfrastructureError, match="AGENTQ_PARTITIONS=2"):
            async with embedded(redis_url=url, settings=Settings(partitions=3)):
                pass
    finally:
        forget_memory_server(url)
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)
