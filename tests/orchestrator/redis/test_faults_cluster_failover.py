"""A shard's primary SIGKILLed under load on Redis Cluster: 3 primaries with a replica
each (`cluster-node-timeout` 1000), two worker processes, the submitting client and
`agentq serve` on the `redis+cluster://` URL, 100 two-step runs with a tool call (every
fourth submitted through serve's HTTP API), one primary killed halfway through the
submits. The shard failover costs retries, never a run: the workers ride out
the election (redis-py's cluster client alone drops every node it knows and gives up),
every accepted run succeeds, no call's result is recorded twice (replica acks: what the
dead primary acknowledged is on the promoted replica), and the last run ends within a
bound after the promotion.

Prints `FAULTS cluster-failover: ... promotion_s=… last_done_after_promotion_s=…`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import httpx
import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from tests.support.failover import Failover, judge, spec, submit_until_accepted
from tests.support.fleet import start_workers
from tests.support.infra import WorkerProcess
from tests.support.redis_cluster import LocalCluster
from tests.support.serve import ServeProcess

pytestmark = [pytest.mark.faults, pytest.mark.cluster]

RUNS = 100
# From the promotion, the runs left need their own work (a second or two on two workers)
# plus a lease or two of recovery: this bound is many times that, never a race.
AFTER_PROMOTION_S = 60.0
PREFIX = "shard-failover"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    local = LocalCluster(3, replicas=1, node_timeout_ms=1000)
    try:
        yield local
    finally:
        local.stop()
        # A client on the cluster set this process's partition count (connect does).
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


@pytest.fixture
def server(cluster: LocalCluster) -> Iterator[ServeProcess]:
    process = ServeProcess(cluster.url)
    yield process
    process.stop()


async def submit_http(http: httpx.AsyncClient, i: int) -> str:
    """The same through serve: a 503 (Redis unavailable) is retried."""
    while True:
        response = await http.post("/v1/runs", json=spec(PREFIX, i))
        if response.status_code in (200, 201):
            return str(response.json()["id"])
        assert response.status_code == 503, response.text
        await asyncio.sleep(0.1)


async def test_sigkill_a_shards_primary_halfway_through_100_runs(
    cluster: LocalCluster, server: ServeProcess, workers: list[WorkerProcess]
) -> None:
    workers += start_workers(cluster.url, 2)
    victim = next(p for p in cluster.ports if p not in cluster.replica_ports())
    heir = cluster.replica_of(victim)
    failover = Failover()

    http = httpx.AsyncClient(base_url=server.url, timeout=30)
    async with Client(cluster.url) as client, http:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> str:
            async with gate:
                if i == RUNS // 2:
                    failover.kill(lambda: cluster.kill(victim), lambda: cluster.is_primary(heir))
                if i % 4 == 0:
                    return await submit_http(http, i)
                return await submit_until_accepted(client, spec(PREFIX, i))

        ids = await asyncio.gather(*(one(i) for i in range(RUNS)))
        assert await asyncio.to_thread(failover.promoted.wait, 60)
        verdict = await judge(client, ids, AFTER_PROMOTION_S + 30)
        # The killed primary's slots are its heir's now.
        on_victim = sum(cluster.owner(keys.meta(run_id)) == heir for run_id in ids)

    figures = {
        "runs": RUNS,
        "succeeded": RUNS - len(verdict.wrong),
        "on_killed_shard": on_victim,
        "duplicate_results": verdict.duplicate_results,
        "promotion_s": failover.promotion_s(),
        "last_done_after_promotion_s": round(verdict.last_done - failover.promoted_at, 2),
    }
    print(
        "FAULTS cluster-failover: " + " ".join(f"{k}={v}" for k, v in figures.items()),
        file=sys.stderr,
    )
    assert on_victim > 0  # the killed shard held some of the runs
    assert not verdict.wrong, verdict.wrong[:5]
    assert verdict.duplicate_results == 0
    assert verdict.last_done - failover.promoted_at < AFTER_PROMOTION_S
    assert all(w.proc.poll() is None for w in workers), [w.log() for w in workers]
    assert server.proc.poll() is None, server.log()
