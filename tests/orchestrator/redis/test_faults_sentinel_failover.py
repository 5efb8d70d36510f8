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
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient
from tests.support.fleet import start_workers
from tests.support.infra import WorkerProcess
from tests.support.redis_sentinel import LocalSentinel
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.faults

RUNS = 300
# From the promotion, the runs left need their own work (a few seconds on two workers)
# plus a lease or two of recovery: this bound is ten times that, never a race.
AFTER_PROMOTION_S = 90.0


def spec(i: int) -> dict[str, object]:
    return scripted(
        calls(("nap", {"seconds": 0.05, "tag": f"r{i}"})),
        {"text": f"done {i}"},
        tools=["nap"],
        id=f"failover-{i}",
    )


@pytest.fixture
def sentinel() -> Iterator[LocalSentinel]:
    local = LocalSentinel(down_after_ms=1000, failover_timeout_ms=3000)
    yield local
    local.stop()


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


async def test_sigkill_the_primary_halfway_through_300_runs(
    sentinel: LocalSentinel, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(sentinel.url, 2)
    killed_at = promoted_at = 0.0
    promoted = threading.Event()

    def watch() -> None:
        nonlocal promoted_at
        eventually(sentinel.promoted, "the replica to be promoted", 60, 0.02)
        promoted_at = time.monotonic()
        promoted.set()

    async with Client(sentinel.url) as client:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> str:
            nonlocal killed_at
            async with gate:
                if i == RUNS // 2:
                    sentinel.primary.kill()
                    killed_at = time.monotonic()
                    threading.Thread(target=watch, daemon=True).start()
                return await submit(client, i)

        ids = await asyncio.gather(*(one(i) for i in range(RUNS)))
        assert await asyncio.to_thread(promoted.wait, 60)
        results = await asyncio.gather(
            *(client.runs.wait(run_id, timeout_s=AFTER_PROMOTION_S + 60) for run_id in ids)
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

    figures = {
        "runs": RUNS,
        "succeeded": RUNS - len(wrong),
        "duplicate_results": duplicates,
        "promotion_s": round(promoted_at - killed_at, 2),
        "last_done_after_promotion_s": round(last_done - promoted_at, 2),
    }
    print(
        "FAULTS sentinel-failover: " + " ".join(f"{k}={v}" for k, v in figures.items()),
        file=sys.stderr,
    )
    assert not wrong, wrong[:5]
    assert duplicates == 0
    assert last_done - promoted_at < AFTER_PROMOTION_S
    assert all(w.proc.poll() is None for w in fleet), [w.log() for w in fleet]
