"""A run whose call is in flight when the replicas go silent, on any topology (a primary
and its replica, a Cluster's shards): the worker must meet the unacknowledged writes,
say so and retry, and the run must finish once the replicas are back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from agentq.orchestrator.client import Client
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import calls, scripted
from tests.support.waiting import eventually_async

# Every write must reach one replica within 0.1 s: a paused replica fails them at once.
STRICT_ACKS = {"AGENTQ_REDIS_REPLICA_ACKS": "1", "AGENTQ_REDIS_REPLICA_ACK_TIMEOUT_S": "0.1"}


def run_through_silent_replicas(
    url: str, pause: Callable[[], None], resume: Callable[[], None], tmp_path: Path
) -> tuple[str, str]:
    """The run's status once the replicas, paused while its call ran, are back; and the
    worker's log."""
    marker = tmp_path / "started"
    spec = scripted(
        calls(("mark_and_sleep", {"marker": str(marker), "seconds": 0.5})),
        {"text": "done"},
        tools=["mark_and_sleep"],
    )
    worker = WorkerProcess(url, "--tools", TOOLS, env={**STRICT_ACKS, "AGENTQ_LEASE_S": "5"})
    try:
        wait_ready(worker)

        async def run() -> str:
            async with Client(url) as client:
                run_id = await client.runs.submit(spec)
                await eventually_async(marker.exists, "the call to start", 30)
                pause()
                try:
                    await eventually_async(
                        lambda: "replica(s) acknowledged" in worker.log(),
                        "the worker to meet the silent replicas",
                        30,
                    )
                finally:
                    resume()
                result = await client.runs.wait(run_id, timeout_s=60)
                return str(result.status)

        return asyncio.run(run()), worker.log()
    finally:
        worker.stop()
