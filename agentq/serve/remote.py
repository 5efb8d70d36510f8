"""Remote tools over HTTP: services in any language lease calls, or receive them pushed.

Routes for worker keys (agentq/serve/auth.py), for the queues of the deployment's remote
tools only:

- `POST /v1/queues/{queue}/lease` `{"max", "wait_s", "lease_s"}` long-polls for up to
  `max` calls: `{"calls": [{"lease": {"id", "deadline_at"}, "call": {...}}]}`;
- `POST /v1/leases/{id}/heartbeat` `{"lease_s"}` extends a lease;
- `POST /v1/leases/{id}/progress` `{"progress"}` adds a `tool-progress` event;
- `POST /v1/leases/{id}/result` `{"output", "is_error"}` records the result (write-once).

The calls on a queue are every tenant's, so only a worker key naming the queue
(`queue:NAME`) leases it, and a lease answers only the key that took it: anyone else's
heartbeat, progress or result gets the 404 of an unknown lease, while it is held and
after it ended.

To its holder, an ended lease says how it ended: 409 when its call already has its
result, 410 when the call's deadline passed (a timeout error was recorded) or when the
lease lapsed (its call went back to its queue).
The process also runs a `RemoteService` (workers/tools/remote_service.py): it announces
the remote tools, reaps lapsed leases, and pushes the calls of queues with a webhook.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from agentq.serve.auth import Principal, authenticate
from agentq.serve.deps import config_of, streams_of
from agentq.serve.errors import ApiError, not_found
from agentq.workers.tools.remote import (
    CallTimedOut,
    LeaseAnswered,
    LeaseGone,
    LeaseLapsed,
)
from agentq.workers.tools.remote_service import RemoteService

router = APIRouter(tags=["remote workers"])


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LeaseRequest(_Body):
    max: int = Field(default=1, ge=1, le=100)
    wait_s: float = Field(default=30.0, ge=0, le=60)
    lease_s: float = Field(default=30.0, ge=1, le=3600)


class Heartbeat(_Body):
    lease_s: float = Field(default=30.0, ge=1, le=3600)


class Progress(_Body):
    progress: Any = None


class Result(_Body):
    output: Any = None
    is_error: bool = False


def _service(request: Request) -> RemoteService:
    service: RemoteService = request.app.state.remote
    return service


def _worker(request: Request) -> Principal:
    """The caller, by its API key: leasing is a worker key's right, never a tenant's."""
    principal = authenticate(request, config_of(request).keys)
    if not principal.may_lease_any:
        raise ApiError(
            403,
            "forbidden",
            f"a {principal.kind} key cannot lease calls: remote workers use a worker key "
            "with queue:NAME scopes",
        )
    return principal


def _gone(lease_id: str, exc: LeaseGone) -> ApiError:
    """What is true of a lease that holds nothing, as the caller may know it."""
    match exc:
        case LeaseAnswered():
            return ApiError(
                409,
                "lease_answered",
                f"lease {lease_id!r} is done: the call already has its result "
                "(nothing was changed)",
            )
        case CallTimedOut():
            return ApiError(
                410,
                "call_timed_out",
                f"lease {lease_id!r}: the call's deadline passed "
                "(a timeout error was recorded for it)",
            )
        case LeaseLapsed():
            return ApiError(
                410,
                "lease_lapsed",
                f"lease {lease_id!r} lapsed unrenewed: its call went back to its queue "
                "(nothing was changed)",
            )
        case _:  # LeaseUnknown: another key's lease, live or ended, is as unknown
            return not_found(f"this key holds no lease {lease_id!r}")


@router.post("/v1/queues/{queue}/lease")
async def lease(request: Request, queue: str, body: LeaseRequest) -> dict[str, Any]:
    principal = _worker(request)
    if not principal.may_lease(queue):
        raise ApiError(403, "forbidden", f"this key may not lease queue {queue!r}")
    service = _service(request)
    if queue not in service.declared.queues:
        raise not_found(f"no remote tool of this deployment uses queue {queue!r}")
    with streams_of(request).held(principal.tenant):
        leases = await service.leases.lease(
            queue, body.max, body.wait_s, body.lease_s, holder=principal
        )
    request.app.state.metrics.remote_leases.labels(queue).inc(len(leases))
    return {"calls": [lease.document() for lease in leases]}


@router.post("/v1/leases/{lease_id}/heartbeat")
async def heartbeat(request: Request, lease_id: str, body: Heartbeat | None = None) -> Any:
    principal = _worker(request)
    lease_s = (body or Heartbeat()).lease_s
    try:
        deadline = await _service(request).leases.heartbeat(lease_id, lease_s, holder=principal)
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"lease": {"id": lease_id, "deadline_at": deadline}}


@router.post("/v1/leases/{lease_id}/progress")
async def progress(request: Request, lease_id: str, body: Progress) -> Any:
    principal = _worker(request)
    try:
        await _service(request).leases.progress(lease_id, body.progress, holder=principal)
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"ok": True}


@router.post("/v1/leases/{lease_id}/result")
async def result(request: Request, lease_id: str, body: Result) -> Any:
    principal = _worker(request)
    try:
        recorded = await _service(request).leases.complete(
            lease_id, body.output, body.is_error, holder=principal
        )
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"recorded": recorded}
