"""A tenant's active concurrency keys, for the console's keys page: each key holding a
slot or a held job, with its slots in use, its max and its jobs held. The caller's
tenant's only: a key's counter names its tenant, and another tenant's key of the same
name is another key (`orchestrator/concurrency/load.py`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel

from agentq.orchestrator.concurrency.load import KeyLoad
from agentq.serve.deps import caller, client_of

router = APIRouter(tags=["runs"])


class KeyList(BaseModel):
    keys: list[KeyLoad]  # by key


@router.get("/v1/concurrency/keys", response_model=KeyList)
async def active_keys(request: Request) -> KeyList:
    """The caller's tenant's concurrency keys that hold a slot or a held job now: `in_use`
    runs holding a slot out of `max`, and `held` jobs waiting for one."""
    principal = caller(request, "runs:read")
    return KeyList(keys=await client_of(request).concurrency.active(principal.tenant))
