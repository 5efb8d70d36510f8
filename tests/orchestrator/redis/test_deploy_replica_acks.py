"""Replica acknowledgement on a real primary and replica: every transition of a run (its
creation, step commits, results, the claims and ends of its jobs) is followed by a WAIT in
its own pipeline, and one the replica does not acknowledge in time is an error the caller
sees (and retries), never a silent success."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.settings import Settings
from tests.support.infra import TOOLS, RedisServer, WorkerProcess, wait_ready
from tests.support.replica_acks import run_through_silent_replicas
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SPEC = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
NO_TOOLS = scripted({"text": "done"})


@pytest.fixture
def primary_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = RedisServer()
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(primary.port)])
    try:
        eventually(primary.has_replica_acknowledging, "the replica to acknowledge writes", 20)
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


def waits(server: RedisServer) -> int:
    """How many WAIT commands the server ran."""
    stats: Any = redis.Redis(port=server.port).info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def test_every_transition_of_a_run_waits_for_the_replica(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, _ = primary_and_replica
    worker = WorkerProcess(primary.url, "--tools", TOOLS)
    try:
        wait_ready(worker)
        before = waits(primary)

        async def run() -> str:
            async with Client(primary.url) as client:  # automatic: the primary has a replica
                run_id = await client.runs.submit(SPEC)
                assert waits(primary) > before  # the creation waited before it returned
                result = await client.runs.wait(run_id, timeout_s=30)
                return str(result.status)

        assert asyncio.run(run()) == "succeeded"
        # create, two step commits, a call's result; two model steps' and a tool call's
        # claims and ends: each acknowledged by the replica.
        assert waits(primary) - before >= 7
    finally:
        worker.stop()


def test_a_replica_that_does_not_acknowledge_fails_the_transition(
    primary_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    primary, replica = primary_and_replica
    settings = Settings(redis_replica_acks=1, redis_replica_ack_timeout_s=0.2)

    async def submit() -> None:
        async with Client(primary.url, settings=settings) as client:
            await client.runs.submit(NO_TOOLS)

    replica.pause()
    try:
        with pytest.raises(InfrastructureError, match="0 of 1 replica") as caught:
            asyncio.run(submit())
    finally:
        replica.resume()
    assert caught.value.retryable
    asyncio.run(submit())  # the replica is back: the same submit goes through


def test_a_lone_redis_asks_for_no_acknowledgement(redis_server: RedisServer) -> None:
    before = waits(redis_server)

    async def submit() -> None:
        async with Client(redis_server.url) as client:
            await client.runs.submit(NO_TOOLS)

    asyncio.run(submit())
    assert waits(redis_server) == before


def test_a_worker_waits_out_a_silent_replica_and_the_run_goes_on(
    primary_and_replica: tuple[RedisServer, RedisServer], tmp_path: Path
) -> None:
    """The call's result (the job's last transition, its end and the next claim riding
    with it) is not acknowledged while the replica is paused: the worker says so, retries,
    and the run finishes once the replica is back."""
    primary, replica = primary_and_replica
    status, log = run_through_silent_replicas(primary.url, replica.pause, replica.resume, tmp_path)
    assert status == "succeeded", log
