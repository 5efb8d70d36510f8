"""The JobKind table: every fact of a job kind, declared once.

Per kind: its payload model, how its id derives from the payload (so a duplicate
enqueue is a no-op), and the queue it is enqueued on (or None: the enqueuer names it,
the queue of the call's tool or of the hook's worker). The job's last transition is
not a fact here: the handler hands its end to it (`ride=`, workers/queue/claims.py).
The worker's arq function list is built from this table and the handlers registered
against it (workers/jobs/registry.py); `queued_job` is the one place a job is laid
out in arq's format, for every kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import (
    JOB_EXPIRES_MS,
    MODEL_QUEUE,
    RESUMED_STEP,
    BatchJobEnvelope,
    JobEnvelope,
    JobKind,
    QueuedJob,
    ScheduleJobEnvelope,
    ThreadJobEnvelope,
)

P = TypeVar("P", bound=BaseModel)

Payload = JobEnvelope | BatchJobEnvelope | ThreadJobEnvelope | ScheduleJobEnvelope


@dataclass(frozen=True)
class JobDef(Generic[P]):
    """What a job kind is: the facts every enqueuer and the worker share."""

    kind: JobKind
    payload: type[P]
    job_id: Callable[[P], str]
    # None: the enqueuer names the queue (the call's tool's, the hook's worker's).
    queue: str | None


def _call_id(envelope: JobEnvelope) -> str:
    assert envelope.call_id is not None, f"a {envelope.kind} job names its call"
    return envelope.call_id


def _model_step_id(envelope: JobEnvelope) -> str:
    if envelope.call_id == RESUMED_STEP:
        return keys.resumed_model_job_id(envelope.run_id, envelope.step)
    return keys.model_job_id(envelope.run_id, envelope.step)


def _node_id(envelope: JobEnvelope) -> str:
    assert envelope.node is not None, "a workflow_node job names its node"
    return keys.node_job_id(envelope.run_id, envelope.step, _call_id(envelope), envelope.node)


def _batch_id(envelope: BatchJobEnvelope) -> str:
    """The end job of a line's run (once per run), or a kick (once per nonce)."""
    if envelope.run_id is not None:
        return keys.batch_end_job_id(envelope.run_id)
    assert envelope.nonce is not None, "a batch kick names its nonce"
    return keys.batch_kick_job_id(envelope.tenant, envelope.batch_id, envelope.nonce)


def _defs(*defs: JobDef[Any]) -> Mapping[JobKind, JobDef[Any]]:
    return MappingProxyType({d.kind: d for d in defs})


JOBS: Mapping[JobKind, JobDef[Any]] = _defs(
    JobDef(JobKind.MODEL_STEP, JobEnvelope, _model_step_id, MODEL_QUEUE),
    JobDef(
        JobKind.TOOL_CALL,
        JobEnvelope,
        lambda e: keys.tool_job_id(e.run_id, e.step, _call_id(e)),
        None,
    ),
    JobDef(
        JobKind.PARK_EXPIRY,
        JobEnvelope,
        lambda e: keys.expiry_job_id(e.run_id, e.step, _call_id(e)),
        MODEL_QUEUE,
    ),
    JobDef(
        JobKind.HOOK,
        JobEnvelope,
        lambda e: keys.hook_job_id(e.run_id, e.step, e.call_id or ""),
        None,
    ),
    JobDef(
        JobKind.SUMMARIZE,
        JobEnvelope,
        lambda e: keys.summary_job_id(e.run_id, e.step),
        MODEL_QUEUE,
    ),
    JobDef(JobKind.CALL, JobEnvelope, lambda e: keys.call_job_id(_call_id(e)), None),
    JobDef(
        JobKind.START_CALL,
        JobEnvelope,
        lambda e: keys.start_job_id(e.run_id, e.step, _call_id(e)),
        None,
    ),
    JobDef(JobKind.CHILD_ENDED, JobEnvelope, lambda e: keys.parent_job_id(e.run_id), MODEL_QUEUE),
    JobDef(JobKind.WORKFLOW_NODE, JobEnvelope, _node_id, None),
    JobDef(JobKind.BATCH_ADMIT, BatchJobEnvelope, _batch_id, MODEL_QUEUE),
    JobDef(
        JobKind.THREAD_NEXT,
        ThreadJobEnvelope,
        lambda e: keys.thread_end_job_id(e.run_id),
        MODEL_QUEUE,
    ),
    JobDef(
        JobKind.SCHEDULE_TICK,
        ScheduleJobEnvelope,
        lambda e: keys.schedule_tick_job_id(e.tenant, e.name, e.generation, e.tick_ms),
        MODEL_QUEUE,
    ),
)


# The table by kind name: a job is laid out per transition, and JobKind(kind) is an enum
# lookup each time.
_BY_NAME: Mapping[str, JobDef[Any]] = {kind.value: d for kind, d in JOBS.items()}


def job_def(kind: str) -> JobDef[Any]:
    found = _BY_NAME.get(kind)
    # An unknown kind raises ValueError, as it always did.
    return found if found is not None else JOBS[JobKind(kind)]


def job_id(payload: Payload) -> str:
    """The job's id, derived from its payload: a duplicate enqueue is a no-op."""
    return job_def(payload.kind).job_id(payload)


def queued_job(
    payload: Payload, queue: str | None = None, *, defer_s: float = 0.0, due_ms: int | None = None
) -> QueuedJob:
    """The job in arq's layout, on its kind's queue unless `queue` names one; `defer_s`
    makes it a timer, due that much later, and `due_ms` one due then (ms since the epoch;
    a time already past is a job ready at once)."""
    definition = job_def(payload.kind)
    on = queue or definition.queue
    if on is None:
        raise ValueError(f"a {payload.kind} job is enqueued on a queue its enqueuer names")
    now_ms = int(time.time() * 1000)
    # arq's job body ({"t", "f", "a", "k", "et"}), the payload's JSON written once by
    # pydantic-core inside it: every transition that hands work on lays out a job or two.
    args = payload.model_dump_json()
    body = f'{{"t":null,"f":"{definition.kind.value}","a":[{args}],"k":{{}},"et":{now_ms}}}'
    id_ = definition.job_id(payload)
    due = now_ms + int(defer_s * 1000) if due_ms is None else max(now_ms, due_ms)
    defer_s = (due - now_ms) / 1000
    return QueuedJob(
        job_id=id_,
        queue_key=keys.job_queue(on, id_),
        wake_key=keys.job_wake(on, id_),
        payload=body,
        score_ms=due,
        # A deferred job must outlive its wait, or arq finds it gone when it falls due.
        expires_ms=JOB_EXPIRES_MS + int(defer_s * 1000),
        timers_key=keys.job_timers(on, id_) if defer_s > 0 else "",
    )
