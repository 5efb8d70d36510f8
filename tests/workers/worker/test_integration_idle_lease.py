"""An idle worker's upkeep (issue 31): its lease renewed at a slower pace while it holds
no job, back to the quick one while a job runs here or after a renewal failed; its
webhook look likewise. Worker runtimes and renewers on a real redis-server."""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis.asyncio import Redis

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.keys import WEBHOOK_RUNS, webhook_lock
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.queue.liveness import LeaseRenewer, reap_cadence
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from agentq.workers.worker.webhooks import WebhookDispatcher
from tests.support.infra import free_port
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

_started: asyncio.Event
_release: asyncio.Event


@tool
async def hold_here() -> str:
    """Run until released."""
    _started.set()
    await _release.wait()
    return "released"


async def test_a_worker_renews_at_its_idle_pace_only_while_it_runs_no_job(
    redis_url: str,
) -> None:
    global _started, _release
    _started, _release = asyncio.Event(), asyncio.Event()
    runtime = WorkerRuntime(redis_url, executors=[FunctionExecutor([hold_here])])
    await runtime.start()
    try:
        renewer = runtime._renewer
        assert renewer is not None
        assert renewer.idle_interval_s > renewer.interval_s
        assert renewer.next_wait_s() == renewer.idle_interval_s  # nothing claimed yet
        async with Client(redis_url) as client:
            spec = scripted(calls(("hold_here", {})), {"text": "done"}, tools=["hold_here"])
            run_id = await client.runs.submit(spec)
            await asyncio.wait_for(_started.wait(), 60)
            assert renewer.next_wait_s() == renewer.interval_s  # a job runs here
            _release.set()
            assert (await client.runs.wait(run_id, timeout_s=60)).status == "succeeded"
        await eventually_async(
            lambda: renewer.next_wait_s() == renewer.idle_interval_s, "the idle pace again"
        )
    finally:
        await runtime.stop()


async def test_a_failed_renewal_is_tried_again_at_the_quick_pace(redis_url: str) -> None:
    lapses: list[str] = []
    live = redis.Redis.from_url(redis_url)
    down = redis.Redis(port=free_port(), socket_connect_timeout=1)  # nothing listens there
    try:
        for client, failing in ((live, False), (down, True)):
            renewer = LeaseRenewer(client, "w1", 1.0, on_lapse=lapses.append, holding=lambda: False)
            if not failing:
                renewer.register()
            renewer.renew_once()
            expected = renewer.interval_s if failing else renewer.idle_interval_s
            assert renewer.next_wait_s() == expected
            # The reaper's gap stays under a lease less the idle period (`reap_cadence`).
            assert reap_cadence(1.0).gap_ms < (1.0 - renewer.idle_interval_s) * 1000
    finally:
        live.close()
        down.close()


async def test_the_webhook_look_waits_the_idle_poll_while_nothing_is_listed_or_runs(
    redis_url: str,
) -> None:
    busy = False
    client = Redis.from_url(redis_url)
    dispatcher = WebhookDispatcher(
        client, RunStore(client), "w1", poll_s=0.5, idle_poll_s=1.0, busy=lambda: busy
    )
    try:
        assert not await dispatcher._take_runs()
        assert dispatcher.next_look_s(False) == 1.0
        busy = True  # a job runs here: its run may have webhooks
        assert dispatcher.next_look_s(False) == 0.5
        busy = False
        # A run listed, delivered for by another worker: the look stays quick.
        await client.zadd(WEBHOOK_RUNS, {"r1": 1.0})
        await client.set(webhook_lock("r1"), "w2")
        assert await dispatcher._take_runs()
        assert dispatcher.next_look_s(True) == 0.5
    finally:
        await client.aclose()
