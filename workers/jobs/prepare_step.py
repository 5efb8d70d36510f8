"""The `prepare_step` job: a step's hook, run on a worker that registered it.

A model step whose worker lacks the run's hook enqueues this job on a queue of
a worker that announced it, and waits for the reply pushed here (overrides, or
the hook's error). The job never changes the run: the model step that asked
records the overrides or fails the run with the error.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from arq import Retry

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.runs.state import MetaField
from agentq.workers.jobs.base import deps_of
from agentq.workers.jobs.registry import handles
from agentq.workers.steps.hooks import registered_hooks
from agentq.workers.steps.prepare import hook_error, hook_inputs, push_hook_reply

log = logging.getLogger("agentq.worker")


@handles(JobKind.PREPARE_STEP)
async def prepare_step_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    try:
        meta = await deps.store.meta(envelope.run_id)
    except RunNotFoundError:
        return  # expired meanwhile: nobody waits for the answer
    name = str(json.loads(meta[MetaField.SPEC]).get("prepare_step") or "")
    hook = registered_hooks().get(name)
    if hook is None:
        # Announced by another worker of this queue: leave the job to it.
        not_served = ctx.get("not_served")
        if not_served is not None:
            not_served(ctx["job_id"])
        raise Retry(defer=0)
    with tracing.process_span(envelope, ctx.get("queue", "tools"), ctx["job_id"]):
        steps, messages = await hook_inputs(deps.store, envelope.run_id)
        try:
            overrides = await hook(envelope.step, steps, messages)
            reply: dict[str, Any] = {
                "overrides": overrides.model_dump(mode="json", exclude_unset=True)
            }
        except Exception as exc:
            log.info("prepare_step hook %s failed: %s", name, exc)
            reply = {"error": hook_error(name, exc)}
        await push_hook_reply(
            deps.store, envelope.run_id, envelope.step, envelope.call_id or "", reply
        )
