"""The sweeper's half for tool calls without a run: a call not done whose job was lost
(a failover dropped it) is enqueued again, as runs are (orchestrator/runs/redrive.py).

The call transitions score each call in its partition's moving index while it is not
done (calls/lua/call_prelude.lua); a pass reads only the calls unmoved for a while, and
`call_redrive.lua` enqueues the call's job again only if it is neither queued nor held.
"""

from __future__ import annotations

import json

from agentq.orchestrator.calls.catalogue import call_job
from agentq.orchestrator.calls.state import CallField, RedriveCallJob
from agentq.orchestrator.calls.store import CallStore
from agentq.orchestrator.core import keys
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.machine.sweeper import Sweeper
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.state import Outcome


class CallRedriver(Sweeper):
    def __init__(self, store: CallStore, *, after_s: float, limit: int) -> None:
        super().__init__(store.redis, keys.moving_calls, after_s=after_s, limit=limit)
        self.store = store

    async def redrive(self, entry: str) -> int:
        """Enqueue the call's job (the entry is its id) again if it was lost; how many
        jobs (0 or 1)."""
        call_id = entry
        with redis_errors_mapped():
            raw_call, raw_trace = await resolved(
                self.redis.hmget(keys.call_meta(call_id), [CallField.CALL, CallField.TRACE])
            )
        job = None  # the call is gone: the transition takes it out of the index
        if raw_call is not None:
            plan = CallPlan.model_validate_json(text(raw_call))
            trace = json.loads(text(raw_trace)) if raw_trace is not None else {}
            job = call_job(plan, trace)
        answer = await self.store.redrive(RedriveCallJob(call_id=call_id, job=job))
        return answer.jobs if answer.outcome == Outcome.REDRIVEN else 0
