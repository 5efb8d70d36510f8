"""The admission job of batches (`batch_admit`): a worker settles a run's end (or a
batch's kick) and creates the lines' runs it admits. See orchestrator/batches/admission.py.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry

from agentq.orchestrator.batches.admission import run_admission
from agentq.orchestrator.batches.state import BatchField, BatchStatus
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import BatchJobEnvelope, JobKind
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.base import client_of
from agentq.workers.jobs.registry import handles
from agentq.workers.models.gemini_cache import explicit as gemini_cache
from agentq.workers.queue.liveness import OUTAGE

log = logging.getLogger("agentq.worker")

_REDIS_RETRY_S = 1.0


@handles(JobKind.BATCH_ADMIT)
async def batch_admit(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = BatchJobEnvelope.model_validate(payload)
    client = client_of(ctx)
    try:
        await run_admission(client, envelope, str(ctx["job_id"]))
        await _release_if_ended(ctx, client, envelope)
    except Exception as exc:
        if is_transient_redis(exc) or (isinstance(exc, InfrastructureError) and exc.retryable):
            OUTAGE.failed(exc)  # one log line per outage, not one per job
            raise Retry(defer=_REDIS_RETRY_S) from exc
        log.error("admission of batch %s failed", envelope.batch_id, exc_info=exc)
        raise


async def _release_if_ended(
    ctx: dict[str, Any], client: Client, envelope: BatchJobEnvelope
) -> None:
    """The job that settles a batch's last line (or one after its cancel) deletes the
    batch's Gemini cached contents: its lines will not name them again."""
    store = client.batches.store
    status = await store.field(envelope.tenant, envelope.batch_id, BatchField.STATUS)
    if status in (BatchStatus.DONE, BatchStatus.CANCELLED):
        deps = ctx["agentq"]
        await gemini_cache.release(deps.models, client.redis, envelope.tenant, envelope.batch_id)
