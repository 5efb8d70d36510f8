"""Replica acknowledgement on a 3-primary Redis Cluster with one replica each: a WAIT
counts the replicas of the node it is sent to, so each transition's WAIT goes to the
primary of its slot, in the same pipeline; one the shard's replica does not acknowledge
in time is an error the caller sees and retries, never a silent success."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.replica_acks import run_through_silent_replicas
from tests.support.specs import calls, scripted

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

SPEC = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
NO_TOOLS = scripted({"text": "done"})


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    local = LocalCluster(3, replicas=1)
    try:
        yield local
    finally:
        local.stop()
        # A client on the cluster set this process's partition count (connect does).
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


def waits(cluster: LocalCluster, port: int) -> int:
    """How many WAIT commands the node on `port` ran."""
    stats: Any = cluster.node(port).info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def all_waits(cluster: LocalCluster) -> dict[int, int]:
    return {port: waits(cluster, port) for port in cluster.ports}


def test_every_transition_waits_for_its_own_shards_replica(cluster: LocalCluster) -> None:
    worker = WorkerProcess(cluster.url, "--tools", TOOLS)
    try:
        wait_ready(worker)
        before = all_waits(cluster)

        async def run() -> tuple[str, int]:
            async with Client(cluster.url) as client:  # automatic: each primary has a replica
                run_id = await client.runs.submit(SPEC)
                shard = cluster.owner(keys.meta(run_id))
                # The creation waited, on the primary that ran it, before it returned.
                assert waits(cluster, shard) > before[shard]
                result = await client.runs.wait(run_id, timeout_s=30)
                return str(result.status), shard

        status, shard = asyncio.run(run())
        assert status == "succeeded"
        after = all_waits(cluster)
        # create, two step commits, a call's result: each on the run's shard.
        assert after[shard] - before[shard] >= 4
        replicas = cluster.replica_ports()
        assert all(after[p] == before[p] for p in replicas)  # never sent to a replica
    finally:
        worker.stop()


def test_many_runs_submitted_at_once_wait_on_each_shard_that_holds_them(
    cluster: LocalCluster,
) -> None:
    """submit_many pipelines the creations per slot: each pipeline goes to its slot's
    primary and closes with that shard's WAIT."""
    before = all_waits(cluster)

    async def submit() -> list[tuple[str, str]]:
        async with Client(cluster.url) as client:
            ids = await client.runs.submit_many([NO_TOOLS] * 30, chunk=12)
            return [(run_id, (await client.runs.status(run_id)).status) for run_id in ids]

    runs = asyncio.run(submit())
    assert len({run_id for run_id, _ in runs}) == 30
    assert {status for _, status in runs} <= {"queued", "running"}
    shards = {cluster.owner(keys.meta(run_id)) for run_id, _ in runs}
    after = all_waits(cluster)
    assert all(after[shard] > before[shard] for shard in shards)
    assert all(after[p] == before[p] for p in cluster.replica_ports())


def test_a_shard_whose_replica_is_silent_fails_the_transition(cluster: LocalCluster) -> None:
    settings = Settings(redis_replica_acks=1, redis_replica_ack_timeout_s=0.2)

    async def submit() -> None:
        async with Client(cluster.url, settings=settings) as client:
            await client.runs.submit(NO_TOOLS)

    cluster.pause_replicas()
    try:
        with pytest.raises(InfrastructureError, match="0 of 1 replica") as caught:
            asyncio.run(submit())
    finally:
        cluster.resume_replicas()
    assert caught.value.retryable
    asyncio.run(submit())  # the replicas are back: the same submit goes through


def test_a_worker_waits_out_silent_replicas_and_the_run_goes_on(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A job's transitions and claims are not acknowledged while the replicas are paused:
    the worker says so, retries, and the run finishes once they are back."""
    status, log = run_through_silent_replicas(
        cluster.url, cluster.pause_replicas, cluster.resume_replicas, tmp_path
    )
    assert status == "succeeded", log
