"""A call re-delivered after its worker died mid-call is the same call to its tool: the
same idempotency key, the next attempt (real worker processes on a real redis-server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.run_ids import call_idempotency_key
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration


async def test_a_redelivered_call_keeps_its_idempotency_key(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    marker = tmp_path / "marker"
    spec = scripted(
        {"tool_calls": [{"name": "mark_delivery", "input": {"marker": str(marker)}, "id": "c1"}]},
        {"text": "survived"},
        tools=["mark_delivery"],
        tool_timeout_s=120,
    )
    async with Client(redis_url) as client:
        run_id = await client.runs.submit(spec)
        first = await eventually_async(
            lambda: marker.read_text().split() if marker.exists() else [], "the call to start"
        )
        next(w for w in workers if w.pid == int(first[0])).kill()
        result = await client.runs.wait(run_id, timeout_s=60)

    assert result.status == "succeeded", result.error
    deliveries = [line.split() for line in marker.read_text().splitlines()]
    assert [int(attempt) for _, attempt, _ in deliveries] == [1, 2]
    assert deliveries[0][0] != deliveries[1][0]  # another worker's process
    key = call_idempotency_key(run_id, 0, "c1")
    assert [k for _, _, k in deliveries] == [key, key]
    assert result.steps[0].tool_results[0].output == {"attempt": 2, "idempotency_key": key}
