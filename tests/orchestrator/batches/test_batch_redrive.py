"""Admission jobs a failover drops, on a real redis-server: a lost kick, a kick and an
end job lost after they admitted a line but before they created its run, a run's lost
end job. Each is enqueued again by the workers' sweeper (orchestrator/batches/redrive.py)
and the batch ends with every line run once; a line nothing can drive any more fails,
saying so. A pass reads only the stale window: its cost does not grow with the number
of healthy batches. And an end job that runs after its run's keys expired fails its
line; an upload nobody seals expires."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from agentq.orchestrator.batches.admission import kick_job, line_record, run_admission
from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.batches.redrive import BatchRedriver
from agentq.orchestrator.batches.state import (
    BatchOpen,
    BatchSeal,
    BatchSettle,
    BatchUpload,
    UploadLine,
)
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, BatchJobEnvelope
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.redrive import Redriver
from agentq.workers.worker.embedded import embedded
from tests.support.redis_fixtures import redis_server, redis_url
from tests.support.sample_tools import noop
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

__all__ = ["redis_server", "redis_url"]

# The sweeper looks at entries unmoved this long: well below the default.
SWEEPING = Settings(idle_poll_s=0.1, lease_s=5.0, redrive_after_s=0.3)
TEMPLATE = scripted(calls(("noop", {})), {"text": "done"}, tools=["noop"], prompt="{{q}}")
# What lines created by hand use: nothing a worker must announce.
PLAIN = scripted({"text": "done"}, prompt="{{q}}")
TENANT = "default"


def rows(n: int) -> list[dict[str, Any]]:
    return [{"custom_id": f"c{i}", "vars": {"q": str(i)}} for i in range(1, n + 1)]


async def lose(redis: Redis, job_id: str) -> None:
    """What a failover can do to a job: its key and its queue entry gone."""
    assert await redis.delete(keys.arq_job(job_id)) == 1
    assert await redis.zrem(keys.job_queue(MODEL_QUEUE, job_id), job_id) == 1


async def settled_then_lost(
    client: Client, job: BatchJobEnvelope, *, by: BatchJobEnvelope | None
) -> str:
    """Play the worker that took an admission job, settled it (admitting one line) and
    died before creating the line's run, while a failover lost the job itself. `by`:
    the job the settle names (None: a settle no job made). The admitted run id."""
    job_id = queued_job(job).job_id
    await lose(client.redis, job_id)
    record = None
    if job.run_id is not None:
        record = line_record(await client.runs.store.meta(job.run_id))
    settle = BatchSettle(
        batch_id=job.batch_id, token=job_id, by=by, line=job.line, run_id=job.run_id, record=record
    )
    (admission,) = (await client.batches.store.settle(TENANT, settle)).admitted
    return admission.run_id


async def first_line_cancelled(client: Client, batch_id: str) -> BatchJobEnvelope:
    """A batch of 3 lines, one at a time: its kick run by hand (line 1's run created),
    that run cancelled, so its end job waits on the queue. That end job's envelope."""
    await client.batches.submit(rows(3), template=PLAIN, batch_id=batch_id, concurrency=1)
    kick = seal_kick(batch_id)
    await lose(client.redis, queued_job(kick).job_id)
    assert await run_admission(client, kick, queued_job(kick).job_id) == 1
    (record,) = [r async for r in client.batches.results(batch_id, statuses=["running"])]
    assert record.run_id is not None
    await client.runs.cancel(record.run_id)
    end = BatchJobEnvelope(tenant=TENANT, batch_id=batch_id, line=1, run_id=record.run_id)
    assert await client.redis.exists(keys.arq_job(queued_job(end).job_id))
    return end


def entry(batch_id: str) -> str:
    """A batch's entry in the moving index, as the batch transitions write it."""
    return json.dumps([TENANT, batch_id], separators=(",", ":"))


def seal_kick(batch_id: str) -> BatchJobEnvelope:
    return BatchJobEnvelope(tenant=TENANT, batch_id=batch_id, nonce="seal")


async def finished(client: Client, batch_id: str) -> BatchInfo:
    async def check() -> BatchInfo | None:
        info = await client.batches.status(batch_id)
        return info if info.ended else None

    found: BatchInfo | None = await eventually_async(check, f"batch {batch_id} to end", 60)
    assert found is not None
    return found


async def test_a_line_whose_kick_was_lost_before_its_run_existed_runs(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        await client.batches.submit(rows(3), template=TEMPLATE, batch_id="k1", concurrency=1)
        kick = seal_kick("k1")
        run_id = await settled_then_lost(client, kick, by=kick)
        assert not await client.redis.exists(keys.meta(run_id))
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "k1")
        assert (info.status, info.counts.succeeded, info.counts.failed) == ("done", 3, 0)
        first, *_ = [r async for r in client.batches.results("k1")]
        assert (first.custom_id, first.run_id, first.text) == ("c1", run_id, "done")


async def test_a_runs_lost_end_job_is_enqueued_again(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        end = await first_line_cancelled(client, "e1")
        await lose(client.redis, queued_job(end).job_id)
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "e1")
        assert (info.status, info.counts.cancelled, info.counts.succeeded) == ("done", 1, 2)


async def test_a_line_whose_end_job_was_lost_before_its_run_existed_runs(
    redis_url: str,
) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        end = await first_line_cancelled(client, "e2")
        run_id = await settled_then_lost(client, end, by=end)
        assert not await client.redis.exists(keys.meta(run_id))
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "e2")
        assert (info.status, info.counts.cancelled, info.counts.succeeded) == ("done", 1, 2)
        _first, second, _third = [r async for r in client.batches.results("e2")]
        assert (second.run_id, second.status, second.text) == (run_id, "succeeded", "done")


