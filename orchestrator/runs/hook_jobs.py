"""A hook asked of a worker that registered it: a `hook` job, and the reply it pushes.

The request (kind, name, JSON arguments) is written beside the run, a `hook` job is
enqueued on a queue of a worker that announced the hook (workers/jobs/hook.py), and the
asker waits for the reply pushed back (the hook's JSON answer, or its error) within its
deadline. The job's payload stays a reference; what the hook is asked lives in the
request key. A worker asks so when it did not register the hook itself
(workers/steps/hook_calls.py); a client, which registers none, always does (a client
tool's result, guarded before it is recorded: runs/result_guards.py).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis

from agentq.orchestrator import tracing
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind, QueuedJob
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.loop.prepare import (
    GUARDRAIL_KIND,
    LLM_GUARDRAIL_KIND,
    NEEDS_APPROVAL_KIND,
    PREPARE_STEP_KIND,
    STOP_WHEN_KIND,
    TO_MODEL_OUTPUT_KIND,
)
from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools.announcements import live_registry

# A request, and the reply a remote hook pushed, are kept this long for the step that asked.
_REPLY_TTL_S = 600

# How the spec names each kind (in errors and spans).
LABELS = {
    PREPARE_STEP_KIND: "prepare_step",
    STOP_WHEN_KIND: "stop_when",
    NEEDS_APPROVAL_KIND: "needs_approval",
    GUARDRAIL_KIND: "guardrail",
    TO_MODEL_OUTPUT_KIND: "to_model_output",
    LLM_GUARDRAIL_KIND: "llm guardrail",
}


class HookRequest(BaseModel):
    """What a hook is asked: its kind, its name, its arguments as JSON."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    name: str
    args: list[Any] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{LABELS.get(self.kind, self.kind)} hook {self.name!r}"


class HookFailed(Exception):
    """The hook raised, is served nowhere, or did not answer in time."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def ask(
    store: RunStore, run_id: str, step: int, request: HookRequest, timeout_s: float
) -> Any:
    live = live_registry(await store.registry(), time.time())
    served = sorted(
        (a.queue, key)
        for key, a in live.items()
        if a.kind == request.kind and a.name == request.name
    )
    if not served:
        raise HookFailed(f"{request.label} is served by no live worker")
    queue, needs = served[0]
    # The job's call_id names this request. It needs the hook's registry key: only
    # workers that registered the hook claim it (workers/queue/lua/take.lua).
    request_id = uuid.uuid4().hex[:16]
    envelope = JobEnvelope(
        kind=JobKind.HOOK, run_id=run_id, step=step, call_id=request_id, needs=needs
    )
    job = queued_job(envelope, queue)
    redis: Redis = store.redis
    asked = keys.hook_request(run_id, step, request_id)
    with redis_errors_mapped():
        await redis.set(asked, request.model_dump_json(), ex=_REPLY_TTL_S)
    await enqueue_now(store, job)
    label = LABELS.get(request.kind, request.kind)
    with tracing.span(f"{label} {request.name}"), redis_errors_mapped():
        popped = await _reply_within(redis, keys.hook_reply(run_id, step, request_id), timeout_s)
    with redis_errors_mapped():
        async with redis.pipeline(transaction=True) as pipe:
            pipe.delete(asked)
            if popped is None:
                # Nobody took it in time: withdraw the job rather than leave it going round.
                pipe.zrem(job.queue_key, job.job_id)
                pipe.delete(keys.arq_job(job.job_id))
            await pipe.execute()
    if popped is None:
        raise HookFailed(f"{request.label} did not answer within {timeout_s:g} s")
    reply = json.loads(popped)
    if "error" in reply:
        raise HookFailed(str(reply["error"]))
    return reply["value"]


async def read_request(
    store: RunStore, run_id: str, step: int, request_id: str
) -> HookRequest | None:
    """What a `hook` job is asked (None: the step stopped waiting)."""
    with redis_errors_mapped():
        raw = await store.redis.get(keys.hook_request(run_id, step, request_id))
    return HookRequest.model_validate_json(raw) if raw else None


async def push_reply(
    store: RunStore, run_id: str, step: int, request_id: str, reply: dict[str, Any]
) -> None:
    key = keys.hook_reply(run_id, step, request_id)
    with redis_errors_mapped():
        async with store.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(reply))
            pipe.expire(key, _REPLY_TTL_S)
            await pipe.execute()


async def _reply_within(redis: Redis, key: str, timeout_s: float) -> bytes | None:
    """BLPOP in slices the socket timeout allows (MAX_BLOCK_S), until the deadline."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        popped = await redis.blpop(  # type: ignore[misc]
            [key], timeout=max(1, int(min(MAX_BLOCK_S, left)))
        )
        if popped:
            value: bytes = popped[1]
            return value
    return None


async def enqueue_now(store: RunStore, job: QueuedJob) -> None:
    """Enqueue a job outside a transition, in arq's layout (once: the id is derived).

    A job is ready only in its lane (workers/queue/claims.py), which a script writes: this
    one waits as a timer already due, which the next claim puts in its lane."""
    timers = keys.TIMERS_PREFIX + job.queue_key.removeprefix(keys.QUEUE_PREFIX)
    with redis_errors_mapped():
        async with store.redis.pipeline(transaction=True) as pipe:
            pipe.set(keys.arq_job(job.job_id), job.payload, px=job.expires_ms, nx=True)
            pipe.zadd(timers, {job.job_id: job.score_ms}, nx=True)
            pipe.lpush(job.wake_key, "1")
            pipe.ltrim(job.wake_key, 0, 63)
            await pipe.execute()
