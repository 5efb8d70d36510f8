"""A job as a transition enqueues it: arq's own layout, written by Lua atomically with
the state change that causes it (the job key with its payload, a score in the queue)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# A job never picked up expires after a day, like arq's default.
JOB_EXPIRES_MS = 24 * 3600 * 1000


class QueuedJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str
    queue_key: str
    wake_key: str
    payload: str
    # When the job is due (ms since the epoch): now, or later for a deferred job.
    score_ms: int
    expires_ms: int = JOB_EXPIRES_MS
    # Push a wake-up token (a deferred job wakes nobody: the fallback poll finds it).
    wake: bool = True
