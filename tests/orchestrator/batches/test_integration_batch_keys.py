"""Keyed runs under derived ids on partitioned deployments: a batch's lines and a
schedule's ticks carry a concurrency key, and their ids (derived by the admission and the
tick) are placed beside the key's counter, so the key's max holds wherever the runs land:
on a real redis-server split into 4 partitions and on the 3-primary Redis Cluster.

Each keyed run's one call logs `+tag`, waits at its key's gate and logs `-tag`
(tests/support/sample_tools.py: enter_hold_leave). Nothing here is timed: each phase waits
on what it observes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import placement
from agentq.orchestrator.core.settings import Settings
from tests.support.held_calls import held_spec, marker_lines, most_at_once
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.tick_runs import tick_runs_created
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

PARTITIONS = 4


@pytest.fixture
def partitioned() -> Iterator[None]:
    yield
    # A client set this process's partition count.
    keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


def start_workers(url: str, workers: list[WorkerProcess], env: dict[str, str]) -> None:
    started = [WorkerProcess(url, "--tools", TOOLS, env=env) for _ in range(2)]
    workers += started
    wait_ready(*started)


async def keyed_lines_keep_their_max(client: Client, tmp: Path) -> None:
    """Six lines of acme's user-42 (max 2) in a batch that would admit them all; then
    three runs of user-7 (gate open) all finish while user-42 still holds two calls."""
    lines = [{**held_spec(tmp, f"a{i}", "user-42", 2), "custom_id": f"line-{i}"} for i in range(6)]
    submitted = await client.batches.submit(lines, tenant="acme", concurrency=10)
    await eventually_async(
        lambda: len(marker_lines(tmp)) == 2, "two of user-42's lines started", 120
    )
    (tmp / "gate-user-7").touch()
    others = [
        await client.runs.submit(held_spec(tmp, f"b{i}", "user-7", 2), tenant="acme")
        for i in range(3)
    ]
    for run_id in others:
        assert (await client.runs.wait(run_id, 120)).status == "succeeded"
    # Every other slot of the fleet was free: user-42's four other lines waited for the key.
    assert len([line for line in marker_lines(tmp) if line.startswith("+a")]) == 2

    (tmp / "gate-user-42").touch()
    await eventually_async(
        lambda: client.batches.status(submitted.batch_id, tenant="acme"),
        "the batch to end",
        120,
        until=lambda info: info.status == "done",
    )
    results = [r async for r in client.batches.results(submitted.batch_id, tenant="acme")]
    assert [r.status for r in results] == ["succeeded"] * 6
    # Each line's run was placed beside its key's counter, in the key's partition.
    assert {r.run_id[:14] for r in results if r.run_id} == {placement("acme", "user-42")}
    lines_seen = marker_lines(tmp)
    assert len([line for line in lines_seen if line.startswith("+a")]) == 6
    assert most_at_once(lines_seen, "a") == 2, lines_seen


@pytest.mark.usefixtures("partitioned")
def test_a_batchs_keyed_lines_hold_their_max_over_four_partitions(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start_workers(redis_url, workers, {"AGENTQ_PARTITIONS": str(PARTITIONS)})

    async def scenario() -> None:
        settings = Settings.model_validate({"partitions": PARTITIONS})
        async with Client(redis_url, settings=settings) as client:
            await keyed_lines_keep_their_max(client, tmp_path)

    asyncio.run(scenario())


@pytest.mark.cluster
def test_a_batchs_keyed_lines_hold_their_max_on_a_three_primary_cluster(
    cluster: LocalCluster, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start_workers(cluster.url, workers, {})

    async def scenario() -> None:
        async with Client(cluster.url) as client:
            await keyed_lines_keep_their_max(client, tmp_path)

    asyncio.run(scenario())


@pytest.mark.usefixtures("partitioned")
def test_a_schedules_keyed_ticks_hold_their_max_over_four_partitions(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """A schedule firing every second, its spec keyed (max 2): four ticks fire runs, two
    hold calls and the others wait; the gate opened, every tick's run finishes."""
    start_workers(redis_url, workers, {"AGENTQ_PARTITIONS": str(PARTITIONS)})

    async def scenario() -> None:
        settings = Settings.model_validate({"partitions": PARTITIONS})
        async with Client(redis_url, settings=settings) as client:
            spec = held_spec(tmp_path, "t", "nightly", 2)
            await client.schedules.create(
                "pulse", cron="* * * * * *", spec=spec, overlap="allow", tenant="acme"
            )
            ticks = await eventually_async(
                lambda: client.schedules.runs("pulse", tenant="acme"),
                "four ticks to fire runs",
                120,
                until=lambda records: len([r for r in records if r.run_id]) >= 4,
            )
            await client.schedules.pause("pulse", tenant="acme")
            await eventually_async(
                lambda: len(marker_lines(tmp_path)) == 2, "two ticks' calls started", 120
            )
            (tmp_path / "gate-nightly").touch()
            fired = [
                r.run_id for r in await client.schedules.runs("pulse", tenant="acme") if r.run_id
            ]
            assert len(fired) >= len([r for r in ticks if r.run_id])
            assert {run_id[:14] for run_id in fired} == {placement("acme", "nightly")}
            await tick_runs_created(client, fired, 120)
            for run_id in fired:
                assert (await client.runs.wait(run_id, 120)).status == "succeeded"
        seen = marker_lines(tmp_path)
        assert len([line for line in seen if line.startswith("+")]) == len(fired)
        assert most_at_once(seen, "t") == 2, seen

    asyncio.run(scenario())