async def test_a_line_nothing_can_drive_fails_and_the_batch_goes_on(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        await client.batches.submit(rows(3), template=TEMPLATE, batch_id="g1", concurrency=1)
        run_id = await settled_then_lost(client, seal_kick("g1"), by=None)
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "g1")
        assert (info.status, info.counts.succeeded, info.counts.failed) == ("done", 2, 1)
        (failed,) = [r async for r in client.batches.results("g1", statuses=["failed"])]
        assert (failed.custom_id, failed.run_id) == ("c1", run_id)
        assert f"run {run_id} is gone" in (failed.error or "")


async def test_a_lost_kick_is_replaced(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        await client.batches.submit(rows(2), template=TEMPLATE, batch_id="s1", concurrency=1)
        await lose(client.redis, keys.batch_kick_job_id(TENANT, "s1", "seal"))
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "s1")
        assert (info.status, info.counts.succeeded) == ("done", 2)


@pytest.fixture
def single_partition_after() -> Iterator[None]:
    try:
        yield
    finally:
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


async def test_the_index_is_the_tenants_partitions(
    redis_url: str, single_partition_after: None
) -> None:
    async with Client(redis_url, settings=Settings(partitions=4)) as client:
        await client.batches.submit(rows(2), template=PLAIN, batch_id="p1", concurrency=1)
        partition = keys.partition_of(keys.BATCH_TAG_PREFIX + TENANT)
        index = keys.moving_batches(partition)
        assert await client.redis.zscore(index, entry("p1")) is not None
        await client.redis.zadd(index, {entry("p1"): 0})
        await lose(client.redis, keys.batch_kick_job_id(TENANT, "p1", "seal"))
        runs = Redriver(client.runs.store, after_s=30.0, limit=10)
        swept = await BatchRedriver(client, runs, after_s=30.0, limit=10).sweep()
        assert (swept.examined, swept.redriven) == (1, 1)  # a new kick


async def commands(redis: Redis) -> int:
    """Commands Redis ran since the last reset, those scripts ran included."""
    stats = await redis.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def test_a_pass_costs_the_same_however_many_healthy_batches(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        redis = client.redis
        runs = Redriver(client.runs.store, after_s=30.0, limit=100)
        sweeper = BatchRedriver(client, runs, after_s=30.0, limit=100)
        cost = []
        for healthy in (5, 50):
            made = await redis.zcard(keys.moving_batches())
            for i in range(made, healthy):
                # Each waits for room: its kick ran (one line admitted), one line queued.
                batch_id = f"h{i}"
                await client.batches.submit(
                    rows(2), template=PLAIN, batch_id=batch_id, concurrency=1
                )
                kick = seal_kick(batch_id)
                await lose(redis, queued_job(kick).job_id)
                await run_admission(client, kick, queued_job(kick).job_id)
            # Two batches last moved long ago: the stale window of this pass (twice: the
            # first loads the script on this server).
            stale = {entry(f"h{i}"): 0 for i in (healthy - 2, healthy - 1)}
            for _ in range(2):
                assert await redis.zadd(keys.moving_batches(), stale) == 0  # rescored
                await redis.config_resetstat()
                swept = await sweeper.sweep()
                assert (swept.examined, swept.redriven) == (2, 0)  # no room: kicks ran
            cost.append(await commands(redis))
        assert cost[0] == cost[1], cost


async def test_an_end_job_after_the_runs_keys_expired_fails_the_line(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        await client.batches.submit(rows(1), template=TEMPLATE, batch_id="lost3")
        run_id = await settled_then_lost(client, seal_kick("lost3"), by=None)
        # The run ran and ended, and its keys expired before its end job ran: nothing of
        # the run is left. The job used to wait for the run to end, forever.
        envelope = BatchJobEnvelope(tenant="default", batch_id="lost3", line=1, run_id=run_id)
        await run_admission(client, envelope, keys.batch_end_job_id(run_id))
        info = await client.batches.status("lost3")
        assert (info.status, info.counts.failed, info.counts.running) == ("done", 1, 0)
        (failed,) = [r async for r in client.batches.results("lost3", statuses=["failed"])]
        assert f"run {run_id} is gone" in (failed.error or "")


async def test_an_unsealed_upload_expires_unless_resumed_or_sealed(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        store, tenant = client.batches.store, "default"
        opened = BatchOpen(
            batch_id="up1",
            tenant=tenant,
            run_prefix=keys.batch_run_prefix(tenant, "up1", "n1"),
            concurrency=1,
            priority=1,
            metadata="{}",
            retention_s=3600,
            upload_ttl_s=100,
        )
        await store.open(tenant, opened)
        line = UploadLine(line=1, custom_id="a", spec=json.dumps(TEMPLATE), placement="")
        await store.upload(tenant, BatchUpload(batch_id="up1", lines=[line], upload_ttl_s=100))
        owned = keys.batch_keys(tenant, "up1")

        async def ttls() -> list[int]:
            return [await client.redis.ttl(k) for k in owned if await client.redis.exists(k)]

        assert all(0 < t <= 100 for t in await ttls())  # abandoned now, it would expire
        for key in owned:
            await client.redis.expire(key, 5)
        line2 = UploadLine(line=2, custom_id="b", spec=json.dumps(TEMPLATE), placement="")
        await store.upload(tenant, BatchUpload(batch_id="up1", lines=[line2], upload_ttl_s=100))
        assert all(t > 5 for t in await ttls())  # a resumed chunk pushes the expiry back
        kick = kick_job(tenant, "up1", "seal")
        await store.seal(tenant, BatchSeal(batch_id="up1", lines=2, kick=kick))
        assert set(await ttls()) == {-1}  # sealed: it lives until it ends, then its retention
