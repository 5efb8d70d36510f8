"""The end of a thread's run (`thread_next`): the run first in the thread's queue starts
(orchestrator/threads/api.py: Threads.advance). Idempotent: a queued run's id was fixed
when it was queued, so a re-delivered job finds it started."""

from __future__ import annotations

from typing import Any

from arq import Retry

from agentq.orchestrator.core.envelopes import JobKind, ThreadJobEnvelope
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.base import client_of
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.liveness import OUTAGE

_REDIS_RETRY_S = 1.0


@handles(JobKind.THREAD_NEXT)
async def thread_next(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = ThreadJobEnvelope.model_validate(payload)
    try:
        await client_of(ctx).threads.advance(envelope.tenant, envelope.thread_id)
    except Exception as exc:
        if is_transient_redis(exc) or (isinstance(exc, InfrastructureError) and exc.retryable):
            OUTAGE.failed(exc)  # one log line per outage, not one per job
            raise Retry(defer=_REDIS_RETRY_S) from exc
        raise
