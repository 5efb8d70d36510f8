"""Cron schedules through `Client` (`client.schedules`): create, read, pause, resume,
delete, and the runs their ticks fired.

    await client.schedules.create("digest", cron="0 9 * * MON-FRI", spec=spec,
                                  tz="Europe/Lisbon", tenant="acme")

There is no scheduler process. A schedule's next tick waits as a timer in the model
queue's timer set, in the tenant's slot; the claim that finds it due moves it into the
queue, and whichever worker takes it runs `fire`: one Lua transition (`schedule_tick`),
keyed by the schedule and the tick, claims the tick and sets the next one's timer, then
the tick's run is created under an id derived from the same pair. A re-delivered or
doubled tick job finds the tick claimed and creates the same run again, which is a no-op:
each tick fires one run at most, however many workers die around it.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, ScheduleJobEnvelope
from agentq.orchestrator.core.errors import RunConflictError, RunNotFoundError, SpecError
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, tenant_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.runs.creation import derived_placement
from agentq.orchestrator.runs.result import TERMINAL_STATUSES
from agentq.orchestrator.schedules.cron import (
    Catchup,
    Overlap,
    catchup_of,
    check_cron,
    check_name,
    next_tick_ms,
    overlap_of,
    plan_tick,
    zone,
)
from agentq.orchestrator.schedules.state import (
    ScheduleCreate,
    ScheduleDelete,
    ScheduleField,
    ScheduleOutcome,
    SchedulePause,
    ScheduleResume,
    ScheduleTick,
    TickRecord,
)
from agentq.orchestrator.schedules.store import ScheduleStore
from agentq.orchestrator.spec.run import RunSpec

log = logging.getLogger("agentq.schedules")


class ScheduleNotFoundError(RunNotFoundError):
    """No schedule by that name in the tenant's namespace."""


class ScheduleConflictError(RunConflictError):
    """The name holds another schedule (the same one again is a no-op)."""


class ScheduleInfo(BaseModel):
    """A schedule as it stands: its definition, whether it is paused, its next tick."""

    name: str
    tenant: str
    cron: str
    tz: str
    overlap: Overlap
    catchup: Catchup
    spec: dict[str, Any]
    paused: bool
    next_tick_at: float | None  # seconds since the epoch; None while paused
    created_at: float
    # This incarnation of the name (ms at creation): its tick jobs and runs carry it.
    generation: int
    last_run: str | None
    fired: int
    skipped: int


def _info(raw: Mapping[str, str]) -> ScheduleInfo:
    F = ScheduleField
    return ScheduleInfo(
        name=raw[F.NAME],
        tenant=raw[F.TENANT],
        cron=raw[F.CRON],
        tz=raw[F.TZ],
        overlap=Overlap(raw[F.OVERLAP]),
        catchup=Catchup(raw[F.CATCHUP]),
        spec=json.loads(raw[F.SPEC]),
        paused=raw.get(F.PAUSED) == "1",
        next_tick_at=int(raw[F.NEXT]) / 1000 if raw.get(F.NEXT) else None,
        created_at=float(raw[F.CREATED_AT]),
        generation=int(raw[F.GENERATION]),
        last_run=raw.get(F.LAST_RUN),
        fired=int(raw.get(F.FIRED, 0)),
        skipped=int(raw.get(F.SKIPPED, 0)),
    )


def tick_job(tenant: str, name: str, generation: int, tick_ms: int) -> QueuedJob:
    """A tick's job: a timer of the model queue, due at the tick."""
    envelope = ScheduleJobEnvelope(tenant=tenant, name=name, generation=generation, tick_ms=tick_ms)
    return queued_job(envelope, due_ms=tick_ms)


def tick_run_id(tenant: str, name: str, generation: int, tick_ms: int) -> str:
    """The run a tick fires: one id per (schedule incarnation, tick), in the tenant's
    namespace, so creating it twice is the same run."""
    return tenant_run_id(tenant, f"sched.{name}.{generation}.{tick_ms}")


def _placed(spec: str, tenant: str) -> str:
    """Where a tick's run is placed: beside its concurrency key's counter when the spec
    has one (runs/creation.py: derived_placement), so its key counts on every partition.
    A spec this deployment no longer reads places nothing: the tick records its refusal."""
    try:
        return derived_placement(RunSpec.model_validate_json(spec), tenant)
    except ValidationError:
        return ""


