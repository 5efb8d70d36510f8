"""Schedules on a 3-primary Redis Cluster: three tenants' every-second schedules (their
tags land in different partitions) on three worker processes, one SIGKILLed and replaced:
each tick of each tenant produces exactly one run. The tick transition, its tick jobs and
timers live in the tenant's slot; its runs in theirs."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core import keys
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.schedule_chaos import ENV, tick_under_kills

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TENANTS = ("acme", "globex", "initech")


async def test_ticks_fire_once_each_on_a_cluster(
    cluster: LocalCluster, workers: list[WorkerProcess]
) -> None:
    workers += [WorkerProcess(cluster.url, "--tools", TOOLS, env=ENV) for _ in range(3)]
    wait_ready(*workers)
    figures = await tick_under_kills(cluster.url, workers, ticks=10, kill_at=(4,), tenants=TENANTS)
    print(figures.line("schedules on a 3-primary cluster"))
    assert figures.runs == figures.ticks >= 10 * len(TENANTS)
    # The tenants' schedules are spread over the primaries, not all in one slot range.
    owners = {cluster.owner(keys.schedule_meta(t, "pulse")) for t in TENANTS}
    assert len(owners) > 1, owners
