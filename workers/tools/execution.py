"""Executing one call with its executor: the retry policy within the call's deadline,
and any failure turned into an error result. Shared by a run's calls and by calls
without a run (`call_jobs`)."""

from __future__ import annotations

import asyncio
import logging
import time

from agentq.orchestrator import tracing
from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.loop.plan import CallPlan, error_result
from agentq.orchestrator.loop.tool_retry import retry_delay_s
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.orchestrator.tools.resolution import ToolDef
from agentq.workers.tools.base import ToolContext, ToolExecutor, ToolNotServed

log = logging.getLogger("agentq.worker")


async def run_executor(
    executor: ToolExecutor, tool: ToolDef, call: CallPlan, context: ToolContext
) -> ToolResultPart:
    """Execute a call, retried as its tool's retry policy allows within its deadline; a
    failure becomes an error result. Shared by a run's calls and calls without a run."""
    deadline_at = context.deadline_at
    executions = 1
    while True:
        try:
            output = await executor.execute(tool, call.input, context)
            break
        except ToolNotServed:
            raise  # another worker may serve it: not the model's business
        except ToolError as exc:
            # Every failed execution is an exception event on the call's span.
            tracing.record_exception(exc)
            delay_s = retry_delay_s(
                tool.retry, executions, exc.retryable, deadline_at - time.time()
            )
            if delay_s is None:
                return error_result(call.id, call.name, exc.message)
            log.info(
                "tool %s failed (%s); execution %d in %g s", call.name, exc, executions + 1, delay_s
            )
            await asyncio.sleep(delay_s)
            executions += 1
        except Exception as exc:  # a failing tool is the model's to see, not the run's end
            if is_transient_redis(exc):
                raise  # Redis failed under the tool (progress, elicitation): run it again
            tracing.record_exception(exc)
            return error_result(call.id, call.name, f"{type(exc).__name__}: {exc}")
    return ToolResultPart(
        tool_call_id=call.id,
        tool_name=call.name,
        output=output,  # made plain and capped by bounded_result
    )
