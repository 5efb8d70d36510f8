"""Lines nothing would end, on a real redis-server: an admission job arq dropped after
its settle (the line's run was never created), a run whose end job was dropped, and an
end job that runs after the run's keys expired. Each line ends, counted, instead of
staying `running` forever (see orchestrator/batches/sweep.py). And an upload nobody seals
expires."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentq.orchestrator.batches.admission import kick_job, run_admission
from agentq.orchestrator.batches.api import BatchInfo
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
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.worker.embedded import embedded
from tests.support.redis_fixtures import redis_server, redis_url
from tests.support.sample_tools import noop
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

__all__ = ["redis_server", "redis_url"]

SWEEPING = Settings(idle_poll_s=0.1, lease_s=5.0, batch_sweep_s=0.2)
TEMPLATE = scripted(calls(("noop", {})), {"text": "done"}, tools=["noop"], prompt="{{q}}")


def rows(n: int) -> list[dict[str, Any]]:
    return [{"custom_id": f"c{i}", "vars": {"q": str(i)}} for i in range(1, n + 1)]


async def admitted_by_a_dropped_kick(client: Client, batch_id: str, n: int) -> str:
    """Submit with no worker up, then play the worker whose kick job settled (admitting
    line 1) and was then dropped by arq: the job is gone, the line is `running`. Returns
    the run id line 1 was admitted as."""
    await client.batches.submit(rows(n), template=TEMPLATE, batch_id=batch_id, concurrency=1)
    job_id = keys.batch_kick_job_id("default", batch_id, "seal")
    await client.redis.delete(keys.arq_job(job_id))
    await client.redis.zrem(keys.job_queue(MODEL_QUEUE, job_id), job_id)
    reply = await client.batches.store.settle(
        "default", BatchSettle(batch_id=batch_id, token=job_id)
    )
    (admission,) = reply.admitted
    assert (await client.batches.status(batch_id)).counts.running == 1
    return admission.run_id


async def finished(client: Client, batch_id: str) -> BatchInfo:
    async def check() -> BatchInfo | None:
        info = await client.batches.status(batch_id)
        return info if info.ended else None

    found: BatchInfo | None = await eventually_async(check, f"batch {batch_id} to end", 60)
    assert found is not None
    return found


async def test_a_line_whose_run_was_never_created_fails_and_the_batch_goes_on(
    redis_url: str,
) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        run_id = await admitted_by_a_dropped_kick(client, "lost1", 3)
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "lost1")
        assert (info.status, info.counts.succeeded, info.counts.failed) == ("done", 2, 1)
        (failed,) = [r async for r in client.batches.results("lost1", statuses=["failed"])]
        assert (failed.custom_id, failed.run_id) == ("c1", run_id)
        assert f"run {run_id} is gone" in (failed.error or "")


async def test_a_run_whose_end_job_was_dropped_is_settled_from_its_end(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        run_id = await admitted_by_a_dropped_kick(client, "lost2", 2)
        # Its run is created without the end job (as if arq had dropped that job).
        spec = RunSpec.model_validate(scripted({"text": "done"}, id=run_id))
        await client.runs.create(spec)
    async with embedded(tools=[noop], redis_url=redis_url, settings=SWEEPING) as client:
        info = await finished(client, "lost2")
        assert (info.status, info.counts.succeeded, info.counts.failed) == ("done", 2, 0)
        first, _second = [r async for r in client.batches.results("lost2")]
        assert (first.run_id, first.status, first.text) == (run_id, "succeeded", "done")


async def test_an_end_job_after_the_runs_keys_expired_fails_the_line(redis_url: str) -> None:
    async with Client(redis_url, settings=SWEEPING) as client:
        run_id = await admitted_by_a_dropped_kick(client, "lost3", 1)
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
        line = UploadLine(line=1, custom_id="a", spec=json.dumps(TEMPLATE))
        await store.upload(tenant, BatchUpload(batch_id="up1", lines=[line], upload_ttl_s=100))
        owned = keys.batch_keys(tenant, "up1")

        async def ttls() -> list[int]:
            return [await client.redis.ttl(k) for k in owned if await client.redis.exists(k)]

        assert all(0 < t <= 100 for t in await ttls())  # abandoned now, it would expire
        for key in owned:
            await client.redis.expire(key, 5)
        line2 = UploadLine(line=2, custom_id="b", spec=json.dumps(TEMPLATE))
        await store.upload(tenant, BatchUpload(batch_id="up1", lines=[line2], upload_ttl_s=100))
        assert all(t > 5 for t in await ttls())  # a resumed chunk pushes the expiry back
        kick = kick_job(tenant, "up1", "seal")
        await store.seal(tenant, BatchSeal(batch_id="up1", lines=2, kick=kick))
        assert set(await ttls()) == {-1}  # sealed: it lives until it ends, then its retention
