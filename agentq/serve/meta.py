"""Liveness, readiness and the fleet's shape."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from agentq.orchestrator.fleet.listings import WorkerRecord
from agentq.orchestrator.fleet.queues import queues_document
from agentq.serve.auth import ADMIN
from agentq.serve.deps import caller, client_of
from agentq.serve.errors import error_body

router = APIRouter(tags=["service"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> Any:
    """Redis answers too."""
    try:
        await client_of(request).ping()
    except Exception as exc:
        return JSONResponse(
            error_body("unavailable", f"cannot reach Redis: {exc}"), status_code=503
        )
    return {"status": "ready"}


@router.get("/v1/fleet")
async def fleet_status(request: Request) -> dict[str, Any]:
    """Queue depths and the workers alive (from their beats in Redis). Every tenant's load
    and the workers' ids: the operator's view (scope `admin`)."""
    caller(request, ADMIN)
    return (await client_of(request).fleet.status()).model_dump()


@router.get("/v1/workers", response_model=list[WorkerRecord])
async def workers(request: Request) -> list[WorkerRecord]:
    """The workers alive, by host and pid: the queues and tools each serves, its
    concurrency, when it started, its last beat (`seen_at`) and the jobs it was running
    then. The operator's view (scope `admin`), as `/v1/fleet`."""
    caller(request, ADMIN)
    return await client_of(request).fleet.workers()


@router.get("/v1/queues")
async def queues(
    request: Request, queue: Annotated[list[str] | None, Query(max_length=64)] = None
) -> dict[str, Any]:
    """Depth, ready jobs and oldest job age per queue, as KEDA's metrics-api scaler reads
    them (`valueLocation: queues.<name>.depth`). Every queue the deployment serves is
    listed, at 0 when empty, and so is each `?queue=` asked for. Scope `admin`, as
    `/v1/fleet`: depths are every tenant's load."""
    caller(request, ADMIN)
    return queues_document(await client_of(request).fleet.queues(also=queue or []))
