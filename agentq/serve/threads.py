"""The threads API: conversations whose runs continue one another.

A run joins a thread through `POST /v1/runs` with `"thread_id"` in its spec; these
routes create a thread ahead of its first run and read one. A thread id is a name in
the caller's tenant's namespace: another tenant's thread is a 404, whatever its name.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agentq.orchestrator.spec.run import DoubleTexting
from agentq.orchestrator.threads.api import ThreadSummary, ThreadView
from agentq.serve.deps import caller, client_of

router = APIRouter(prefix="/v1/threads", tags=["threads"])


class NewThread(BaseModel):
    id: str | None = Field(default=None, max_length=128)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # What a new run does while the thread's run goes on (a run's spec may override it).
    double_texting: DoubleTexting = "reject"


class ThreadList(BaseModel):
    threads: list[ThreadSummary]


@router.post("", status_code=201, responses={201: {"description": "{id}: the thread's id"}})
async def create(request: Request, body: NewThread | None = None) -> Any:
    """Create a thread (an id of the caller's choosing, or one made up)."""
    principal = caller(request, "runs:write")
    given = body or NewThread()
    thread_id = await client_of(request).threads.create(
        given.id,
        tenant=principal.tenant,
        metadata=given.metadata,
        double_texting=given.double_texting,
    )
    return JSONResponse({"id": thread_id}, status_code=201)


@router.get("", response_model=ThreadList)
async def list_threads(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> ThreadList:
    """The caller's threads, the most recently started first."""
    principal = caller(request, "runs:read")
    return ThreadList(threads=await client_of(request).threads.list(principal.tenant, limit=limit))


@router.get("/{thread_id}", response_model=ThreadView)
async def show(request: Request, thread_id: str) -> ThreadView:
    """The thread: its status, its runs (oldest first) and its messages."""
    principal = caller(request, "runs:read")
    return await client_of(request).threads.get(thread_id, tenant=principal.tenant)
