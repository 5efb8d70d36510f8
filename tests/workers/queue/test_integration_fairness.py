"""Fairness across tenants with a real worker process on a real redis-server, and on the
3-primary Redis Cluster: one tools slot, every call held at a gate until the backlog is
in place, then the order in which the claim took the calls (each call writes its tag as
it starts) is counted. Nothing here is timed."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE
from agentq.orchestrator.core.run_ids import tenant_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.fleet.queues import queue_stats
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

# One slot per queue: the tools queue takes one call at a time, in the claim's order.
ONE_SLOT = {"AGENTQ_CONCURRENCY": "1"}


class Scenario:
    """Runs whose one tool call logs its tag, then holds until the gate opens."""

    def __init__(self, client: Client, tmp: Path, partition: int | None = None) -> None:
        self.client = client
        self.name = tmp.name
        tmp.mkdir(exist_ok=True)
        self.marker = tmp / "order"
        self.gate = tmp / "gate"
        self.partition = partition
        self.run_ids: list[str] = []

    def _id(self, tenant: str, tag: str) -> str | None:
        """An id whose run lands in the chosen partition (None: wherever it lands)."""
        if self.partition is None:
            return None
        for n in range(10_000):
            chosen = f"{self.name}-{tag}-{n}"
            if keys.partition_of(tenant_run_id(tenant, chosen)) == self.partition:
                return chosen
        raise AssertionError("no id in the partition")

    def spec(self, tag: str, **extra: Any) -> dict[str, Any]:
        args = {"marker": str(self.marker), "tag": tag, "gate": str(self.gate)}
        return scripted(
            calls(("log_and_hold", args)), {"text": "done"}, tools=["log_and_hold"], **extra
        )

    async def submit(
        self, tenant: str, tag: str, partition: int | None = None, **extra: Any
    ) -> None:
        spec = self.spec(tag, **extra)
        if partition is not None:
            self.partition = partition
        chosen = self._id(tenant, tag)
        if chosen is not None:
            spec["id"] = chosen
        self.run_ids.append(await self.client.runs.submit(spec, tenant=tenant))

    async def backlog(self, ready: int) -> None:
        """Until one call is held at the gate and `ready` wait behind it."""

        async def there() -> bool:
            stats = (await queue_stats(self.client.redis, [TOOLS_QUEUE]))[TOOLS_QUEUE]
            return self.marker.exists() and stats.ready == ready and stats.running == 1

        await eventually_async(there, f"{ready} calls queued behind a held one", 120)

    async def release(self) -> list[str]:
        """Open the gate, wait for every run; the tags in the order their calls started."""
        self.gate.touch()
        for run_id in self.run_ids:
            result = await self.client.runs.wait(run_id, timeout_s=120)
            assert result.status == "succeeded", result.error
        return self.marker.read_text().split()


async def one_run_after_a_flood(
    url: str, tmp: Path, partition: int | None = None, b_partition: int | None = None
) -> list[str]:
    async with Client(url) as client:
        scenario = Scenario(client, tmp, partition)
        for i in range(20):
            await scenario.submit("tenant-a", f"a{i}")
        await scenario.backlog(19)
        await scenario.submit("tenant-b", "b", b_partition)
        await scenario.backlog(20)
        return await scenario.release()


async def weighted(url: str, tmp: Path, a: int, b: int, partition: int | None = None) -> list[str]:
    # A tenant's weight is the deployment's, set where its runs are created.
    weights = Settings(tenant_weights={"tenant-a": 3})
    async with Client(url, settings=weights) as client:
        scenario = Scenario(client, tmp, partition)
        for i in range(max(a, b)):
            if i < a:
                await scenario.submit("tenant-a", f"a{i}")
            if i < b:
                await scenario.submit("tenant-b", f"b{i}")
        await scenario.backlog(a + b - 1)
        return await scenario.release()


async def many_keys(url: str, tmp: Path, runs: int) -> list[str]:
    """Tenant A's runs each under a key of their own (as many keys as runs, named by the
    spec), B's under its one; they arrive alternately."""
    async with Client(url) as client:
        scenario = Scenario(client, tmp)
        for i in range(runs):
            await scenario.submit("tenant-a", f"a{i}", fairness={"key": f"user-{i}", "weight": 9})
            await scenario.submit("tenant-b", f"b{i}")
        await scenario.backlog(2 * runs - 1)
        return await scenario.release()


async def batches_and_direct_runs(url: str, tmp: Path) -> list[str]:
    """Tenant acme: a direct run holding the slot, two batches of 20 lines, then 5 more
    direct runs, all of acme."""
    async with Client(url) as client:
        scenario = Scenario(client, tmp)
        await scenario.submit("acme", "d0")
        await scenario.backlog(0)
        for name in ("x", "y"):
            lines = [scenario.spec(f"{name}{i}") for i in range(20)]
            await client.batches.submit(lines, batch_id=name, tenant="acme")
        await scenario.backlog(40)
        for i in range(1, 6):
            await scenario.submit("acme", f"d{i}")
        await scenario.backlog(45)
        await scenario.release()
        for name in ("x", "y"):
            await eventually_async(
                lambda n=name: client.batches.status(n, tenant="acme"),  # type: ignore[misc]
                f"batch {name} done",
                120,
                until=lambda b: b.status == "done",
            )
        return scenario.marker.read_text().split()


