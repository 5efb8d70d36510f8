"""The `hook` job: a step's hook, run on a worker that registered it.

A model step whose worker lacks a hook the run names (`prepare_step`, a `@stop_when`
stop condition, a tool's `@needs_approval` rule) writes the request beside the run,
enqueues this job on a queue of a worker that announced the hook, and waits for the
reply pushed here: the hook's answer as JSON, or its error (workers/steps/hook_calls.py).
The job never changes the run: the model step that asked records the answer or fails
the run with the error.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.workers.jobs.base import deps_of
from agentq.workers.jobs.registry import handles
from agentq.workers.steps import hook_calls

log = logging.getLogger("agentq.worker")


@handles(JobKind.HOOK)
async def hook_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    run_id, step, request_id = envelope.run_id, envelope.step, envelope.call_id or ""
    request = await hook_calls.read_request(deps.store, run_id, step, request_id)
    if request is None:
        return  # the step stopped waiting (or the run expired): nobody wants the answer
    if not hook_calls.registered(request):
        # Announced by another worker of this queue: leave the job to it.
        not_served = ctx.get("not_served")
        if not_served is not None:
            not_served(ctx["job_id"])
        raise Retry(defer=0)
    with tracing.process_span(envelope, ctx.get("queue", "tools"), ctx["job_id"]):
        try:
            reply: dict[str, Any] = {
                "value": await hook_calls.invoke(deps.store, run_id, step, request)
            }
        except Exception as exc:
            log.info("%s failed: %s", request.label, exc)
            reply = {"error": hook_calls.failure(request, exc)}
        await hook_calls.push_reply(deps.store, run_id, step, request_id, reply)
