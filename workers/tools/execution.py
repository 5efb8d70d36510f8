"""Executing one call with its executor: its context (progress, logs and questions go
through the call's home), the retry policy within the call's deadline, and any failure
turned into an error result. One path for a run's calls and calls without a run."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.home import CallHome
from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import progress_value
from agentq.orchestrator.loop.plan import CallPlan, error_result
from agentq.orchestrator.loop.tool_retry import retry_delay_s
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.tools import ToolDef
from agentq.workers.tools.base import ToolExecutor
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.input_requests import InputRequests

log = logging.getLogger("agentq.worker")


async def execute(
    home: CallHome,
    executor: ToolExecutor | None,
    tool: ToolDef,
    call: CallPlan,
    attempt: int,
) -> ToolResultPart:
    """Execute a claimed call with the worker's executor of its tool's kind."""
    if executor is None:
        return error_result(
            call.id,
            call.name,
            f"this worker cannot run {tool.kind} tools (misrouted call)",
            ToolErrorKind.EXECUTION,
        )

    async def progress(value: Any) -> None:
        await home.emit(
            "tool-progress",
            tool_call_id=call.id,
            tool_name=call.name,
            output=progress_value(value),
        )

    async def forward_log(level: str, data: Any, logger: str | None) -> None:
        await home.emit(
            "tool-log",
            tool_call_id=call.id,
            tool_name=call.name,
            level=level,
            data=data,
            logger=logger,
        )

    deadline_at = time.time() + tool.timeout_s
    inputs = InputRequests(
        home, call, attempt=attempt, deadline_at=deadline_at, park_timeout_s=tool.park_timeout_s
    )
    relays = home.relays_logs_and_sampling
    context = ToolContext(
        run_id=home.stream_id,
        step=home.step or 0,
        call_id=call.id,
        tool=tool,
        attempt=attempt,
        deadline_at=deadline_at,
        progress=progress,
        log=forward_log if relays else None,
        elicit=inputs,
        sample=inputs.sample if relays else None,
        home=home,
    )
    return await _run_executor(executor, tool, call, context)


async def _run_executor(
    executor: ToolExecutor, tool: ToolDef, call: CallPlan, context: ToolContext
) -> ToolResultPart:
    """Execute a call, retried as its tool's retry policy allows within its deadline; a
    failure becomes an error result."""
    deadline_at = context.deadline_at
    executions = 1
    while True:
        try:
            output = await executor.execute(tool, call.input, context)
            break
        except ToolError as exc:
            # Every failed execution is an exception event on the call's span.
            tracing.record_exception(exc)
            delay_s = retry_delay_s(
                tool.retry, executions, exc.retryable, deadline_at - time.time()
            )
            if delay_s is None:
                return error_result(call.id, call.name, exc.message, exc.kind)
            log.info(
                "tool %s failed (%s); execution %d in %g s", call.name, exc, executions + 1, delay_s
            )
            await asyncio.sleep(delay_s)
            executions += 1
        except Exception as exc:  # a failing tool is the model's to see, not the run's end
            if is_transient_redis(exc):
                raise  # Redis failed under the tool (progress, elicitation): run it again
            tracing.record_exception(exc)
            return error_result(
                call.id, call.name, f"{type(exc).__name__}: {exc}", ToolErrorKind.EXECUTION
            )
    return ToolResultPart(
        tool_call_id=call.id,
        tool_name=call.name,
        output=output,  # made plain and capped by bounded_result
    )
