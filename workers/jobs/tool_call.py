"""The `tool_call` job: one call of a run's step, executed, its result joined to the step.

The body (`execute_call`) is the one path every worker-executed call takes, whichever
its home (orchestrator/calls/home.py): a run's step here, a call's own hash for a call
without a run (workers/jobs/call.py). Claim, execute within the call's span, guard the
output (the run's `tool_output` guardrails), convert it for the model (the tool's
`to_model_output` hook), bound it, record once; a re-delivered job whose call has its
result does nothing.
"""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.home import CallHome, HeldTools, RunCallHome
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.messages import ToolResultPart
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import UnusableOutput, bounded_result, jsonable
from agentq.orchestrator.loop.plan import error_result
from agentq.orchestrator.loop.prepare import TO_MODEL_OUTPUT_KIND
from agentq.orchestrator.runs.hook_jobs import HookFailed, HookRequest
from agentq.orchestrator.runs.result_guards import guarded_result
from agentq.orchestrator.tools import ToolDef
from agentq.workers.jobs.base import WorkerDeps, attempt_of, deps_of, exhausted, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.claims import job_ride
from agentq.workers.queue.outcome import JobOutcome, report
from agentq.workers.steps import hook_calls
from agentq.workers.steps.genai_spans import tool_attributes, tool_result_attributes
from agentq.workers.tools.execution import execute


@handles(JobKind.TOOL_CALL)
async def tool_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    queue = ctx.get("queue", TOOLS_QUEUE)
    # This worker ran a model step of the run: it holds the run's tools, which the claim
    # then does not read.
    held = deps.histories.get(envelope.run_id)
    home = RunCallHome(
        deps.store,
        envelope.run_id,
        envelope.step,
        envelope.call_id or "",
        HeldTools(held.stamp, held.tools) if held is not None else None,
    )
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
                ToolErrorKind.EXECUTION,
            )
        elif tool is None:
            result = error_result(
                call.id,
                call.name,
                f"tool {call.name!r} is not defined in this run",
                ToolErrorKind.NO_SUCH_TOOL,
            )
        else:
            result = await execute(home, deps.executors.get(tool.kind), tool, call, attempt)
            result = await _guarded_output(deps, home, tool, result)
            result = await _for_model(deps, home, tool, result)
        limit = (tool.max_output_bytes if tool else None) or deps.max_output_bytes
        result = bounded_result(result, limit)
        tracing.annotate(tool_span, lambda: tool_result_attributes(result))
        if result.is_error:
            tracing.mark_error(tool_span, "tool_error", str(result.output))
            report(JobOutcome.TOOL_ERROR)
    await home.record(result, ride=job_ride(ctx))


async def _guarded_output(
    deps: WorkerDeps, home: CallHome, tool: ToolDef, result: ToolResultPart
) -> ToolResultPart:
    """The result as the run's `tool_output` guards let it through (only a run's tools
    have guards), the guards this worker registered called here."""
    if home.step is None:
        return result
    return await guarded_result(
        deps.store, home.stream_id, home.step, tool, result, hook_calls.call
    )


async def _for_model(
    deps: WorkerDeps, home: CallHome, tool: ToolDef, result: ToolResultPart
) -> ToolResultPart:
    """The result with what the model sees of it, when its tool has a `to_model_output`
    hook; the output stays as the tool gave it. Only a run's results reach a model, and
    an error is for the model already. A hook that fails is a tool error, as a guard is."""
    if tool.to_model_output is None or home.step is None or result.is_error:
        return result
    try:
        output = jsonable(result.output)
    except UnusableOutput:
        return result  # bounded_result makes it the tool error it is
    request = HookRequest(kind=TO_MODEL_OUTPUT_KIND, name=tool.to_model_output, args=[output])
    try:
        seen = await hook_calls.call(deps.store, home.stream_id, home.step, request, tool.timeout_s)
    except HookFailed as exc:
        return error_result(
            result.tool_call_id, result.tool_name, exc.message, ToolErrorKind.EXECUTION
        )
    return result.model_copy(update={"model_output": seen})
