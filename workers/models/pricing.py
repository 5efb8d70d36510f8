"""An answer's usage priced at the deployment's table (orchestrator/cost/). A step's is
priced before its plan records it, so its event, its record and the run's, batch's and
tenant's totals all carry the same cost; a workflow's llm node's likewise."""

from __future__ import annotations

from agentq.orchestrator.core.model_io import ModelResponse
from agentq.orchestrator.cost.compute import priced
from agentq.orchestrator.cost.prices import Prices
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef


def price_names(ref: ModelRef, policy: EndpointPolicy) -> list[str]:
    """Where a step's price is looked up: its models-file endpoint, then the provider
    behind it (or the spec's provider alone)."""
    endpoint = policy.endpoint_named(ref)
    if endpoint is None:
        return [ref.provider]
    declared = policy.models.endpoints.get(endpoint)
    return [endpoint] if declared is None else [endpoint, declared.provider]


def priced_response(
    prices: Prices, policy: EndpointPolicy, ref: ModelRef, response: ModelResponse, *, batch: bool
) -> ModelResponse:
    price = prices.lookup(price_names(ref, policy), ref.name)
    return response.model_copy(update={"usage": priced(response.usage, price, batch=batch)})
