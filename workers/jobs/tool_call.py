"""The `tool_call` job: one call of a run's step, executed, its result joined to the step.

The body (`execute_call`) is the one path every worker-executed call takes, whichever
its home (orchestrator/calls/home.py): a run's step here, a call's own hash for a call
without a run (workers/jobs/call.py). Claim, execute within the call's span, bound the
output, record once; a re-delivered job whose call has its result does nothing.
"""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.home import CallHome, RunCallHome
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.tool_output import bounded_result
from agentq.orchestrator.loop.plan import error_result
from agentq.workers.jobs.base import WorkerDeps, attempt_of, deps_of, exhausted, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.claims import job_ride
from agentq.workers.queue.outcome import JobOutcome, report
from agentq.workers.steps.genai_spans import tool_attributes, tool_result_attributes
from agentq.workers.tools.execution import execute


@handles(JobKind.TOOL_CALL)
async def tool_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    queue = ctx.get("queue", TOOLS_QUEUE)
    home = RunCallHome(deps.store, envelope.run_id, envelope.step, envelope.call_id or "")
    with tracing.process_span(envelope, queue, ctx["job_id"]):
        await guarded(deps, envelope, execute_call(ctx, deps, home))


async def execute_call(ctx: dict[str, Any], deps: WorkerDeps, home: CallHome) -> None:
    attempt = attempt_of(ctx)
    claimed = await home.claim(attempt)
    if claimed is None:
        return
    call, tool = claimed.call, claimed.tool
    with tracing.span(
        f"execute_tool {call.name}",
        attributes=lambda: tool_attributes(call, tool, home.stream_id),
    ) as tool_span:
        if exhausted(ctx, deps):
            # A poison call (it kills its worker): the model hears so, the run goes on.
            result = error_result(
                call.id,
                call.name,
                f"the call to {call.name!r} was attempted {deps.max_deliveries} times "
                "and its worker died each time",
            )
        elif tool is None:
            result = error_result(
                call.id, call.name, f"tool {call.name!r} is not defined in this run"
            )
        else:
            result = await execute(home, deps.executors.get(tool.kind), tool, call, attempt)
        limit = (tool.max_output_bytes if tool else None) or deps.max_output_bytes
        result = bounded_result(result, limit)
        tracing.annotate(tool_span, lambda: tool_result_attributes(result))
        if result.is_error:
            tracing.mark_error(tool_span, "tool_error", str(result.output))
            report(JobOutcome.TOOL_ERROR)
    await home.record(result, ride=job_ride(ctx))
