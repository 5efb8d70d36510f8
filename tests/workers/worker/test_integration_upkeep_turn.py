"""One worker process at a time passes the reaper (issue 31): the fleet's upkeep turn.
Worker runtimes on a real redis-server; the commands counted with MONITOR."""

from __future__ import annotations

from functools import partial

import pytest
import redis as sync_redis
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.workers.queue.liveness import REAP_GATE, RENEW, LeaseRenewer, reap_cadence
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from agentq.workers.worker.upkeep import UpkeepTurn
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


async def _passes_and_renewals(redis: Redis, renewals: int) -> int:
    """The reaper's passes that may look at the workers, while `renewals` leases are
    renewed (renewals carry the gate's stamps, which never look)."""
    look_ms = str(reap_cadence(1.0).look_ms)
    gate, renew = scripts.sha(REAP_GATE), scripts.sha(RENEW)
    passes = seen = 0
    async with redis.monitor() as monitor:
        async for command in monitor.listen():
            words = command["command"].split()
            if len(words) < 2 or words[0] != "EVALSHA":
                continue
            if words[1] == renew:
                seen += 1
                if seen >= renewals:
                    return passes
            elif words[1] == gate and words[-1] == look_ms:
                passes += 1
    raise AssertionError("the monitor ended")


async def test_one_process_of_the_fleet_passes_the_reaper(redis_url: str) -> None:
    runtimes = [WorkerRuntime(redis_url, executors=[FunctionExecutor([])]) for _ in range(3)]
    for runtime in runtimes:
        await runtime.start()
    redis = Redis.from_url(redis_url)
    try:
        holder = await eventually_async(
            lambda: redis.get(keys.UPKEEP_TURN), "a process to take the turn"
        )
        # Every process renews its lease 5 times a second and used to pass the reaper's
        # gate 4 times a second (0.8 passes a renewal); now only the turn's holder does.
        passes = await _passes_and_renewals(redis, renewals=60)
        assert passes <= 60 / 2, passes
        # Its holder stops: another takes the turn (the turn lasts half a lease).
        stopped = next(r for r in runtimes if r.worker_id == holder.decode())
        await stopped.stop()
        runtimes.remove(stopped)
        successor = await eventually_async(
            lambda: redis.get(keys.UPKEEP_TURN),
            "another process to take the turn",
            until=lambda turn: turn not in (None, holder),
        )
        assert successor.decode() in {r.worker_id for r in runtimes}
        # Its reaper, which waited for the turn (no wake-up per pass), passes now.
        assert await _passes_and_renewals(redis, renewals=30) >= 1
    finally:
        await redis.aclose()
        for runtime in runtimes:
            await runtime.stop()


async def test_a_renewal_that_takes_the_turn_says_so_once(redis_url: str) -> None:
    """The reaper of a process without the turn waits for `on_taken` instead of waking at
    every pass: it is called when a renewal takes the turn, not while it is kept."""
    client = sync_redis.Redis.from_url(redis_url)
    taken: list[str] = []
    turns = {
        name: UpkeepTurn(name, 1.0, reap_cadence(1.0), on_taken=partial(taken.append, name))
        for name in ("w1", "w2")
    }
    renewers = {
        name: LeaseRenewer(client, name, 1.0, on_lapse=lambda _: None, rider=turn)
        for name, turn in turns.items()
    }
    try:
        for renewer in renewers.values():
            renewer.register()
        renewers["w1"].renew_once()
        renewers["w1"].renew_once()  # kept: not taken again
        renewers["w2"].renew_once()  # held by w1
        assert taken == ["w1"]
        assert turns["w1"].held()
        assert not turns["w2"].held()
        client.delete(keys.UPKEEP_TURN)  # w1's turn lapsed (it died)
        renewers["w2"].renew_once()
        assert taken == ["w1", "w2"]
    finally:
        client.close()
