"""The model step's side: park the request, or take the answer a collector brought.

`batch_answer` tells the model step what to do: PARK (the request is with the
collector; the job ends and holds no worker slot), DIRECT (call the model as
usual: the endpoint has no batch API, or the batch line failed in a way a
direct call may cure), or the response itself, parsed exactly as a direct
unstreamed answer is parsed.
"""

from __future__ import annotations

from enum import Enum

from agentq.orchestrator.core.errors import ProviderError
from agentq.workers.models import ModelRequest, ModelResponse
from agentq.workers.models.base import DeltaSink
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.batch_api import LineResult
from agentq.workers.models.model_client import ModelClient


class Route(Enum):
    PARK = "park"
    DIRECT = "direct"


async def batch_answer(
    store: ProviderBatchStore,
    models: ModelClient,
    request: ModelRequest,
    run_id: str,
    step: int,
    sink: DeltaSink,
) -> ModelResponse | Route:
    provider = await models.batch_provider(request)
    if provider is None:
        return Route.DIRECT
    parked = await store.parked(run_id, step)
    if parked.result is None:
        path, body = provider.batch_request(request)
        await store.park(
            run_id, step, provider.batch_group(), request.model.model_dump_json(), path, body
        )
        return Route.PARK
    line = LineResult.model_validate_json(parked.result)
    if line.body is None:
        if line.retryable:
            return Route.DIRECT
        raise ProviderError(
            f"{request.model.label}: batch request failed: {line.error}", retryable=False
        )
    try:
        return await provider.batch_answer(line.body, request, sink)
    except ProviderError as exc:
        if exc.retryable:
            return Route.DIRECT
        raise
