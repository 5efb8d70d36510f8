"""The `hook` job: a step's hook, run on a worker that registered it.

A model step whose worker lacks a hook the run names (`prepare_step`, a `@stop_when`
stop condition, a tool's `@needs_approval` rule) writes the request beside the run,
enqueues this job on a queue of a worker that announced the hook (needing the hook's
registry key, so only workers that registered it claim it), and waits for the reply
pushed here: the hook's answer as JSON, or its error (orchestrator/runs/hook_jobs.py).
The job never changes the run: the model step that asked records the answer or fails
the run with the error.
"""

from __future__ import annotations

import logging
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.runs import hook_jobs
from agentq.orchestrator.runs.hook_jobs import HookRequest
from agentq.workers.jobs.base import WorkerDeps, deps_of
from agentq.workers.jobs.registry import handles
from agentq.workers.steps import hook_calls

log = logging.getLogger("agentq.worker")


@handles(JobKind.HOOK)
async def hook_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    run_id, step, request_id = envelope.run_id, envelope.step, envelope.call_id or ""
    request = await hook_jobs.read_request(deps.store, run_id, step, request_id)
    if request is None:
        return  # the step stopped waiting (or the run expired): nobody wants the answer
    with tracing.process_span(envelope, ctx.get("queue", "tools"), ctx["job_id"]):
        reply = await _answer(deps, envelope, request)
        await hook_jobs.push_reply(deps.store, run_id, step, request_id, reply)


async def _answer(deps: WorkerDeps, envelope: JobEnvelope, request: HookRequest) -> dict[str, Any]:
    """The hook's answer, or its error, as the step that asked reads them."""
    if not hook_calls.registered(request):  # the job needs the hook: only a misrouted one
        return {"error": f"{request.label} is not registered on this worker"}
    try:
        value = await hook_calls.invoke(deps.store, envelope.run_id, envelope.step, request)
    except Exception as exc:
        log.info("%s failed: %s", request.label, exc)
        return {"error": hook_calls.failure(request, exc)}
    return {"value": value}
