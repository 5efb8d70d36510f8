"""A `@tool` that declares `ctx: ToolContext` knows its call: ids, attempt, idempotency key,
its run's metadata, tenant and history, its deadline, a logger joined to the trace, and a
`cancelled` flag a sync tool polls to stop when its run is cancelled or its call times out."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentq import ToolContext, tool
from agentq.orchestrator.core.run_ids import call_idempotency_key
from agentq.orchestrator.tools import ToolDef
from tests.support.embedded_runs import TIMEOUT_S, Embedded, of_type, wait_event
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

Start = Callable[..., Embedded]


@tool
async def introspect(ctx: ToolContext) -> dict[str, Any]:
    """Say what the call knows about itself."""
    ctx.logger.info("looking at myself")
    history = await ctx.messages()
    return {
        "run_id": ctx.run_id,
        "step": ctx.step,
        "call_id": ctx.call_id,
        "attempt": ctx.attempt,
        "idempotency_key": ctx.idempotency_key,
        "metadata": dict(ctx.metadata),
        "tenant": ctx.tenant,
        "deadline_in_s": (ctx.deadline.timestamp() - time.time()),
        "history": [(m.role, m.model_dump(mode="json")["content"]) for m in history],
    }


async def test_a_tool_sees_its_call_its_run_and_the_history(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    spec = scripted(
        calls(("introspect", {})),
        {"tool_calls": [{"name": "introspect", "input": {}, "id": "again"}]},
        {"text": "done"},
        tools=[{"type": "function", "name": "introspect", "timeout_s": 30}],
        metadata={"customer": "c-42"},
    )
    caplog.set_level(logging.INFO, logger="agentq.tool")
    async with start([introspect]) as client:
        run_id = await client.runs.submit(spec, tenant="acme")
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    first = result.steps[0].tool_results[0]
    seen = first.output
    assert (seen["run_id"], seen["step"], seen["call_id"]) == (run_id, 0, first.tool_call_id)
    assert seen["attempt"] == 1
    assert seen["idempotency_key"] == call_idempotency_key(run_id, 0, first.tool_call_id)
    assert (seen["metadata"], seen["tenant"]) == ({"customer": "c-42"}, "acme")
    assert 0 < seen["deadline_in_s"] <= 30
    # The history as the model saw it at the call's step: the prompt, then its own call.
    assert [role for role, _ in seen["history"]] == ["user", "assistant"]
    assert seen["history"][0][1] == "go"
    assert seen["history"][1][1][0]["tool_call_id"] == first.tool_call_id
    # A later step reads the earlier step's tool result too; another call, another key.
    later = result.steps[1].tool_results[0].output
    assert [role for role, _ in later["history"]] == ["user", "assistant", "tool", "assistant"]
    assert later["idempotency_key"] != seen["idempotency_key"]
    # The logger names the call (its trace and span: test_core_tool_context.py).
    record = next(r for r in caplog.records if r.name == "agentq.tool.introspect")
    assert record.getMessage() == "looking at myself"
    assert (vars(record)["run_id"], vars(record)["call_id"]) == (run_id, first.tool_call_id)


# -- cancellation of a sync tool ----------------------------------------------------------


@dataclass
class Signals:
    started: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    # Set when the test ends: a tool whose flag never comes must not outlive it.
    give_up: threading.Event = field(default_factory=threading.Event)


SIGNALS: dict[str, Signals] = {}


@pytest.fixture
def signals(request: pytest.FixtureRequest) -> Iterator[Signals]:
    made = SIGNALS[request.node.name] = Signals()
    yield made
    made.give_up.set()
    del SIGNALS[request.node.name]


@tool
def wait_for_cancel(key: str, ctx: ToolContext) -> str:
    """Work until the call is cancelled, polling its flag (a thread is not interrupted)."""
    signals = SIGNALS[key]
    signals.started.set()
    while not ctx.cancelled and not signals.give_up.is_set():
        signals.give_up.wait(0.01)
    if ctx.cancelled:
        signals.stopped.set()
    return "stopped"


async def _set(flag: threading.Event) -> bool:
    return await asyncio.to_thread(flag.wait, TIMEOUT_S)


async def test_a_sync_tool_polling_cancelled_stops_when_its_run_is_cancelled(
    start: Start, signals: Signals, request: pytest.FixtureRequest
) -> None:
    spec = scripted(
        calls(("wait_for_cancel", {"key": request.node.name})),
        {"text": "never"},
        tools=["wait_for_cancel"],
        tool_timeout_s=600,
    )
    async with start([wait_for_cancel]) as client:
        run_id = await client.runs.submit(spec)
        assert await _set(signals.started)
        assert not signals.stopped.is_set()
        assert await client.runs.cancel(run_id) == "cancelled"
        assert await _set(signals.stopped)


async def test_a_sync_tool_polling_cancelled_stops_when_its_call_times_out(
    start: Start, signals: Signals, request: pytest.FixtureRequest
) -> None:
    spec = scripted(
        calls(("wait_for_cancel", {"key": request.node.name})),
        {"text": "moved on"},
        tools=[{"type": "function", "name": "wait_for_cancel", "timeout_s": 0.5}],
    )
    async with start([wait_for_cancel]) as client:
        run_id = await client.runs.submit(spec)
        assert await _set(signals.stopped)
        await wait_event(client, run_id, of_type("finish"))
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
    assert result.status == "succeeded", result.error
    (outcome,) = result.steps[0].tool_results
    assert outcome.is_error
    assert "timed out" in str(outcome.output)


@tool
def count_to(n: int, ctx: ToolContext) -> str:
    """Count to n, reporting each number (a sync tool: it runs in a thread)."""
    for i in range(1, n + 1):
        ctx.progress_sync({"counted": i})
    return f"counted to {n}"


async def test_a_sync_tool_reports_progress_from_its_thread(start: Start) -> None:
    spec = scripted(
        calls(("count_to", {"n": 3})),
        {"text": "done"},
        tools=[{"type": "function", "name": "count_to"}],
    )
    async with start([count_to]) as client:
        run_id = await client.runs.submit(spec)
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        events = [e.model_dump() async for e in client.runs.events(run_id)]
    assert result.status == "succeeded", result.error
    shown = [
        (e["type"], e.get("output"))
        for e in events
        if e["type"] in ("tool-progress", "tool-result")
    ]
    assert shown == [
        ("tool-progress", {"counted": 1}),
        ("tool-progress", {"counted": 2}),
        ("tool-progress", {"counted": 3}),
        ("tool-result", "counted to 3"),
    ]


async def test_progress_sync_in_the_event_loop_is_refused() -> None:
    """Called on the loop it would wait on, it would never return: refused, one line."""
    ctx = ToolContext(
        run_id="r",
        step=0,
        call_id="c",
        tool=ToolDef(name="t", kind="function"),
        attempt=1,
        deadline_at=time.time() + 60,
    )
    with pytest.raises(RuntimeError, match=r"await ctx.progress\(value\)"):
        ctx.progress_sync(1)
