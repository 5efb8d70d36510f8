"""The HTTP edge shared by every wire format: keys, deadlines, errors, headers.

One place decides how an HTTP failure becomes a `ProviderError` (the provider's
own message, status, retryability, Retry-After), so every provider fails the
same way. API keys are read from the worker's environment at call time and
scrubbed from every message that leaves this module (redact.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.policy.endpoints import Endpoint
from agentq.workers.models.base import HeaderObserver
from agentq.workers.models.redact import redact
from agentq.workers.models.retry import parse_retry_after, retryable_status

MAX_ERROR_CHARS = 2000
# The request extension that carries a call's header observer to the model client's
# httpx response hook (see model_client.py).
HEADERS_EXTENSION = "agentq.on_headers"


def read_key(endpoint: Endpoint, env: Mapping[str, str], label: str) -> str | None:
    """The endpoint's key from the worker's environment. An endpoint that may go without
    one (a local server the deployment or an allowed spec URL points at) gets None."""
    if endpoint.key_env is None:
        return None
    key = env.get(endpoint.key_env)
    if key:
        return key
    if endpoint.key_required:
        raise ProviderError(
            f"{label}: no API key: the environment variable {endpoint.key_env} is not set "
            "on this worker",
            retryable=False,
        )
    return None


def error_message(body: bytes) -> str:
    """The provider's own words. OpenAI, Anthropic and Gemini all nest them under
    `error.message`; some compatible servers put a string in `error` or `message`."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:MAX_ERROR_CHARS] or "(empty body)"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]  # Gemini sometimes answers a streamed request with a JSON array
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:MAX_ERROR_CHARS]
        if isinstance(error, str):
            return error[:MAX_ERROR_CHARS]
        if isinstance(data.get("message"), str):
            return str(data["message"])[:MAX_ERROR_CHARS]
        if isinstance(data.get("detail"), str):
            return str(data["detail"])[:MAX_ERROR_CHARS]
    return text[:MAX_ERROR_CHARS]


def status_error(
    label: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    secrets: tuple[str | None, ...],
) -> ProviderError:
    message = redact(error_message(body), secrets)
    return ProviderError(
        f"{label}: HTTP {status}: {message}",
        status=status,
        retryable=retryable_status(status),
        retry_after_s=parse_retry_after(headers),
    )


@asynccontextmanager
async def post(
    http: httpx.AsyncClient,
    url: str,
    *,
    label: str,
    body: dict[str, Any],
    headers: Mapping[str, str],
    timeout_s: float,
    secrets: tuple[str | None, ...] = (),
    on_headers: HeaderObserver | None = None,
) -> AsyncIterator[httpx.Response]:
    """POST and yield the (unread, streamable) 2xx response; raise `ProviderError` otherwise.

    The whole exchange, body included, is bounded by `timeout_s`: httpx timeouts
    bound each read, not a stream that trickles forever.
    """
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream(
                "POST",
                url,
                json=body,
                headers=dict(headers),
                timeout=httpx.Timeout(timeout_s),
                extensions={HEADERS_EXTENSION: on_headers} if on_headers is not None else None,
            ) as response:
                if response.status_code >= 400:
                    raw = await response.aread()
                    raise status_error(label, response.status_code, response.headers, raw, secrets)
                yield response
    except TimeoutError:
        raise ProviderError(
            f"{label}: no complete answer within {timeout_s:.3g} s", retryable=True
        ) from None
    except httpx.TimeoutException as exc:
        raise ProviderError(f"{label}: timed out ({type(exc).__name__})", retryable=True) from None
    except httpx.TransportError as exc:
        detail = redact(str(exc), secrets) or type(exc).__name__
        raise ProviderError(f"{label}: connection failed: {detail}", retryable=True) from None


def json_object(raw: str | bytes, label: str, what: str) -> dict[str, Any]:
    """`raw` as the JSON object every provider answer is; anything else (a proxy's HTML
    page, a cut-off body) is a retryable `ProviderError` that names `what` it was."""
    try:
        data = json.loads(raw)
    except ValueError:
        excerpt = raw[:200].decode("utf-8", "replace") if isinstance(raw, bytes) else raw[:200]
        raise ProviderError(f"{label}: {what} is not JSON: {excerpt}", retryable=True) from None
    if not isinstance(data, dict):
        raise ProviderError(f"{label}: {what} is not a JSON object", retryable=True)
    return data


async def read_json(response: httpx.Response, label: str) -> dict[str, Any]:
    return json_object(await response.aread(), label, "the answer")


def parse_event_json(data: str, label: str) -> dict[str, Any]:
    return json_object(data, label, "a stream event")


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")
