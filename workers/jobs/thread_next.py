"""The end of a thread's run (`thread_next`): the run first in the thread's queue starts
(orchestrator/threads/api.py: Threads.advance). Idempotent: a queued run's id was fixed
when it was queued, so a re-delivered job finds it started."""

from __future__ import annotations

from typing import Any

from arq import Retry

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import JobKind, ThreadJobEnvelope
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.liveness import OUTAGE

_CLIENT = "thread_client"
_REDIS_RETRY_S = 1.0


def _client(ctx: dict[str, Any]) -> Client:
    """One Client per worker on the worker's own connection and settings."""
    client: Client | None = ctx.get(_CLIENT)
    if client is None:
        deps = ctx["agentq"]
        settings = getattr(deps, "settings", None) or Settings()
        client = Client(redis=deps.store.redis, settings=settings)
        ctx[_CLIENT] = client
    return client


@handles(JobKind.THREAD_NEXT)
async def thread_next(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = ThreadJobEnvelope.model_validate(payload)
    try:
        await _client(ctx).threads.advance(envelope.tenant, envelope.thread_id)
    except Exception as exc:
        if is_transient_redis(exc) or (isinstance(exc, InfrastructureError) and exc.retryable):
            OUTAGE.failed(exc)  # one log line per outage, not one per job
            raise Retry(defer=_REDIS_RETRY_S) from exc
        raise
