"""Liveness, readiness and the fleet's shape."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from agentq.orchestrator import fleet
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
        await client_of(request).redis.ping()
    except Exception as exc:
        return JSONResponse(
            error_body("unavailable", f"cannot reach Redis: {exc}"), status_code=503
        )
    return {"status": "ready"}


@router.get("/v1/fleet")
async def fleet_status(request: Request) -> dict[str, Any]:
    """Queue depths and the workers alive (from their beats in Redis)."""
    caller(request, "runs:read")
    return await fleet.status(client_of(request).redis)
