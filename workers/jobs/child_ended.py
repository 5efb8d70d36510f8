"""The `child_ended` job: a child run ended; answer its parent's call, or give the
outcome of the workflow node it ran (the job's run is the child)."""

from __future__ import annotations

from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import job_id
from agentq.orchestrator.runs.state import Reply
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.jobs.base import answered, deps_of, guarded
from agentq.workers.jobs.registry import handles
from agentq.workers.steps import hook_calls
from agentq.workers.tools import agent as sub_agents
from agentq.workers.tools import workflow as workflows


@handles(JobKind.CHILD_ENDED)
async def child_ended(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    work = answered(deps, envelope, _ended(deps.store, envelope.run_id))
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await guarded(deps, envelope, work)


async def _ended(store: RunStore, child_id: str) -> Reply | None:
    meta = await store.meta(child_id)
    link = sub_agents.parent_of(meta)
    if link is None:
        return None
    if link.node is not None:
        return await workflows.node_child_ended(store, child_id, meta, link)
    return await sub_agents.child_ended(store, child_id, meta, link, hook_calls.call)
