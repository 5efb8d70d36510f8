"""A `@tool` function's deadline (`FunctionExecutor.execute`): one that has passed starts
nothing; one that passes while the tool runs cancels it (its `cancellation` set) and is a
timeout; the tool runs in its job's task, which goes on."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentq.orchestrator.core.errors import ToolTimeoutError
from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.tools.function_tools import tool

pytestmark = pytest.mark.unit

ran: list[str] = []


@tool
async def slow() -> str:
    ran.append("slow")
    await asyncio.sleep(30)
    return "late"


def _ctx(deadline_in_s: float) -> ToolContext:
    spec = ToolDef(name="slow", kind="function", timeout_s=0.05)
    return ToolContext(
        run_id="r",
        step=0,
        call_id="c",
        tool=spec,
        attempt=1,
        deadline_at=time.time() + deadline_in_s,
    )


async def test_a_call_past_its_deadline_is_a_timeout_and_never_starts() -> None:
    ran.clear()
    ctx = _ctx(-1.0)
    with pytest.raises(ToolTimeoutError, match=r"timed out after 0\.05 s"):
        await FunctionExecutor([slow]).execute(ctx.tool, {}, ctx)
    assert ran == []


async def test_a_call_that_outlives_its_deadline_is_cancelled_and_a_timeout() -> None:
    ran.clear()
    ctx = _ctx(0.05)
    with pytest.raises(ToolTimeoutError):
        await FunctionExecutor([slow]).execute(ctx.tool, {}, ctx)
    assert ran == ["slow"]
    assert ctx.cancellation.is_set()
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # the deadline's cancel is taken back: the job goes on