class Schedules:
    """The schedule operations of one Client (`client.schedules`). `clock` says what
    time it is (seconds since the epoch): a test may set it."""

    def __init__(self, redis: Redis, settings: Settings, runs: Runs) -> None:
        self.store = ScheduleStore(redis)
        self.settings = settings
        self._runs = runs
        self.clock: Callable[[], float] = time.time

    async def create(
        self,
        name: str,
        *,
        cron: str,
        spec: RunSpec | Mapping[str, Any] | str,
        tz: str = "UTC",
        overlap: Overlap | str = Overlap.SKIP,
        catchup: Catchup | str = Catchup.ONE,
        tenant: str | None = None,
    ) -> ScheduleInfo:
        """A schedule that creates a run of `spec` at each tick of `cron` in `tz`. The
        spec is checked as a submit checks it. Creating the same schedule again is a
        no-op; another under a taken name is a SpecError."""
        owner = tenant or DEFAULT_TENANT
        check_name(name)
        check_cron(cron)
        zone(tz)
        overlap, catchup = overlap_of(overlap), catchup_of(catchup)
        run_spec = await self._runs.check(spec)
        if run_spec.id is not None:
            raise SpecError("a schedule's spec has no `id`: each tick's run gets its own")
        spec_json = run_spec.model_dump_json(exclude_none=True)
        now = self.clock()
        generation = int(now * 1000)
        first = next_tick_ms(cron, tz, now)
        definition = hashlib.sha256(
            json.dumps([cron, tz, overlap, catchup, spec_json]).encode()
        ).hexdigest()
        reply = await self.store.apply(
            owner,
            ScheduleCreate(
                name=name,
                tenant=owner,
                cron=cron,
                tz=tz,
                overlap=overlap,
                catchup=catchup,
                spec=spec_json,
                definition=definition,
                generation=generation,
                next_tick=str(first),
                next_job=tick_job(owner, name, generation, first),
            ),
        )
        if reply.outcome == ScheduleOutcome.CONFLICT:
            raise ScheduleConflictError(
                f"schedule {name!r} exists with another definition (delete it first)"
            )
        return await self.get(name, tenant=owner)

    async def get(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        raw = await self.store.read(tenant or DEFAULT_TENANT, name)
        if not raw:
            raise ScheduleNotFoundError(f"no schedule named {name!r}")
        return _info(raw)

    async def list(self, *, tenant: str | None = None) -> builtins.list[ScheduleInfo]:
        """The tenant's schedules, oldest first."""
        owner = tenant or DEFAULT_TENANT
        found = []
        for name in await self.store.names(owner):
            raw = await self.store.read(owner, name)
            if raw:
                found.append(_info(raw))
        return found

    async def pause(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        """No tick fires until `resume`."""
        owner = tenant or DEFAULT_TENANT
        info = await self.get(name, tenant=owner)
        await self.store.apply(owner, SchedulePause(name=name, **self._pending(owner, info)))
        return await self.get(name, tenant=owner)

    async def resume(self, name: str, *, tenant: str | None = None) -> ScheduleInfo:
        """Ticks fire again from the first after now; those that fell due while paused
        never fire."""
        owner = tenant or DEFAULT_TENANT
        info = await self.get(name, tenant=owner)
        next_ms = next_tick_ms(info.cron, info.tz, self.clock())
        await self.store.apply(
            owner,
            ScheduleResume(
                name=name,
                next_tick=str(next_ms),
                next_job=tick_job(owner, name, info.generation, next_ms),
            ),
        )
        return await self.get(name, tenant=owner)

    async def delete(self, name: str, *, tenant: str | None = None) -> None:
        """The schedule is gone; the runs its ticks fired stay, as runs."""
        owner = tenant or DEFAULT_TENANT
        info = await self.get(name, tenant=owner)
        reply = await self.store.apply(
            owner, ScheduleDelete(name=name, **self._pending(owner, info))
        )
        if reply.outcome == ScheduleOutcome.UNKNOWN:
            raise ScheduleNotFoundError(f"no schedule named {name!r}")

    async def runs(
        self, name: str, *, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[TickRecord]:
        """What the latest ticks did, newest first: each one's run, or why it fired none."""
        owner = tenant or DEFAULT_TENANT
        await self.get(name, tenant=owner)
        return await self.store.ticks(owner, name, limit)

    def _pending(self, tenant: str, info: ScheduleInfo) -> dict[str, str]:
        """The pending tick's timer as read, for a pause or a delete to remove."""
        if info.next_tick_at is None:
            return {"pending_tick": "", "pending_job_id": "", "timers_key": ""}
        tick_ms = round(info.next_tick_at * 1000)
        job = tick_job(tenant, info.name, info.generation, tick_ms)
        return {
            "pending_tick": str(tick_ms),
            "pending_job_id": job.job_id,
            "timers_key": keys.job_timers(MODEL_QUEUE, job.job_id),
        }

    # -- the worker's side -------------------------------------------------------------

    async def fire(self, tick: ScheduleJobEnvelope) -> TickRecord | None:
        """Run one claimed tick: claim it (once, whoever asks), then create its run
        (again, if a claim before this one died before it). None: the tick is not the
        schedule's pending one (paused, deleted), and nothing happens."""
        raw = await self.store.read(tick.tenant, tick.name)
        if not raw:
            return None
        info = _info(raw)
        if info.generation != tick.generation:
            return None
        plan = plan_tick(
            info.cron,
            info.tz,
            tick.tick_ms,
            self.clock(),
            info.catchup,
            self.settings.schedule_grace_s,
        )
        run_id = _placed(raw[ScheduleField.SPEC], tick.tenant) + tick_run_id(
            tick.tenant, tick.name, tick.generation, tick.tick_ms
        )
        previous, reason, error = None, None, None
        if not plan.fire:
            reason = "missed"
        elif await self._overlaps(info):
            if info.overlap == Overlap.SKIP:
                reason = "overlap"
            else:
                previous = info.last_run
        if reason is None and (error := await self._refusal(raw[ScheduleField.SPEC])):
            reason = "refused"
        reply = await self.store.apply(
            tick.tenant,
            ScheduleTick(
                name=tick.name,
                generation=tick.generation,
                tick=str(tick.tick_ms),
                run_id=None if reason else run_id,
                previous=previous,
                reason=reason,
                error=error,
                next_tick=str(plan.next_ms),
                next_job=tick_job(tick.tenant, tick.name, tick.generation, plan.next_ms),
            ),
        )
        if reply.outcome == ScheduleOutcome.RECORDED and reply.record is not None:
            record = TickRecord.model_validate_json(reply.record)
        elif reply.outcome in (ScheduleOutcome.FIRED, ScheduleOutcome.SKIPPED):
            record = TickRecord(
                tick=tick.tick_ms / 1000,
                run_id=None if reason else run_id,
                previous=previous,
                skipped=reason,
                error=error,
                at=time.time(),
            )
        else:
            return None
        await self._start(tick.tenant, raw[ScheduleField.SPEC], record)
        return record

    async def _start(self, tenant: str, spec: str, record: TickRecord) -> None:
        """The tick's run, created (a no-op when it exists), the previous one cancelled
        first under cancel-previous."""
        if record.run_id is None:
            return
        if record.previous is not None:
            with contextlib.suppress(RunNotFoundError):
                await self._runs.cancel(record.previous, f"schedule tick {record.tick:g}")
        await self._runs.create(spec, tenant=tenant, run_id=record.run_id)

    async def _refusal(self, spec: str) -> str | None:
        """Why a run of the schedule's spec would be refused now (the deployment no longer
        offers what it names), in one line; None when it would be created. Judged before
        the tick is claimed, so the tick records the refusal, not a run that never was."""
        try:
            await self._runs.check(spec)
        except SpecError as exc:
            return " ".join(str(exc).split())
        return None

    async def _overlaps(self, info: ScheduleInfo) -> bool:
        """Whether the schedule's previous run is still going and its overlap policy
        has something to say about it."""
        if info.last_run is None or info.overlap == Overlap.ALLOW:
            return False
        try:
            return (await self._runs.status(info.last_run)).status not in TERMINAL_STATUSES
        except RunNotFoundError:
            return False  # expired with its retention: long ended
