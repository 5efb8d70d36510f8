"""Runs `@tool` functions registered in this worker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from agentq.orchestrator.core.errors import ToolError, ToolTimeoutError
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.workers.tools.base import WorkerServices
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.function_tools import FunctionTool


class FunctionExecutor:
    kind = "function"
    queue: str | None = None
    keeps_runs = False

    def __init__(self, tools: Sequence[FunctionTool]) -> None:
        self.tools = {t.name: t for t in tools}

    async def start(self, services: WorkerServices | None = None) -> None:
        return None

    async def announcements(self, queue: str) -> list[ToolAnnouncement]:
        return [
            ToolAnnouncement(
                name=t.name,
                kind="function",
                queue=queue,
                description=t.description,
                input_schema=t.input_schema,
                to_model_output=t.to_model_output,
            )
            for t in self.tools.values()
        ]

    async def execute(self, tool: ToolDef, input: Any, ctx: ToolContext) -> Any:
        fn = self.tools.get(tool.served_name)
        if fn is None:
            # Its job needs the tool (routing by tool set): only a misrouted call gets here.
            raise ToolError(
                f"tool {tool.served_name!r} is not registered on this worker (misrouted call)"
            )
        kwargs = fn.bind(input)
        if fn.context_param is not None:
            kwargs[fn.context_param] = await ctx.with_owner()
        budget_s = ctx.deadline_at - time.time()
        try:
            if budget_s <= 0:
                raise TimeoutError  # its deadline passed already: not started
            # In the job's own task, under a deadline: `asyncio.wait_for` ran it in a task
            # of its own on Python 3.11 (a task, its loop turn and a timer: ~8 us a call).
            async with asyncio.timeout(budget_s):
                return await self._call(fn, kwargs, ctx)
        except TimeoutError:
            raise ToolTimeoutError(
                f"tool {tool.name!r} timed out after {tool.timeout_s:g} s"
            ) from None

    async def _call(self, fn: FunctionTool, kwargs: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            return await self._run(fn, kwargs, ctx)
        except asyncio.CancelledError:
            # Cancelled, or timed out: a sync tool's thread runs on unless it polls this.
            ctx.cancellation.set()
            raise

    @staticmethod
    async def _run(fn: FunctionTool, kwargs: dict[str, Any], ctx: ToolContext) -> Any:
        if fn.kind == "sync":
            return await asyncio.to_thread(fn.fn, **kwargs)
        if fn.kind == "async":
            return await fn.fn(**kwargs)
        last: Any = None
        async for value in fn.fn(**kwargs):
            # Shown the moment it is yielded: whether a value is the last (the result) is
            # known only once the generator ends, so the result is shown as progress too,
            # as the AI SDK shows preliminary tool results.
            await ctx.progress(value)
            last = value
        return last

    async def release_run(self, run_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None
