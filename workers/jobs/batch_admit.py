"""The admission job of batches (`batch_admit`): a worker settles a run's end (or a
batch's kick) and creates the lines' runs it admits. See orchestrator/batches/admission.py.
"""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry

from agentq.orchestrator.batches.admission import run_admission
from agentq.orchestrator.core.envelopes import BatchJobEnvelope, JobKind
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.base import client_of
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.liveness import OUTAGE

log = logging.getLogger("agentq.worker")

_REDIS_RETRY_S = 1.0


@handles(JobKind.BATCH_ADMIT)
async def batch_admit(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    envelope = BatchJobEnvelope.model_validate(payload)
    try:
        await run_admission(client_of(ctx), envelope, str(ctx["job_id"]))
    except Exception as exc:
        if is_transient_redis(exc) or (isinstance(exc, InfrastructureError) and exc.retryable):
            OUTAGE.failed(exc)  # one log line per outage, not one per job
            raise Retry(defer=_REDIS_RETRY_S) from exc
        log.error("admission of batch %s failed", envelope.batch_id, exc_info=exc)
        raise
