"""A schedule ticking every second on real worker processes while some are SIGKILLed and
replaced: the kills follow the ticks fired (not the clock), and the judge counts the runs
of each tick."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from dataclasses import dataclass

from agentq.orchestrator.client import Client
from agentq.orchestrator.schedules.state import TickRecord
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.tick_runs import tick_runs_created
from tests.support.waiting import eventually_async

SPEC = scripted({"text": "tick"})
# Every tick late by a worker's death still fires (a lapsed lease is re-delivered well
# within this): the test asks that each tick produce one run, not how late.
ENV = {"AGENTQ_SCHEDULE_GRACE_S": "120"}
TICK_IN_RUN_ID = re.compile(r"sched\.[\w-]+\.\d+\.(\d+)$")


@dataclass
class Figures:
    ticks: int
    runs: int
    kills: int
    max_late_s: float

    def line(self, name: str) -> str:
        return (
            f"FAULTS {name}: ticks={self.ticks} runs={self.runs} kills={self.kills} "
            f"max_late_s={self.max_late_s:.2f}"
        )


def replace(fleet: list[WorkerProcess], url: str, rng: random.Random) -> None:
    """SIGKILL a random live worker and start another in its place."""
    victim = rng.choice([w for w in fleet if w.proc.poll() is None])
    victim.kill()
    fresh = WorkerProcess(url, "--tools", TOOLS, env=ENV)
    fleet.append(fresh)
    wait_ready(fresh)


async def tick_under_kills(
    url: str,
    fleet: list[WorkerProcess],
    *,
    ticks: int,
    kill_at: tuple[int, ...],
    tenants: tuple[str, ...] = ("default",),
) -> Figures:
    """One every-second schedule per tenant until each recorded `ticks` ticks, a worker
    replaced each time the first tenant's fired count passes one of `kill_at`; then every
    tick is judged: exactly one run, which succeeded, and no tick of the span left out."""
    rng = random.Random(28)
    async with Client(url) as client:
        for tenant in tenants:
            await client.schedules.create(
                "pulse", cron="* * * * * *", spec=SPEC, overlap="allow", tenant=tenant
            )

        async def fired(tenant: str, n: int, timeout_s: float) -> None:
            async def enough() -> bool:
                return (await client.schedules.get("pulse", tenant=tenant)).fired >= n

            await eventually_async(enough, f"{n} ticks of {tenant}", timeout_s, interval_s=0.1)

        kills = 0
        for threshold in kill_at:
            await fired(tenants[0], threshold, 120)
            await asyncio.to_thread(replace, fleet, url, rng)
            kills += 1
        figures = Figures(0, 0, kills, 0.0)
        for tenant in tenants:
            await fired(tenant, ticks, 180)
            await client.schedules.pause("pulse", tenant=tenant)
            records = await client.schedules.runs("pulse", tenant=tenant, limit=1000)
            figures.runs += await judge(client, tenant, records)
            figures.ticks += len(records)
            figures.max_late_s = max(figures.max_late_s, *(r.at - r.tick for r in records))
    return figures


async def judge(client: Client, tenant: str, records: list[TickRecord]) -> int:
    """How many runs the tenant's ticks made, once each is judged."""
    assert all(r.run_id is not None and r.skipped is None for r in records), records
    ticks = sorted(int(r.tick) for r in records)
    # Not one second of the span left out: every tick fired, each under its own record.
    assert ticks == list(range(ticks[0], ticks[-1] + 1)), ticks
    # A tick is claimed before its run is created: a worker killed between the two
    # leaves the run to the tick job's re-delivery, once its lease lapses. Every
    # recorded run is waited for (created, then ended) before the runs are counted.
    for record in records:
        assert record.run_id is not None
        await tick_runs_created(client, [record.run_id], 120)
        result = await client.runs.wait(record.run_id, timeout_s=120)
        assert result.status == "succeeded", (record, result.error)
    # Count the runs per tick among everything the tenant has: one each, no more.
    page = await client.runs.list(tenant, limit=len(records) + 50)
    per_tick = Counter(
        int(found.group(1)) // 1000
        for run in page.runs
        if (found := TICK_IN_RUN_ID.search(run.id)) is not None
    )
    assert set(per_tick) == set(ticks), sorted(set(per_tick) ^ set(ticks))
    assert set(per_tick.values()) == {1}, per_tick
    return sum(per_tick.values())
