"""The primary SIGKILLed under load, behind Sentinel: a primary, a replica and three
sentinels, two worker processes and the submitting client on the Sentinel URL; 300
two-step runs with a tool call each; the primary is killed halfway through the submits.
With replica acknowledgement (on by default while the primary has a replica), nothing
the primary acknowledged is lost: every accepted run succeeds, no call's result is
recorded twice, and the last run ends within a bound after the promotion.

Prints `FAULTS sentinel-failover: ... promotion_s=… last_done_after_promotion_s=…`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import pytest

from agentq.orchestrator.client import Client
from tests.support.failover import Failover, judge, spec, submit_until_accepted
from tests.support.fleet import start_workers
from tests.support.infra import WorkerProcess
from tests.support.redis_sentinel import LocalSentinel

pytestmark = pytest.mark.faults

RUNS = 300
# From the promotion, the runs left need their own work (a few seconds on two workers)
# plus a lease or two of recovery: this bound is ten times that, never a race.
AFTER_PROMOTION_S = 90.0


@pytest.fixture
def sentinel() -> Iterator[LocalSentinel]:
    local = LocalSentinel(down_after_ms=1000, failover_timeout_ms=3000)
    yield local
    local.stop()


async def test_sigkill_the_primary_halfway_through_300_runs(
    sentinel: LocalSentinel, workers: list[WorkerProcess]
) -> None:
    workers += start_workers(sentinel.url, 2)
    failover = Failover()

    async with Client(sentinel.url) as client:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> str:
            async with gate:
                if i == RUNS // 2:
                    failover.kill(sentinel.primary.kill, sentinel.promoted)
                return await submit_until_accepted(client, spec("failover", i))

        ids = await asyncio.gather(*(one(i) for i in range(RUNS)))
        assert await asyncio.to_thread(failover.promoted.wait, 60)
        verdict = await judge(client, ids, AFTER_PROMOTION_S + 60)

    figures = {
        "runs": RUNS,
        "succeeded": RUNS - len(verdict.wrong),
        "duplicate_results": verdict.duplicate_results,
        "promotion_s": failover.promotion_s(),
        "last_done_after_promotion_s": round(verdict.last_done - failover.promoted_at, 2),
    }
    print(
        "FAULTS sentinel-failover: " + " ".join(f"{k}={v}" for k, v in figures.items()),
        file=sys.stderr,
    )
    assert not verdict.wrong, verdict.wrong[:5]
    assert verdict.duplicate_results == 0
    assert verdict.last_done - failover.promoted_at < AFTER_PROMOTION_S
    assert all(w.proc.poll() is None for w in workers), [w.log() for w in workers]
