"""The `child_ended` job: a child run ended; answer its parent's call (the job's run
is the child)."""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import job_id
from agentq.workers.jobs.base import answered, deps_of, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.steps import hook_calls
from agentq.workers.tools import agent as sub_agents


@handles(JobKind.CHILD_ENDED)
async def child_ended(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    work = answered(deps, envelope, sub_agents.child_ended(deps.store, envelope, hook_calls.call))
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await guarded(deps, envelope, work)
