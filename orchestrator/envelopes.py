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

JobKind = Literal["model_step", "tool_call"]

MODEL_QUEUE = "model"
TOOLS_QUEUE = "tools"
SANDBOX_QUEUE = "sandbox"

# arq's key layout (arq.constants), which the Lua transitions write directly.
ARQ_JOB_PREFIX = "arq:job:"
ARQ_RESULT_PREFIX = "arq:result:"
ARQ_IN_PROGRESS_PREFIX = "arq:in-progress:"
ARQ_ABORT_SET = "arq:abort"
# A job never picked up expires after a day, like arq's default.
JOB_EXPIRES_MS = 24 * 3600 * 1000


def queue_key(queue: str) -> str:
    return f"aq:queue:{queue}"


def wake_key(queue: str) -> str:
    return f"aq:wake:{queue}"


class JobEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: JobKind
    run_id: str
    step: int
    call_id: str | None = None
    # The call's deadline budget; None for a model step (it reads its own from the spec).
    timeout_s: float | None = None
    enqueued_at: float = Field(default_factory=time.time)
    # W3C trace context of the job's send span (stamped by the tracing layer when the
    # producer records spans), which the job's process span links to.
    trace: dict[str, str] = Field(default_factory=dict)
    # No longer written (the run's span derives from its id); accepted so that jobs
    # enqueued by older workers still validate.
    run_trace: dict[str, str] = Field(default_factory=dict)


def model_job_id(run_id: str, step: int) -> str:
    return f"aq:{run_id}:{step}:model"


def tool_job_id(run_id: str, step: int, call_id: str) -> str:
    return f"aq:{run_id}:{step}:call:{call_id}"


def job_id(envelope: JobEnvelope) -> str:
    if envelope.kind == "model_step":
        return model_job_id(envelope.run_id, envelope.step)
    assert envelope.call_id is not None
    return tool_job_id(envelope.run_id, envelope.step, envelope.call_id)


class QueuedJob(BaseModel):
    """Everything a Lua transition needs to enqueue one arq job."""

    job_id: str
    queue_key: str
    wake_key: str
    payload: str
    score_ms: int
    expires_ms: int = JOB_EXPIRES_MS


def queued_job(envelope: JobEnvelope, queue: str) -> QueuedJob:
    now_ms = int(time.time() * 1000)
    body: dict[str, Any] = {
        "t": None,
        "f": envelope.kind,
        "a": [envelope.model_dump(mode="json")],
        "k": {},
        "et": now_ms,
    }
    return QueuedJob(
        job_id=job_id(envelope),
        queue_key=queue_key(queue),
        wake_key=wake_key(queue),
        payload=json.dumps(body, separators=(",", ":")),
        score_ms=now_ms,
    )


def serialize(obj: dict[str, Any]) -> bytes:
    """arq job serializer: JSON, never pickle."""
    return json.dumps(obj, default=repr, separators=(",", ":")).encode()


def deserialize(data: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(data)
    return result
