"""Concurrency keys with real worker processes on a real redis-server, and on the
3-primary Redis Cluster: each keyed run's one call logs `+tag` as it starts, waits at
its key's gate, and logs `-tag` as it ends, so the marker file shows which calls ran at
once, in order. Nothing here is timed: each phase waits on what it observes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.concurrency.load import KeyLoad
from agentq.orchestrator.core import keys
from tests.support.held_calls import held_spec, marker_lines, most_at_once
from tests.support.infra import WorkerProcess, start_worker
from tests.support.redis_cluster import LocalCluster
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


async def keyed_runs_wait_and_others_pass(url: str, tmp: Path) -> None:
    """Six runs of acme's user-42 (max 2), then three of user-7 (max 2, its gate open):
    user-7's runs all finish while user-42 holds exactly two calls and four wait."""
    async with Client(url) as client:
        held = [
            await client.runs.submit(held_spec(tmp, f"a{i}", "user-42", 2), tenant="acme")
            for i in range(6)
        ]
        await eventually_async(
            lambda: len(marker_lines(tmp)) == 2, "two of user-42's calls started", 120
        )
        (tmp / "gate-user-7").touch()
        others = [
            await client.runs.submit(held_spec(tmp, f"b{i}", "user-7", 2), tenant="acme")
            for i in range(3)
        ]
        for run_id in others:
            assert (await client.runs.wait(run_id, 120)).status == "succeeded"
        # Every other slot of the fleet was free: user-42's four others waited for the key.
        started = [line for line in marker_lines(tmp) if line.startswith("+a")]
        assert len(started) == 2, marker_lines(tmp)
        assert (await client.runs.result(held[0])).concurrency is not None
        # The tenant's keys as the dashboard lists them: user-7's, its runs ended, no more.
        full = [KeyLoad(key="user-42", in_use=2, max=2, held=4)]
        await eventually_async(
            lambda: client.concurrency.active("acme"),
            "user-42's four others held",
            60,
            until=lambda listed: listed == full,
        )
        assert await client.concurrency.active("globex") == []

        (tmp / "gate-user-42").touch()
        for run_id in held:
            assert (await client.runs.wait(run_id, 120)).status == "succeeded"
    lines = marker_lines(tmp)
    assert len([line for line in lines if line.startswith("+a")]) == 6
    assert most_at_once(lines, "a") == 2, lines


def test_at_most_max_runs_of_a_key_run_while_another_keys_runs_pass(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    start_worker(redis_url, workers)
    start_worker(redis_url, workers)
    asyncio.run(keyed_runs_wait_and_others_pass(redis_url, tmp_path))


async def killed_holder_gives_its_slot_back(
    url: str, tmp: Path, workers: list[WorkerProcess]
) -> None:
    """Three runs of a key of max 1; the only worker is SIGKILLed while its call holds the
    key's one slot, another starts: the slot comes back when the dead lease lapses."""
    dying = start_worker(url, workers)
    async with Client(url) as client:
        runs = [
            await client.runs.submit(held_spec(tmp, f"k{i}", "solo", 1), tenant="acme")
            for i in range(3)
        ]
        # Which run's call comes first is the claim's to choose: between one run's model
        # step and its call (no job running) another run may take the slot.
        await eventually_async(lambda: len(marker_lines(tmp)) == 1, "one call started")
        (first,) = marker_lines(tmp)
        dying.kill()
        start_worker(url, workers)
        (tmp / "gate-solo").touch()
        for run_id in runs:
            assert (await client.runs.wait(run_id, 120)).status == "succeeded"
        # A run has ended once its last transition is in; its job ends just after it.
        counter = keys.concurrency(runs[0], "acme/solo")
        await eventually_async(
            lambda: client.redis.exists(counter), "the slot freed", until=lambda n: n == 0
        )
        assert await client.redis.exists(counter + keys.CONCURRENCY_WAIT_SUFFIX) == 0
    # The held call ran again after its worker died; the others, one at a time.
    lines = marker_lines(tmp)
    assert lines.count(first) == 2, lines
    assert most_at_once(lines[1:], "k") == 1, lines


def test_a_killed_workers_slot_comes_back_when_its_lease_lapses(
    redis_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    asyncio.run(killed_holder_gives_its_slot_back(redis_url, tmp_path, workers))


@pytest.mark.cluster
def test_a_keys_max_holds_across_a_three_primary_cluster(
    cluster: LocalCluster, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """A key's runs are placed in its partition, beside its counter: every claim checks
    it in the slot it takes the job from."""
    start_worker(cluster.url, workers)
    start_worker(cluster.url, workers)
    asyncio.run(keyed_runs_wait_and_others_pass(cluster.url, tmp_path))


@pytest.mark.cluster
def test_a_killed_workers_slot_comes_back_on_a_three_primary_cluster(
    cluster: LocalCluster, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    asyncio.run(killed_holder_gives_its_slot_back(cluster.url, tmp_path, workers))
