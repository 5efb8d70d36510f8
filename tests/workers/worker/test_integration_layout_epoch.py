"""A worker refuses to join a fleet of another state layout (`fleet/layout.py`), against a
real redis-server and real `agentq worker` processes: one line naming both layouts and
what to do, exit code 3, nothing claimed; the old fleet keeps serving; once the old pool
is gone, the same worker starts.

"Another layout" is played two ways: a record written exactly as the release before
layouts wrote it (its JSON without the field: that release's heartbeat), and a real
worker of this code whose layout the test-only AGENTQ_TEST_STATE_LAYOUT overrides."""

from __future__ import annotations

import json
import time

import pytest
import redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.fleet import listings
from agentq.orchestrator.fleet.layout import STATE_LAYOUT, TEST_OVERRIDE
from agentq.orchestrator.fleet.layout_guard import LAYOUT, UPGRADE_DOC
from agentq.orchestrator.fleet.queues import queue_stats
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

EXIT_INFRASTRUCTURE = 3
NEWER = STATE_LAYOUT + 1


def refused(worker: WorkerProcess) -> str:
    """The worker's exit (code 3) and its one line of refusal."""
    assert worker.proc.wait(60) == EXIT_INFRASTRUCTURE, worker.log()
    lines = [line for line in worker.log().splitlines() if line.startswith("agentq: ")]
    assert len(lines) == 1, worker.log()
    assert "Drain the old pool first" in lines[0]
    assert UPGRADE_DOC in lines[0]
    assert "Traceback" not in worker.log()
    return lines[0]


def beat_as_before_layouts(admin: redis.Redis, worker_id: str) -> None:
    """What a worker of the release before layouts wrote every beat (no `layout`)."""
    now = time.time()
    record = {
        "id": worker_id,
        "host": "old-host",
        "pid": 4242,
        "queues": ["model", "tools"],
        "tools": ["add"],
        "serves": [],
        "concurrency": 10,
        "started_at": now,
        "seen_at": now,
        "jobs_in_flight": 0,
    }
    admin.hset(listings.WORKERS, worker_id, json.dumps(record))


async def test_a_worker_refuses_an_earlier_release_and_starts_once_it_is_gone(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    admin = redis.Redis.from_url(redis_url)
    beat_as_before_layouts(admin, "old-worker-1")
    async with Client(redis_url) as client:
        run = await client.runs.submit(scripted({"text": "after the upgrade"}, tools=[]))

        newcomer = WorkerProcess(redis_url, "--tools", TOOLS)
        workers.append(newcomer)
        line = refused(newcomer)
        assert f"layout {STATE_LAYOUT}" in line
        assert "layout 0 (a release from before layouts were recorded)" in line
        assert "old-worker-1 on old-host" in line
        # Nothing claimed, announced or held: the run's step waits in its queue.
        waiting = (await queue_stats(client.redis, [MODEL_QUEUE]))[MODEL_QUEUE]
        assert (waiting.ready, waiting.running) == (1, 0)
        assert admin.hkeys(listings.WORKERS) == [b"old-worker-1"]
        assert admin.get(LAYOUT) is None

        # The old pool drained (its workers forget their records as they stop).
        admin.hdel(listings.WORKERS, "old-worker-1")
        worker = WorkerProcess(redis_url, "--tools", TOOLS)
        workers.append(worker)
        wait_ready(worker)
        result = await client.runs.wait(run, timeout_s=60)
        assert result.status == "succeeded", result.error
        [listed] = await client.fleet.workers()
        assert listed.layout == STATE_LAYOUT
        assert admin.get(LAYOUT) == str(STATE_LAYOUT).encode()


async def test_a_newer_layout_is_refused_by_a_live_fleet_which_keeps_serving(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    admin = redis.Redis.from_url(redis_url)
    old = WorkerProcess(redis_url, "--tools", TOOLS)
    workers.append(old)
    wait_ready(old)

    newer = {TEST_OVERRIDE: str(NEWER)}
    newcomer = WorkerProcess(redis_url, "--tools", TOOLS, env=newer)
    workers.append(newcomer)
    line = refused(newcomer)
    assert f"layout {NEWER}, but live workers (" in line
    assert f"use layout {STATE_LAYOUT}:" in line
    assert admin.get(LAYOUT) == str(STATE_LAYOUT).encode()

    async with Client(redis_url) as client:
        result = await client.runs.wait(
            await client.runs.submit(scripted({"text": "still served"}, tools=[])), timeout_s=60
        )
        assert result.status == "succeeded", result.error

        # The old pool stops cleanly: the last of it lets the layout go at once.
        old.stop()
        assert old.proc.returncode == 0, old.log()
        assert admin.get(LAYOUT) is None
        upgraded = WorkerProcess(redis_url, "--tools", TOOLS, env=newer)
        workers.append(upgraded)
        wait_ready(upgraded)
        [listed] = await client.fleet.workers()
        assert listed.layout == NEWER
        assert admin.get(LAYOUT) == str(NEWER).encode()


def test_two_layouts_starting_at_once_one_refused_by_the_key(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    # A worker of another layout started a moment ago: it holds the key and has not
    # written its record yet (that comes with its first beat).
    admin = redis.Redis.from_url(redis_url)
    admin.set(LAYOUT, str(NEWER), px=int(listings.WORKER_STALE_S * 1000))
    newcomer = WorkerProcess(redis_url, "--tools", TOOLS)
    workers.append(newcomer)
    line = refused(newcomer)
    assert f"layout {STATE_LAYOUT}, but workers that started or beat within" in line
    assert f"use layout {NEWER}:" in line
    assert admin.hlen(listings.WORKERS) == 0

    # That worker died before its first beat: the key lapses (here sooner than the
    # WORKER_STALE_S no beat renews) and the fleet is free.
    admin.pexpire(LAYOUT, 100)
    eventually(lambda: not admin.exists(LAYOUT), "the unheld key to lapse", timeout_s=30)
    again = WorkerProcess(redis_url, "--tools", TOOLS)
    workers.append(again)
    wait_ready(again)
    assert admin.get(LAYOUT) == str(STATE_LAYOUT).encode()

    # A Redis that lost the key let a newcomer of another layout take it: the running
    # worker cannot undo that, but its next beat says so (once), and it keeps serving.
    admin.set(LAYOUT, str(NEWER))
    mixed = f"a worker of state layout {NEWER} started beside this one ({STATE_LAYOUT})"
    eventually(lambda: mixed in again.log(), "the running worker's warning", timeout_s=60)
    assert again.proc.poll() is None, again.log()
