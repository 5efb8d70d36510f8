"""Job payloads on the wire, job ids and queue names.

A payload is a small envelope of references (run id, step, call id), never
the conversation, so its size does not grow with the run. Jobs are JSON in
arq's own job layout, which lets a Lua transition enqueue a job atomically
with the state change that causes it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.machine import keys
from agentq.orchestrator.machine.jobs import JOB_EXPIRES_MS, QueuedJob
from agentq.orchestrator.machine.keys import (
    ARQ_ABORT_SET,
    ARQ_IN_PROGRESS_PREFIX,
    ARQ_JOB_PREFIX,
    ARQ_RESULT_PREFIX,
    model_job_id,
    tool_job_id,
)

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
    "JobEnvelope",
    "JobKind",
    "QueuedJob",
    "deserialize",
    "job_id",
    "queued_job",
    "serialize",
]

# A parked call's deadline (`park_expiry`) is a deferred job on the model queue. A `call`
# is a tool call without a run (`client.calls.call`): its envelope's `run_id` and
# `call_id` are the call's id, and `run_trace` carries the call's trace. A batch's
# admission (`batch_admit`) has its own payload (orchestrator/batches/admission.py).
# `start_call` starts a parked call (a sub-agent's child run, a workflow); `child_ended`
# answers a parent's call when its child run ends; `workflow_node` runs one node.
JobKind = Literal[
    "model_step",
    "tool_call",
    "park_expiry",
    "prepare_step",
    "summarize",
    "call",
    "start_call",
    "child_ended",
    "workflow_node",
    "batch_admit",
]
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
    enqueued_at: float = Field(default_factory=time.time)
    # W3C trace context of the job's send span (stamped by the tracing layer when the
    # producer records spans), which the job's process span links to.
    trace: dict[str, str] = Field(default_factory=dict)
    # For a run's jobs no longer written (the run's span derives from its id); accepted
    # so that jobs enqueued by older workers still validate. A `call` job's trace.
    run_trace: dict[str, str] = Field(default_factory=dict)


def job_id(envelope: JobEnvelope) -> str:
    """The job's id, derived from (run, step, call): a duplicate enqueue is a no-op."""
    if envelope.kind == "model_step" and envelope.call_id == RESUMED_STEP:
        return keys.resumed_model_job_id(envelope.run_id, envelope.step)
    if envelope.kind == "model_step":
        return model_job_id(envelope.run_id, envelope.step)
    if envelope.kind == "summarize":
        return keys.summary_job_id(envelope.run_id, envelope.step)
    if envelope.kind == "prepare_step":
        return keys.prepare_job_id(envelope.run_id, envelope.step, envelope.call_id or "")
    assert envelope.call_id is not None
    if envelope.kind == "call":
        return keys.call_job_id(envelope.call_id)
    if envelope.kind == "park_expiry":
        return keys.expiry_job_id(envelope.run_id, envelope.step, envelope.call_id)
    if envelope.kind == "start_call":
        return keys.start_job_id(envelope.run_id, envelope.step, envelope.call_id)
    if envelope.kind == "child_ended":
        return keys.parent_job_id(envelope.run_id)
    if envelope.kind == "workflow_node":
        assert envelope.node is not None
        return keys.node_job_id(envelope.run_id, envelope.step, envelope.call_id, envelope.node)
    return tool_job_id(envelope.run_id, envelope.step, envelope.call_id)


def queued_job(envelope: JobEnvelope, queue: str, *, defer_s: float = 0.0) -> QueuedJob:
    """The job in arq's layout; `defer_s` makes it due that much later."""
    now_ms = int(time.time() * 1000)
    body: dict[str, Any] = {
        "t": None,
        "f": envelope.kind,
        "a": [envelope.model_dump(mode="json")],
        "k": {},
        "et": now_ms,
    }
    id_ = job_id(envelope)
    return QueuedJob(
        job_id=id_,
        queue_key=keys.job_queue(queue, id_),
        wake_key=keys.job_wake(queue, id_),
        payload=json.dumps(body, separators=(",", ":")),
        score_ms=now_ms + int(defer_s * 1000),
        # A deferred job must outlive its wait, or arq finds it gone when it falls due.
        expires_ms=JOB_EXPIRES_MS + int(defer_s * 1000),
    )


def serialize(obj: dict[str, Any]) -> bytes:
    """arq job serializer: JSON, never pickle."""
    return json.dumps(obj, default=repr, separators=(",", ":")).encode()


def deserialize(data: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(data)
    return result
