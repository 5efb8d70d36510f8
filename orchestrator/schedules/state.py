"""The schedule state, declared once: stored fields, outcomes, one typed input and reply
per schedule transition (`orchestrator/schedules/lua/*.lua`, constants rendered from here).

A schedule lives in its tenant's hash tag (`keys.schedule_base`), and so do its tick jobs:
the tick transition records what a tick did and enqueues the next tick's timer in one
slot. What a run does afterwards is the runs' machine's, in the run's own slot.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.machine.transition import Transition

# How many ticks' records a schedule keeps (`agentq schedule runs`): the oldest go first.
TICKS_KEPT = 1000


class ScheduleOutcome(StrEnum):
    CREATED = "created"
    EXISTS = "exists"  # the same schedule was created before: an idempotent no-op
    CONFLICT = "conflict"  # the name is taken by another schedule: nothing is written
    FIRED = "fired"  # the tick is claimed: its run is to be created
    SKIPPED = "skipped"  # the tick is claimed: no run (overlap, or missed and catchup skip)
    RECORDED = "recorded"  # the tick was claimed before (a re-delivery): its record
    STALE = "stale"  # not the schedule's pending tick (paused, resumed, recreated)
    PAUSED = "paused"
    RESUMED = "resumed"
    UNCHANGED = "unchanged"  # paused already / not paused
    DELETED = "deleted"
    UNKNOWN = "unknown-schedule"


class ScheduleField(StrEnum):
    """Fields of a schedule's hash `aq:sched:{s.<tenant>}:<name>`."""

    NAME = "name"
    TENANT = "tenant"
    CRON = "cron"
    TZ = "tz"
    OVERLAP = "overlap"
    CATCHUP = "catchup"
    SPEC = "spec"  # the RunSpec JSON every tick's run is created from
    DEFINITION = "definition"  # sha256 of the above: the same create again is a no-op
    GENERATION = "generation"  # ms at creation: tick jobs and run ids of this incarnation
    CREATED_AT = "created_at"
    PAUSED = "paused"  # "1" while paused
    NEXT = "next"  # the pending tick (ms since the epoch), "" while paused
    LAST_RUN = "last_run"  # the run of the last tick that fired
    FIRED = "fired"  # how many ticks fired a run
    SKIPPED = "skipped"  # how many ticks fired none


class ScheduleInput(Transition):
    name: str


class ScheduleCreate(ScheduleInput):
    script = "schedule_create"

    tenant: str
    cron: str
    tz: str
    overlap: str
    catchup: str
    spec: str
    definition: str
    generation: int
    next_tick: str
    next_job: QueuedJob


class ScheduleTick(ScheduleInput):
    """A claimed tick: what the worker decided (its run, or why none) and the next tick."""

    script = "schedule_tick"

    generation: int
    tick: str
    run_id: str | None = None  # the run it fires
    previous: str | None = None  # the run cancel-previous cancels
    reason: str | None = None  # why it fires none
    error: str | None = None  # with reason `refused`: the refusal's one line
    next_tick: str
    next_job: QueuedJob
    keep: int = TICKS_KEPT


class SchedulePause(ScheduleInput):
    script = "schedule_pause"

    # The pending tick's timer as the caller read it: removed if still pending.
    pending_tick: str
    pending_job_id: str
    timers_key: str


class ScheduleResume(ScheduleInput):
    script = "schedule_resume"

    next_tick: str
    next_job: QueuedJob


class ScheduleDelete(ScheduleInput):
    script = "schedule_delete"

    pending_tick: str
    pending_job_id: str
    timers_key: str


SCHEDULE_INPUTS: tuple[type[ScheduleInput], ...] = (
    ScheduleCreate,
    ScheduleTick,
    SchedulePause,
    ScheduleResume,
    ScheduleDelete,
)


class TickRecord(BaseModel):
    """What one tick did: its run, or why it fired none (`overlap`, `missed`, `refused`:
    the deployment no longer offers what the spec names, `error` says what)."""

    model_config = ConfigDict(extra="ignore")

    tick: float  # the tick's time, seconds since the epoch
    run_id: str | None = None
    previous: str | None = None
    skipped: str | None = None
    error: str | None = None
    at: float  # when a worker claimed it


class ScheduleReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    outcome: ScheduleOutcome
    record: str | None = None  # RECORDED: the tick's record as stored (TickRecord JSON)


# The schedule scripts' Lua constants, rendered after the run chunk (schedules/store.py).
SCHEDULE_TABLES: dict[str, type[StrEnum]] = {"SOUT": ScheduleOutcome, "SF": ScheduleField}
