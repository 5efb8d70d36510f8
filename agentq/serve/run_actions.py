"""What an operator does to a run: cancel it, retry it, fork it at a step, replay it.

Each is a thin layer over `client.runs` (the CLI's `cancel`, `fork` and `replay` are
the same calls). A run of another tenant is a 404, as for every read. Retry and fork
start a run, so they count against the tenant's submit rate like a submission does.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import BaseModel, Field

from agentq.orchestrator.loop.replay import ReplayReport
from agentq.serve.deps import client_of, config_of, own_run
from agentq.serve.limits import check_spec_size, check_submit_rate
from agentq.serve.runs import Outcome

router = APIRouter(prefix="/v1/runs", tags=["runs"])


class Started(BaseModel):
    """The run an action started, and the run it came from."""

    id: str
    origin: str


class CancelBody(BaseModel):
    reason: str | None = Field(default=None, max_length=1000)


class ForkBody(BaseModel):
    at_step: int = Field(ge=0, description="Copy steps 0..at_step-1; step at_step runs live.")
    patch: dict[str, Any] | None = Field(
        default=None, description="A JSON merge patch (RFC 7386) on the run's spec."
    )


class ReplayBody(BaseModel):
    patch: dict[str, Any] | None = Field(
        default=None, description="A JSON merge patch on the spec: what if it were..."
    )


@router.post("/{run_id}/cancel", response_model=Outcome)
async def cancel(request: Request, run_id: str, body: CancelBody | None = None) -> Outcome:
    """Cancel the run (a finished run stays as it ended)."""
    await own_run(request, run_id, "runs:write")
    outcome = await client_of(request).runs.cancel(run_id, reason=body.reason if body else None)
    return Outcome(id=run_id, outcome=outcome)


@router.post("/{run_id}/retry", status_code=201, response_model=Started)
async def retry(request: Request, run_id: str) -> Started:
    """A new run with the same spec, from the start (it records the run it retries)."""
    principal = await own_run(request, run_id, "runs:write")
    client = client_of(request)
    await check_submit_rate(client.runs, principal.tenant)
    return Started(id=await client.runs.retry(run_id, tenant=principal.tenant), origin=run_id)


@router.post("/{run_id}/fork", status_code=201, response_model=Started)
async def fork(request: Request, run_id: str, body: Annotated[ForkBody, Body()]) -> Started:
    """A new run with the first `at_step` steps of this one copied (model responses, tool
    results) and the rest live, its spec merge-patched. 422 when the run has not reached
    that step or the patched spec is not one the deployment runs."""
    principal = await own_run(request, run_id, "runs:write")
    if body.patch:
        # What a patch adds is held to a spec's size, as a submitted spec is.
        raw = json.dumps(body.patch, separators=(",", ":")).encode()
        check_spec_size(raw, config_of(request).limits.max_spec_bytes)
    client = client_of(request)
    await check_submit_rate(client.runs, principal.tenant)
    new_id = await client.runs.fork(run_id, body.at_step, body.patch, tenant=principal.tenant)
    return Started(id=new_id, origin=run_id)


@router.post("/{run_id}/replay", response_model=ReplayReport)
async def replay(
    request: Request, run_id: str, body: Annotated[ReplayBody | None, Body()] = None
) -> ReplayReport:
    """Today's loop over the run's recorded model responses and tool results (no model,
    no tool called): every step where it would send something else or take another path."""
    await own_run(request, run_id, "runs:read")
    return await client_of(request).runs.replay(run_id, body.patch if body else None)
