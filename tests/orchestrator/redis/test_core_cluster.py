"""agentq on a 3-primary Redis Cluster: a 200-run batch with two worker processes, one of
them SIGKILLed mid-way. Every line ends once, succeeded, and the runs are spread over
every primary (each partition's hash tag lands on its own slot range)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from agentq.orchestrator.batches.api import BatchInfo
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.workers.queue.liveness import held_jobs
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

LINES = 200
# One tool call in flight for a while per run, so that the killed worker holds some.
TEMPLATE = scripted(
    calls(("nap", {"seconds": 0.2, "tag": "{{n}}"})), {"text": "done"}, tools=["nap"]
)


async def held_by(client: Client, pid: int) -> int:
    """How many jobs the worker process `pid` holds now (its leases, all partitions)."""
    held = 0
    for p in keys.partitions():
        for raw in await client.redis.smembers(keys.lease_holders(p)):  # type: ignore[misc]
            worker_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            if f"-{pid}-" in worker_id:
                raw_jobs = await client.redis.hgetall(keys.worker_jobs(worker_id, p))  # type: ignore[misc]
                held += len(held_jobs(raw_jobs))
    return held


async def run_batch(url: str, victim: WorkerProcess) -> BatchInfo:
    """Submit the batch, SIGKILL `victim` once a quarter of it succeeded and while it holds
    jobs, await the batch's end: the victim's jobs can only end by being re-delivered."""
    lines = [{"custom_id": f"k{i}", "vars": {"n": str(i)}} for i in range(LINES)]
    async with Client(url) as client:
        await client.batches.submit(lines, template=TEMPLATE, batch_id="spread", concurrency=64)

        async def progressed() -> BatchInfo | None:
            info = await client.batches.status("spread")
            return info if info.counts.succeeded >= LINES // 4 else None

        await eventually_async(progressed, "a quarter of the batch", 60, interval_s=0.05)
        await eventually_async(
            lambda: held_by(client, victim.pid), "the victim to hold jobs", 30, interval_s=0.01
        )
        victim.kill()

        async def ended() -> BatchInfo | None:
            info = await client.batches.status("spread")
            return info if info.ended else None

        info = await eventually_async(ended, "the batch to end", 90, interval_s=0.2)
        assert info is not None
        assert await held_by(client, victim.pid) == 0  # reaped: nothing left held
        return info


def test_a_batch_on_a_three_primary_cluster_survives_a_killed_worker(
    cluster: LocalCluster, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(cluster.url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    info = asyncio.run(run_batch(cluster.url, workers[0]))
    assert workers[0].proc.poll() is not None  # the victim is dead, the batch still ended

    assert (info.counts.succeeded, info.counts.failed, info.counts.running) == (LINES, 0, 0)
    assert keys.partition_count() == keys.CLUSTER_PARTITIONS  # the default on a cluster
    admin = cluster.client()
    # A line's run id: the batch's prefix (its id, then a nonce drawn when it opened),
    # the line's number, the attempt.
    prefix = str(admin.hget(keys.batch_meta("default", "spread"), "run_prefix"))
    assert prefix.startswith("spread.")
    run_ids = [f"{prefix}{i}.1" for i in range(1, LINES + 1)]
    owners = Counter(cluster.owner(keys.meta(run_id)) for run_id in run_ids)
    per_run: dict[str, Counter[str]] = {}
    for run_id in run_ids:
        # The run's keys are on the node that owns its partition's slot.
        node = cluster.node(cluster.owner(keys.meta(run_id)))
        assert node.hget(keys.meta(run_id), "status") == "succeeded", run_id
        events: list[tuple[str, dict[str, str]]] = node.xrange(keys.events(run_id))  # type: ignore[assignment]
        per_run[run_id] = Counter(json.loads(fields["e"])["type"] for _, fields in events)
        # Each line ran once: no second attempt of any line.
        assert not admin.exists(keys.meta(run_id.removesuffix(".1") + ".2"))
    # Runs landed on all three primaries.
    assert set(owners) == set(cluster.ports), owners
    # The engine's once: one result per call, one finish per run, whatever was re-run.
    assert {c["tool-result"] for c in per_run.values()} == {1}, per_run
    assert {c["finish"] for c in per_run.values()} == {1}
