"""The tick job of cron schedules (`schedule_tick`): a worker fires one tick. See
orchestrator/schedules/api.py: the tick is claimed once, by a Lua transition keyed by the
schedule and the tick, and its run is created under an id derived from the same pair."""

from __future__ import annotations

import logging
from typing import Any

from arq import Retry

from agentq.orchestrator.core.envelopes import JobKind, ScheduleJobEnvelope
from agentq.orchestrator.core.errors import InfrastructureError, SpecError
from agentq.orchestrator.redis.faults import is_transient_redis
from agentq.workers.jobs.base import client_of
from agentq.workers.jobs.registry import handles
from agentq.workers.queue.liveness import OUTAGE

log = logging.getLogger("agentq.worker")

_REDIS_RETRY_S = 1.0


@handles(JobKind.SCHEDULE_TICK)
async def schedule_tick(ctx: dict[str, Any], payload: dict[str, Any]) -> None:
    tick = ScheduleJobEnvelope.model_validate(payload)
    try:
        await client_of(ctx).schedules.fire(tick)
    except SpecError as exc:
        # Offered when the tick was checked, no longer when its run was created (a worker
        # withdrew a tool in between): the next tick is set already, and tries again;
        # a refusal found by the check is the tick's record (`refused`, Schedules.fire).
        log.error("schedule %s: the run of tick %d was refused: %s", tick.name, tick.tick_ms, exc)
    except Exception as exc:
        if is_transient_redis(exc) or (isinstance(exc, InfrastructureError) and exc.retryable):
            OUTAGE.failed(exc)  # one log line per outage, not one per job
            raise Retry(defer=_REDIS_RETRY_S) from exc
        raise
