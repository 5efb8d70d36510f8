"""Remote tools over HTTP: services in any language lease calls, or receive them pushed.

Routes (scope `workers`), for the queues of the deployment's remote tools only:

- `POST /v1/queues/{queue}/lease` `{"max", "wait_s", "lease_s"}` long-polls for up to
  `max` calls: `{"calls": [{"lease": {"id", "deadline_at"}, "call": {...}}]}`;
- `POST /v1/leases/{id}/heartbeat` `{"lease_s"}` extends a lease;
- `POST /v1/leases/{id}/progress` `{"progress"}` adds a `tool-progress` event;
- `POST /v1/leases/{id}/result` `{"output", "is_error"}` records the result (write-once).

A lapsed lease answers 410: its call is re-delivered. The process also announces the
remote tools, reaps lapsed leases, and pushes the calls of queues with a webhook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

import httpx
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.client import Client
from agentq.orchestrator.tools.base import ToolAnnouncement
from agentq.orchestrator.tools.remote import RemoteTools, load_remote_tools
from agentq.serve.deps import caller
from agentq.serve.errors import ApiError, not_found
from agentq.workers.tools.remote import CallTimedOut, LeaseGone, RemoteLeases
from agentq.workers.tools.remote_push import PushDispatcher

log = logging.getLogger("agentq.remote")

router = APIRouter(tags=["remote workers"])
SCOPE = "workers"
ANNOUNCE_EVERY_S = 60.0


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


class RemoteService:
    """What `agentq serve` runs for remote tools, started with the app."""

    def __init__(self, client: Client, declared: RemoteTools) -> None:
        self.client = client
        self.declared = declared
        settings = client.settings
        self.leases = RemoteLeases(
            client.redis,
            client.store,
            max_deliveries=settings.max_deliveries,
            max_output_bytes=settings.max_tool_output_bytes,
        )
        self._http = httpx.AsyncClient(follow_redirects=False)
        self._tasks: list[asyncio.Task[None]] = []
        self._pushers: list[PushDispatcher] = []

    @classmethod
    def from_client(cls, client: Client) -> RemoteService:
        return cls(client, load_remote_tools(client.settings.remote_tools))

    async def start(self) -> None:
        """Announce the remote tools (a run may name them as soon as serve answers), then
        keep them announced, reap lapsed leases and push the webhook queues' calls."""
        if not self.declared.tools:
            return
        await self.client.store.announce(self._announcements)
        self._tasks.append(asyncio.create_task(self._announce_forever()))
        self._tasks.append(
            asyncio.create_task(self.leases.reap_forever(self.client.settings.lease_s))
        )
        for queue, hook in self.declared.webhooks.items():
            pusher = PushDispatcher(self.leases, queue, hook, self._http, os.environ)
            self._pushers.append(pusher)
            self._tasks.append(asyncio.create_task(pusher.run_forever()))

    @property
    def _announcements(self) -> list[ToolAnnouncement]:
        return [t.announcement() for t in self.declared.tools]

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_EVERY_S)
            try:
                await self.client.store.announce(self._announcements)
            except Exception as exc:  # the next round retries
                log.warning("announcing remote tools failed: %s", exc)

    async def aclose(self) -> None:
        for pusher in self._pushers:
            await pusher.aclose()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._http.aclose()


def _service(request: Request) -> RemoteService:
    service: RemoteService = request.app.state.remote
    return service


def _gone(lease_id: str, exc: LeaseGone | None = None) -> ApiError:
    if isinstance(exc, CallTimedOut):
        return ApiError(
            410,
            "call_timed_out",
            f"lease {lease_id!r}: the call's deadline passed (a timeout error was recorded for it)",
        )
    return ApiError(
        410, "lease_gone", f"lease {lease_id!r} lapsed or is unknown; its call is re-delivered"
    )


@router.post("/v1/queues/{queue}/lease")
async def lease(request: Request, queue: str, body: LeaseRequest) -> dict[str, Any]:
    caller(request, SCOPE)
    service = _service(request)
    if queue not in service.declared.queues:
        raise not_found(f"no remote tool of this deployment uses queue {queue!r}")
    leases = await service.leases.lease(queue, body.max, body.wait_s, body.lease_s)
    return {"calls": [lease.document() for lease in leases]}


@router.post("/v1/leases/{lease_id}/heartbeat")
async def heartbeat(request: Request, lease_id: str, body: Heartbeat | None = None) -> Any:
    caller(request, SCOPE)
    try:
        deadline = await _service(request).leases.heartbeat(lease_id, (body or Heartbeat()).lease_s)
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"lease": {"id": lease_id, "deadline_at": deadline}}


@router.post("/v1/leases/{lease_id}/progress")
async def progress(request: Request, lease_id: str, body: Progress) -> Any:
    caller(request, SCOPE)
    try:
        await _service(request).leases.progress(lease_id, body.progress)
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"ok": True}


@router.post("/v1/leases/{lease_id}/result")
async def result(request: Request, lease_id: str, body: Result) -> Any:
    caller(request, SCOPE)
    try:
        recorded = await _service(request).leases.complete(lease_id, body.output, body.is_error)
    except LeaseGone as exc:
        raise _gone(lease_id, exc) from None
    return {"recorded": recorded}