async def batches_by_priority(url: str, tmp: Path, high: int, low: int) -> list[str]:
    """Tenant acme: a direct run holding the slot, then batch h of priority 3 and batch l
    of priority 1, every line's call waiting behind the held one."""
    async with Client(url) as client:
        scenario = Scenario(client, tmp)
        await scenario.submit("acme", "d0")
        await scenario.backlog(0)
        for name, priority, count in (("h", 3, high), ("l", 1, low)):
            lines = [scenario.spec(f"{name}{i}") for i in range(count)]
            await client.batches.submit(lines, batch_id=name, tenant="acme", priority=priority)
        await scenario.backlog(high + low)
        await scenario.release()
        for name in ("h", "l"):
            await eventually_async(
                lambda n=name: client.batches.status(n, tenant="acme"),  # type: ignore[misc]
                f"batch {name} done",
                120,
                until=lambda b: b.status == "done",
            )
        return scenario.marker.read_text().split()


async def keys_of_one_tenant(url: str, tmp: Path, x: int, y: int) -> list[str]:
    async with Client(url) as client:
        scenario = Scenario(client, tmp)
        for i in range(max(x, y)):
            if i < x:
                await scenario.submit("tenant-a", f"x{i}", fairness={"key": "bulk", "weight": 3})
            if i < y:
                await scenario.submit("tenant-a", f"y{i}", fairness={"key": "live"})
        await scenario.backlog(x + y - 1)
        return await scenario.release()


def ratio(order: list[str], first: str = "a", second: str = "b") -> float:
    counts = Counter(tag[0] for tag in order)
    return counts[first] / counts[second]


@pytest.fixture
def worker(redis_url: str, workers: list[WorkerProcess]) -> str:
    workers.append(WorkerProcess(redis_url, "--tools", TOOLS, env=ONE_SLOT))
    wait_ready(*workers)
    return redis_url


def test_one_run_of_another_tenant_is_taken_in_the_first_turn_after_a_flood(
    worker: str, tmp_path: Path
) -> None:
    order = asyncio.run(one_run_after_a_flood(worker, tmp_path))

    # The held call, then A's turn (one call), then B's: not behind A's 19 others.
    assert order.index("b") == 2, order
    assert len(order) == 21


def test_tenant_weights_3_to_1_share_a_saturated_slot_3_to_1(worker: str, tmp_path: Path) -> None:
    order = asyncio.run(weighted(worker, tmp_path, 80, 40))

    # While both have calls waiting (the first 80 taken after the held one).
    assert 2.7 <= ratio(order[1:81]) <= 3.3, Counter(t[0] for t in order[1:81])


def test_a_tenant_with_100_keys_gets_one_tenants_share_beside_a_tenant_with_one(
    worker: str, tmp_path: Path
) -> None:
    """Keys and weights a spec names divide only its tenant's own turns."""
    order = asyncio.run(many_keys(worker, tmp_path, 100))

    assert 0.9 <= ratio(order[1:101]) <= 1.1, Counter(t[0] for t in order[1:101])


def test_a_tenants_batches_interleave_and_never_hold_back_its_direct_runs(
    worker: str, tmp_path: Path
) -> None:
    """A batch's lines wait under its own key of the tenant (`batch:<id>`): the tenant's
    keys (its direct runs', each batch's) take turns."""
    order = asyncio.run(batches_and_direct_runs(worker, tmp_path))

    assert len(order) == 46, order
    assert max(order.index(f"d{i}") for i in range(1, 6)) <= 15, order
    first = Counter(tag[0] for tag in order[1:31])
    assert abs(first["x"] - first["y"]) <= 1, first


def test_a_batch_of_priority_3_takes_3_calls_for_1_of_a_batch_of_priority_1(
    worker: str, tmp_path: Path
) -> None:
    """A batch's priority is the weight of its key (`batch:<id>`) in its tenant's turns."""
    order = asyncio.run(batches_by_priority(worker, tmp_path, 60, 30))

    assert len(order) == 91, order
    # While both have calls waiting (the first 60 taken after the held one).
    assert 2.7 <= ratio(order[1:61], "h", "l") <= 3.3, Counter(t[0] for t in order[1:61])


def test_a_tenants_keys_share_its_slot_3_to_1_by_weight(worker: str, tmp_path: Path) -> None:
    order = asyncio.run(keys_of_one_tenant(worker, tmp_path, 60, 30))

    assert 2.7 <= ratio(order[1:61], "x", "y") <= 3.3, Counter(t[0] for t in order[1:61])


@pytest.fixture
def cluster_worker(cluster: LocalCluster, workers: list[WorkerProcess]) -> str:
    workers.append(WorkerProcess(cluster.url, "--tools", TOOLS, env=ONE_SLOT))
    wait_ready(*workers)
    return cluster.url


@pytest.mark.cluster
def test_fairness_holds_in_a_partition_of_a_three_primary_cluster(
    cluster_worker: str, tmp_path: Path
) -> None:
    """The lanes, ring and turns of a partition are in its slot: every run of the test in
    one partition (the round-robin is per partition, as the queue is)."""
    keys.use_partitions(keys.CLUSTER_PARTITIONS)  # to choose the ids' partition
    flood = asyncio.run(one_run_after_a_flood(cluster_worker, tmp_path / "flood", 5))
    assert flood.index("b") == 2, flood

    order = asyncio.run(weighted(cluster_worker, tmp_path / "weighted", 40, 20, 5))
    assert 2.7 <= ratio(order[1:41]) <= 3.3, Counter(t[0] for t in order[1:41])
