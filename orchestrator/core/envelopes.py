"""Job payloads on the wire, the kinds of job and queue names.

A payload is a small envelope of references (run id, step, call id), never
the conversation, so its size does not grow with the run. Jobs are JSON in
arq's own job layout, which lets a Lua transition enqueue a job atomically
with the state change that causes it. What each kind is (its id, queue, payload
and last transition) is declared once, in the JobKind table (core/jobs.py).
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.keys import (
    ARQ_ABORT_SET,
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    ARQ_RESULT_PREFIX,
)
from agentq.orchestrator.core.queued_job import JOB_EXPIRES_MS, QueuedJob

__all__ = [
    "ARQ_ABORT_SET",
    "ARQ_IN_PROGRESS_PREFIX",
    "ARQ_JOB_PREFIX",
    "ARQ_RESULT_PREFIX",
    "JOB_EXPIRES_MS",
    "MODEL_QUEUE",
    "RESUMED_STEP",
    "SANDBOX_QUEUE",
    "TOOLS_QUEUE",
    "BatchJobEnvelope",
    "JobEnvelope",
    "JobKind",
    "QueuedJob",
    "ScheduleJobEnvelope",
    "ThreadJobEnvelope",
    "deserialize",
    "serialize",
]


class JobKind(StrEnum):
    """Every kind of job; a job's arq function name is its kind's value."""

    MODEL_STEP = "model_step"
    TOOL_CALL = "tool_call"
    # A parked call's deadline: a deferred job on the model queue.
    PARK_EXPIRY = "park_expiry"
    # A step's hook (prepare_step, stop_when, needs_approval), run on a worker that
    # registered it.
    HOOK = "hook"
    # A step's context summary, written before the step runs again.
    SUMMARIZE = "summarize"
    # A tool call without a run (`client.calls.call`): its envelope's `run_id` and
    # `call_id` are the call's id, and `run_trace` carries the call's trace.
    CALL = "call"
    # Starts a parked call: a sub-agent's child run, a workflow.
    START_CALL = "start_call"
    # Answers a parent's call when its child run ends.
    CHILD_ENDED = "child_ended"
    # Runs one node of a workflow call.
    WORKFLOW_NODE = "workflow_node"
    # A batch's admission, with its own payload (BatchJobEnvelope).
    BATCH_ADMIT = "batch_admit"
    # The end of a thread's run: the thread's next queued run starts (ThreadJobEnvelope).
    THREAD_NEXT = "thread_next"
    # One tick of a cron schedule (ScheduleJobEnvelope): a timer until the tick is due.
    SCHEDULE_TICK = "schedule_tick"


# The call_id of a model step run again after its context summary was stored.
RESUMED_STEP = "resumed"

MODEL_QUEUE = "model"
TOOLS_QUEUE = "tools"
SANDBOX_QUEUE = "sandbox"

queue_key = keys.queue
wake_key = keys.wake


class JobEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: JobKind
    run_id: str
    step: int
    call_id: str | None = None
    # The node of a workflow call a `workflow_node` job runs.
    node: str | None = None
    # The call's deadline budget; None for a model step (it reads its own from the spec).
    timeout_s: float | None = None
    # What a worker must serve to claim this job (a registry key; "" for any worker of
    # its queue): the claim reads it from the payload (workers/queue/lua/take.lua).
    needs: str = ""
    enqueued_at: float = Field(default_factory=time.time)
    # W3C trace context of the job's send span (stamped by the tracing layer when the
    # producer records spans), which the job's process span links to.
    trace: dict[str, str] = Field(default_factory=dict)
    # A `call` job's trace (a call without a run has no run id to derive its span from);
    # a run's jobs leave it empty.
    run_trace: dict[str, str] = Field(default_factory=dict)


class BatchJobEnvelope(BaseModel):
    """An admission job's payload: whose batch, and the line whose run ended (if any);
    a kick (no line) names its `nonce`, which its job id carries."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["batch_admit"] = "batch_admit"
    tenant: str
    batch_id: str
    line: int | None = None
    run_id: str | None = None
    nonce: str | None = None
    enqueued_at: float = Field(default_factory=time.time)


class ThreadJobEnvelope(BaseModel):
    """A thread's advance: the run of the thread that ended (its end enqueued the job)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["thread_next"] = "thread_next"
    tenant: str
    thread_id: str  # as the tenant names it
    run_id: str
    enqueued_at: float = Field(default_factory=time.time)


class ScheduleJobEnvelope(BaseModel):
    """A tick job's payload: which schedule (its generation: a schedule deleted and
    created again under its name is another) and which tick, in ms since the epoch."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["schedule_tick"] = "schedule_tick"
    tenant: str
    name: str
    generation: int
    tick_ms: int
    enqueued_at: float = Field(default_factory=time.time)


def serialize(obj: dict[str, Any]) -> bytes:
    """arq job serializer: JSON, never pickle."""
    return json.dumps(obj, default=repr, separators=(",", ":")).encode()


def deserialize(data: bytes) -> dict[str, Any]:
    """Every job a worker runs is read here: orjson, at a fraction of json's cost."""
    result: dict[str, Any] = orjson.loads(data)
    return result
