"""The schedules API: create, list, read, pause, resume and delete cron schedules, and
list what their ticks fired. A thin layer over `client.schedules`; a schedule is its
tenant's (another tenant's name is a 404, as if it did not exist)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.schedules.api import ScheduleInfo, ScheduleNotFoundError
from agentq.orchestrator.schedules.cron import Catchup, Overlap
from agentq.orchestrator.schedules.state import TickRecord
from agentq.orchestrator.spec.run import RunSpec
from agentq.serve.deps import caller, client_of, config_of
from agentq.serve.limits import check_spec_size

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])


class NewSchedule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    cron: str
    spec: RunSpec
    tz: str = "UTC"
    overlap: Overlap = Overlap.SKIP
    catchup: Catchup = Catchup.ONE


@router.post("", status_code=201, response_model=ScheduleInfo)
async def create(request: Request, body: Annotated[NewSchedule, Body()]) -> Any:
    """A schedule that creates a run of `spec` at each tick of `cron` in `tz` (its spec
    checked as a submit's). The same schedule again is a 200; another under its name, 409."""
    principal = caller(request, "runs:write")
    spec = body.spec.model_dump_json(exclude_none=True).encode()
    check_spec_size(spec, config_of(request).limits.max_spec_bytes)
    schedules = client_of(request).schedules
    try:
        await schedules.get(body.name, tenant=principal.tenant)
        existed = True
    except ScheduleNotFoundError:
        existed = False
    info = await schedules.create(
        body.name,
        cron=body.cron,
        spec=body.spec,
        tz=body.tz,
        overlap=body.overlap,
        catchup=body.catchup,
        tenant=principal.tenant,
    )
    return JSONResponse(info.model_dump(mode="json"), status_code=200 if existed else 201)


@router.get("", response_model=list[ScheduleInfo])
async def list_schedules(request: Request) -> list[ScheduleInfo]:
    """The caller's schedules, oldest first."""
    principal = caller(request, "runs:read")
    return await client_of(request).schedules.list(tenant=principal.tenant)


@router.get("/{name}", response_model=ScheduleInfo)
async def get(request: Request, name: str) -> ScheduleInfo:
    principal = caller(request, "runs:read")
    return await client_of(request).schedules.get(name, tenant=principal.tenant)


@router.post("/{name}/pause", response_model=ScheduleInfo)
async def pause(request: Request, name: str) -> ScheduleInfo:
    """No tick fires until resumed."""
    principal = caller(request, "runs:write")
    return await client_of(request).schedules.pause(name, tenant=principal.tenant)


@router.post("/{name}/resume", response_model=ScheduleInfo)
async def resume(request: Request, name: str) -> ScheduleInfo:
    """Ticks fire again from the first after now."""
    principal = caller(request, "runs:write")
    return await client_of(request).schedules.resume(name, tenant=principal.tenant)


@router.delete("/{name}", status_code=204)
async def delete(request: Request, name: str) -> Response:
    """The schedule is gone; the runs it fired stay."""
    principal = caller(request, "runs:write")
    await client_of(request).schedules.delete(name, tenant=principal.tenant)
    return Response(status_code=204)


@router.get("/{name}/runs", response_model=list[TickRecord])
async def runs(
    request: Request, name: str, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[TickRecord]:
    """What the latest ticks did, newest first: each one's run, or why it fired none."""
    principal = caller(request, "runs:read")
    return await client_of(request).schedules.runs(name, tenant=principal.tenant, limit=limit)
