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
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient
from tests.support.fleet import start_workers
from tests.support.infra import WorkerProcess
from tests.support.redis_cluster import LocalCluster
from tests.support.serve import ServeProcess
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = [pytest.mark.faults, pytest.mark.cluster]

RUNS = 100
# From the promotion, the runs left need their own work (a second or two on two workers)
# plus a lease or two of recovery: this bound is many times that, never a race.
AFTER_PROMOTION_S = 60.0


def spec(i: int) -> dict[str, object]:
    return scripted(
        calls(("nap", {"seconds": 0.05, "tag": f"r{i}"})),
        {"text": f"done {i}"},
        tools=["nap"],
        id=f"shard-failover-{i}",
    )


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


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    workers: list[WorkerProcess] = []
    yield workers
    for worker in workers:
        worker.stop()


async def submit(client: Client, i: int) -> str:
    """Submit run i until it is accepted: a submit cut by the failover is retried (the
    run's id makes it idempotent)."""
    while True:
        try:
            return await client.runs.submit(spec(i))
        except InfrastructureError as exc:
            if not is_transient(exc):
                raise
            await asyncio.sleep(0.1)


async def submit_http(http: httpx.AsyncClient, i: int) -> str:
    """The same through serve: a 503 (Redis unavailable) is retried."""
    while True:
        response = await http.post("/v1/runs", json=spec(i))
        if response.status_code in (200, 201):
            return str(response.json()["id"])
        assert response.status_code == 503, response.text
        await asyncio.sleep(0.1)


async def test_sigkill_a_shards_primary_halfway_through_100_runs(
    cluster: LocalCluster, server: ServeProcess, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(cluster.url, 2)
    victim = next(p for p in cluster.ports if p not in cluster.replica_ports())
    heir = cluster.replica_of(victim)
    killed_at = promoted_at = 0.0
    promoted = threading.Event()

    def watch() -> None:
        nonlocal promoted_at
        eventually(lambda: cluster.is_primary(heir), "the replica to be promoted", 60, 0.02)
        promoted_at = time.monotonic()
        promoted.set()

    http = httpx.AsyncClient(base_url=server.url, timeout=30)
    async with Client(cluster.url) as client, http:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> str:
            nonlocal killed_at
            async with gate:
                if i == RUNS // 2:
                    cluster.kill(victim)
                    killed_at = time.monotonic()
                    threading.Thread(target=watch, daemon=True).start()
                return await (submit_http(http, i) if i % 4 == 0 else submit(client, i))

        ids = await asyncio.gather(*(one(i) for i in range(RUNS)))
        assert await asyncio.to_thread(promoted.wait, 60)
        results = await asyncio.gather(
            *(client.runs.wait(run_id, timeout_s=AFTER_PROMOTION_S + 30) for run_id in ids)
        )
        last_done = time.monotonic()
        duplicates = 0
        wrong = []
        for i, (run_id, result) in enumerate(zip(ids, results, strict=True)):
            events = [e async for e in client.runs.events(run_id)]
            per_call = Counter(e.tool_call_id for e in events if e.type == "tool-result")
            duplicates += sum(n - 1 for n in per_call.values())
            if result.status != "succeeded" or result.text != f"done {i}" or not per_call:
                wrong.append(f"{run_id}: {result.status} {result.text!r} {result.error}")
        # The killed primary's slots are its heir's now.
        on_victim = sum(cluster.owner(keys.meta(run_id)) == heir for run_id in ids)

    figures = {
        "runs": RUNS,
        "succeeded": RUNS - len(wrong),
        "on_killed_shard": on_victim,
        "duplicate_results": duplicates,
        "promotion_s": round(promoted_at - killed_at, 2),
        "last_done_after_promotion_s": round(last_done - promoted_at, 2),
    }
    print(
        "FAULTS cluster-failover: " + " ".join(f"{k}={v}" for k, v in figures.items()),
        file=sys.stderr,
    )
    assert on_victim > 0  # the killed shard held some of the runs
    assert not wrong, wrong[:5]
    assert duplicates == 0
    assert last_done - promoted_at < AFTER_PROMOTION_S
    assert all(w.proc.poll() is None for w in fleet), [w.log() for w in fleet]
    assert server.proc.poll() is None, server.log()
