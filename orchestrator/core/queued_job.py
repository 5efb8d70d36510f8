"""A job as a transition enqueues it: arq's own layout, written by Lua atomically with
the state change that causes it (the job key with its payload, a score in the queue).

A job due later is a timer (a parked call's deadline): it waits in its queue's timer
set, not in the queue, so a queue holds only work that is ready or running (its depth,
what pools scale on), and the claim moves it into the queue when it falls due."""

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
    # When the job is due (ms since the epoch): now, or later for a timer.
    score_ms: int
    expires_ms: int = JOB_EXPIRES_MS
    # A timer's set (keys.timers); "" for a job ready at once, which wakes a worker.
    timers_key: str = ""
