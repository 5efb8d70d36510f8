"""The `start_call` job: start what answers a parked call (a sub-agent's child run, or
a workflow)."""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import job_id
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.runs.state import Reply
from agentq.orchestrator.tools import ToolDef
from agentq.workers.jobs.base import WorkerDeps, answered, deps_of, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.tools import agent as sub_agents
from agentq.workers.tools import workflow as workflows


@handles(JobKind.START_CALL)
async def start_call(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await guarded(deps, envelope, answered(deps, envelope, _start_call(deps, envelope)))


async def _start_call(deps: WorkerDeps, envelope: JobEnvelope) -> Reply | None:
    call_json, _ = await deps.store.call_state(
        envelope.run_id, envelope.step, envelope.call_id or ""
    )
    name = CallPlan.model_validate_json(call_json).name if call_json else ""
    tool_json = await deps.store.tool_def(envelope.run_id, name) if name else None
    if tool_json is not None and ToolDef.model_validate_json(tool_json).kind == "workflow":
        return await workflows.start_workflow(deps.store, envelope)
    return await sub_agents.start_child(deps.store, deps.settings, envelope)
