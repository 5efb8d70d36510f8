"""The caller's usage and cost: every model step its tenant's runs recorded, priced at
the deployment's table (docs/caching-and-cost.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from agentq.orchestrator.core.messages import Usage
from agentq.serve.deps import caller, client_of

router = APIRouter(prefix="/v1/usage", tags=["usage"])


@router.get("", response_model=Usage)
async def tenant_usage(request: Request) -> Usage:
    """Tokens and cost (USD, by kind; null when a step's model had no price) of the
    caller's tenant, so far."""
    principal = caller(request, "runs:read")
    return await client_of(request).runs.usage(principal.tenant)
