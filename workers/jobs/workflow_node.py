"""The `workflow_node` job: one node of a workflow call (on the model queue, or its
tool's queue)."""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import job_id
from agentq.workers.jobs.base import answered, attempt_of, deps_of, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.tools import workflow as workflows


@handles(JobKind.WORKFLOW_NODE)
async def workflow_node(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    queue = ctx.get("queue", MODEL_QUEUE)
    work = workflows.run_node(
        deps.store, deps.models, deps.executors, deps.settings, envelope, attempt_of(ctx)
    )
    with tracing.process_span(envelope, queue, ctx.get("job_id") or job_id(envelope)):
        await guarded(deps, envelope, answered(deps, envelope, work))
