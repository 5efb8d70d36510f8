"""The `park_expiry` job: a parked call's deadline (a timer of the model queue).

Unless the call was resolved meanwhile, it becomes a tool error the model sees, and
the run goes on (expire_parked.lua).
"""

from __future__ import annotations

import logging
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.core.jobs import job_id
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.loop.plan import CallPlan, error_result
from agentq.orchestrator.runs.state import CallStatus, ExpireParked
from agentq.orchestrator.runs.transitions import enqueued_job_ids, result_args
from agentq.workers.jobs.base import WorkerDeps, deps_of, ended, guarded
from agentq.workers.jobs.registry import handles

log = logging.getLogger("agentq.worker")


@handles(JobKind.PARK_EXPIRY)
async def park_expiry(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    with tracing.process_span(envelope, MODEL_QUEUE, ctx.get("job_id") or job_id(envelope)):
        await guarded(deps, envelope, _park_expiry(deps, envelope))


async def _park_expiry(deps: WorkerDeps, envelope: JobEnvelope) -> None:
    run_id, step, call_id = envelope.run_id, envelope.step, envelope.call_id or ""
    call_json, status = await deps.store.call_state(run_id, step, call_id)
    if call_json is None:
        return  # the run has moved on or expired
    call = CallPlan.model_validate_json(call_json)
    within = f"within {call.park_timeout_s:g} s" if call.park_timeout_s is not None else "in time"
    wanted = "approved" if status == CallStatus.AWAITING_APPROVAL else "given a result"
    result = error_result(
        call.id,
        call.name,
        f"The call to {call.name!r} was not {wanted} {within}.",
        ToolErrorKind.TIMEOUT,
    )
    hops = tracing.Hops(run_id)
    args = hops.stamp(result_args(run_id, step, result, completion=ExpireParked))
    expired = await deps.store.expire_parked(args)
    log.debug("parked call %s/%d/%s: %s", run_id, step, call_id, expired.outcome)
    hops.sent(enqueued_job_ids(args, expired.outcome))
    await ended(deps, expired.outcome, envelope)
