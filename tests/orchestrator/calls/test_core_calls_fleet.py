"""Calls without a run across real worker processes on a real redis-server: a worker
killed mid-call costs a re-delivery, never a second result; a call that kills every
worker it reaches ends as an error result; a caller's trace is continued."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentq.orchestrator.client import Client
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.integration

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_worker_killed_mid_call_costs_a_redelivery(
    redis_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers += [WorkerProcess(redis_url, "--tools", TOOLS) for _ in range(2)]
    wait_ready(*workers)
    marker = tmp_path / "marker"
    async with Client(redis_url) as client:
        call_id, _, _ = await client.calls.start(
            "mark_and_sleep", {"marker": str(marker), "seconds": 2}, timeout_s=30
        )
        started = await eventually_async(
            lambda: marker.read_text().split() if marker.exists() else [], "the call to start"
        )
        victim = next(w for w in workers if w.pid == int(started[0]))
        victim.kill()
        result = await client.calls.wait(call_id, timeout_s=60)
        events = [e async for e in client.calls.events(call_id, follow=False)]
    assert result is not None
    assert not result.is_error, result.error
    pids = [int(p) for p in marker.read_text().split()]
    assert len(pids) == 2
    assert pids[0] != pids[1]
    assert result.output == {"pid": pids[1]}
    attempts = [e.model_dump().get("attempt") for e in events if e.type == "tool-running"]
    assert attempts == [1, 2]
    assert [e.type for e in events if e.type in ("tool-result", "tool-error")] == ["tool-result"]


async def test_a_call_that_kills_every_worker_ends_as_an_error(
    redis_url: str, workers: list[WorkerProcess]
) -> None:
    env = {"AGENTQ_MAX_DELIVERIES": "2"}
    workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=env) for _ in range(3)]
    wait_ready(*workers)
    async with Client(redis_url) as client:
        result = await client.calls.call("die", {}, timeout_s=30)
    assert result.is_error
    assert result.error is not None
    assert "worker died each time" in result.error


async def test_the_callers_trace_is_continued(redis_url: str, workers: list[WorkerProcess]) -> None:
    """The worker's spans of the call are children of the caller's span, in its trace."""
    with OtlpReceiver() as receiver:
        workers += [WorkerProcess(redis_url, "--tools", TOOLS, env=receiver.env("worker"))]
        wait_ready(*workers)
        async with Client(redis_url) as client:
            result = await client.calls.call("add", {"a": 1, "b": 1}, traceparent=TRACEPARENT)
        trace_id, parent_id = TRACEPARENT.split("-")[1:3]

        def in_trace(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
            return [s for s in spans if s.trace_id == trace_id]

        def both(spans: list[ReceivedSpan]) -> bool:
            names = {s.name.split()[0] for s in in_trace(spans)}
            return {"process", "execute_tool"} <= names

        # The consumer span ends after its execute_tool child: the worker's exporter may
        # send them in two batches, so wait for each span asserted on, not the first.
        spans = in_trace(receiver.wait_for(both, "the call's two spans in the caller's trace"))
    process = next(s for s in spans if s.name.startswith("process "))
    execute = next(s for s in spans if s.name == "execute_tool add")
    assert process.parent_id == parent_id
    assert execute.parent_id == process.span_id
    assert result.output == 2
