"""The job of a tool call without a run (`client.calls.call`): claim, execute, record once.

The same body as a run's tool call (`tool_call.execute_call`: executors, retry policy,
output bounds, spans); only the call's home is its own hash (`OwnCallHome`). A
re-delivered job whose call has its result (recorded, or cancelled) does nothing; a
job past its deliveries records that its worker died each time. Unlike a run's job, a
failure here has no run to fail: it is left to arq.
"""

from __future__ import annotations

import logging
from typing import Any

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.home import OwnCallHome
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE, JobEnvelope, JobKind
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.base import deps_of, retrying
from agentq.workers.jobs.registry import handles
from agentq.workers.jobs.tool_call import execute_call
from agentq.workers.queue.liveness import OUTAGE

log = logging.getLogger("agentq.worker")


@handles(JobKind.CALL)
async def call_job(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = JobEnvelope.model_validate(payload)
    deps = deps_of(ctx)
    queue = ctx.get("queue", TOOLS_QUEUE)
    home = OwnCallHome(deps.calls, envelope.run_id)
    parent = tracing.carrier_context(envelope.run_trace)
    with tracing.process_span(envelope, queue, ctx["job_id"], parent=parent):
        try:
            await execute_call(ctx, deps, home)
        except Exception as exc:
            if not is_transient_redis(exc):
                raise
            retrying(exc)
        else:
            OUTAGE.succeeded(wrote=True)  # the call's record was written
