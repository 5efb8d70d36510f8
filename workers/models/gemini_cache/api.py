"""The cachedContents calls, on the endpoint a step's requests go to, with its key.

`create` answers the resource's name and the tokens it holds (`usageMetadata
.totalTokenCount`, billed once as input); `delete` treats a resource gone already (its
TTL ran out, another worker deleted it) as deleted. Errors are `ProviderError`s mapped as
a direct call's are, the key never in them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import httpx

from agentq.orchestrator.core.errors import ProviderError
from agentq.workers.models.driver import HttpProvider
from agentq.workers.models.http import join_url, json_object, read_key, status_error
from agentq.workers.models.redact import redact

TIMEOUT_S = 30.0


class Created(NamedTuple):
    name: str
    tokens: int


async def create(provider: HttpProvider, body: dict[str, Any], label: str) -> Created:
    data = await _call(provider, "POST", "cachedContents", label, json=body)
    name = data.get("name")
    if not isinstance(name, str) or not name.startswith("cachedContents/"):
        raise ProviderError(f"{label}: cachedContents.create answered no name", retryable=True)
    tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
    return Created(name, tokens)


async def delete(provider: HttpProvider, name: str, label: str) -> None:
    try:
        await _call(provider, "DELETE", name, label)
    except ProviderError as exc:
        if exc.status not in (403, 404):  # gone already (the API says 403 for unknown names)
            raise


async def _call(
    provider: HttpProvider, method: str, path: str, label: str, **kwargs: Any
) -> dict[str, Any]:
    base_url = provider.endpoint.base_url
    if base_url is None:
        raise ProviderError(f"{label}: the endpoint has no base URL", retryable=False)
    key = read_key(provider.endpoint, provider.ctx.env, label)
    headers = {"content-type": "application/json", **provider.wire.auth_headers(key)}
    try:
        response = await provider.ctx.http.request(
            method,
            join_url(base_url, path),
            headers=headers,
            timeout=httpx.Timeout(TIMEOUT_S),
            **kwargs,
        )
    except httpx.TransportError as exc:
        detail = redact(str(exc), (key,)) or type(exc).__name__
        raise ProviderError(f"{label}: cachedContents: {detail}", retryable=True) from None
    if response.status_code >= 400:
        raise status_error(label, response.status_code, response.headers, response.content, (key,))
    return json_object(response.content or b"{}", label, "the cachedContents answer")
