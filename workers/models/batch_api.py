"""The providers' batch APIs: submit many requests at once, poll, read the answers.

Two shapes, one protocol. OpenAI (chat completions and responses): the lines are
uploaded as a JSONL file (`/files`, purpose `batch`), a batch is created over it
(`/batches`), polled until `completed`/`failed`/`expired`/`cancelled`, and the
answers are read from its output and error files, matched by `custom_id` (the
files' line order means nothing). Anthropic Message Batches: the requests go in
one POST (`/messages/batches`), polled until `processing_status` is `ended`, and
its `results_url` JSONL says per `custom_id` `succeeded`, `errored`, `expired` or
`canceled`.

Each line's body is exactly what the wire format would POST directly
(`HttpProvider.batch_request`), and each answer body parses as a direct answer
(`HttpProvider.batch_answer`): this module only carries them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from agentq.orchestrator.core.errors import ProviderError
from agentq.workers.models.http import join_url, json_object, status_error
from agentq.workers.models.redact import redact
from agentq.workers.models.retry import retryable_status

TIMEOUT_S = 120.0
# OpenAI's batch `status` values after which nothing changes any more.
OPENAI_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Anthropic error types a direct retry may cure (the others are the request's fault).
ANTHROPIC_RETRYABLE = frozenset({"api_error", "overloaded_error", "rate_limit_error"})


class BatchLine(NamedTuple):
    custom_id: str
    path: str  # the wire format's path, relative to the endpoint's base URL
    body: dict[str, Any]


class LineResult(BaseModel):
    """One request's fate: the answer body, or why there is none."""

    custom_id: str
    body: dict[str, Any] | None = None
    error: str | None = None
    # The request itself may be fine (expired, cancelled, a server error): try it directly.
    retryable: bool = False


class Polled(NamedTuple):
    ended: bool
    status: str
    raw: dict[str, Any]


class BatchApi(Protocol):
    async def submit(self, lines: list[BatchLine], ref: str) -> str:
        """Create the provider batch (tagged `ref` where the API allows it); its id."""
        ...

    async def find(self, ref: str) -> str | None:
        """The provider batch created earlier for `ref`, if the API can tell."""
        ...

    async def poll(self, batch_id: str) -> Polled: ...

    async def results(self, polled: Polled) -> list[LineResult]: ...


class _Http:
    """Requests to one endpoint with its key, errors mapped as direct calls map them."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, headers: Mapping[str, str], label: str
    ) -> None:
        self.http = http
        self.base_url = base_url
        self.headers = dict(headers)
        self.label = label
        self.secrets = tuple(headers.values())

    def url(self, path: str) -> str:
        return join_url(self.base_url, path)

    def same_origin(self, url: str) -> bool:
        """A URL the provider handed back may get the key only on the endpoint's origin."""
        a, b = urlsplit(url), urlsplit(self.base_url)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(
                method, url, headers=self.headers, timeout=httpx.Timeout(TIMEOUT_S), **kwargs
            )
        except httpx.TransportError as exc:
            detail = redact(str(exc), self.secrets) or type(exc).__name__
            raise ProviderError(f"{self.label}: batch API: {detail}", retryable=True) from None
        if response.status_code >= 400:
            raise status_error(
                self.label, response.status_code, response.headers, response.content, self.secrets
            )
        return response

    async def json(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        response = await self.request(method, url, **kwargs)
        return json_object(response.content, self.label, "the batch API answer")


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- OpenAI ---------------------------------------------------------------------------


def openai_line(line: BatchLine) -> dict[str, Any]:
    return {
        "custom_id": line.custom_id,
        "method": "POST",
        "url": "/v1/" + line.path,
        "body": line.body,
    }


def openai_result(data: dict[str, Any]) -> LineResult:
    """One line of an output or error file."""
    custom_id = str(data.get("custom_id"))
    response = data.get("response") or {}
    status = int(response.get("status_code") or 0)
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return LineResult(custom_id=custom_id, body=body)
    error = data.get("error") or {}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
    message = str(error.get("message") or error.get("code") or f"HTTP {status}")
    code = str(error.get("code") or "")
    retryable = code in ("batch_expired", "batch_cancelled") or (
        status == 0 or retryable_status(status)
    )
    return LineResult(custom_id=custom_id, error=message, retryable=retryable)


class OpenAIBatches:
    def __init__(self, http: _Http, endpoint_path: str) -> None:
        self.http = http
        self.endpoint_path = endpoint_path  # "chat/completions" or "responses"

    async def submit(self, lines: list[BatchLine], ref: str) -> str:
        content = "".join(json.dumps(openai_line(line)) + "\n" for line in lines).encode()
        uploaded = await self.http.json(
            "POST",
            self.http.url("files"),
            data={"purpose": "batch"},
            files={"file": (f"{ref}.jsonl", content, "application/jsonl")},
        )
        created = await self.http.json(
            "POST",
            self.http.url("batches"),
            json={
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/" + self.endpoint_path,
                "completion_window": "24h",
                "metadata": {"agentq_batch": ref},
            },
        )
        return str(created["id"])

    async def find(self, ref: str) -> str | None:
        listed = await self.http.json("GET", self.http.url("batches"), params={"limit": 100})
        for batch in listed.get("data") or []:
            if (batch.get("metadata") or {}).get("agentq_batch") == ref:
                return str(batch["id"])
        return None

    async def poll(self, batch_id: str) -> Polled:
        data = await self.http.json("GET", self.http.url(f"batches/{batch_id}"))
        status = str(data.get("status"))
        return Polled(status in OPENAI_ENDED, status, data)

    async def results(self, polled: Polled) -> list[LineResult]:
        out: list[LineResult] = []
        for field in ("output_file_id", "error_file_id"):
            file_id = polled.raw.get(field)
            if file_id:
                response = await self.http.request("GET", self.http.url(f"files/{file_id}/content"))
                out += [openai_result(line) for line in jsonl(response.text)]
        return out


# -- Anthropic --------------------------------------------------------------------------


def anthropic_result(data: dict[str, Any]) -> LineResult:
    custom_id = str(data.get("custom_id"))
    result = data.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return LineResult(custom_id=custom_id, body=result["message"])
    if kind == "errored":
        error = (result.get("error") or {}).get("error") or {}
        return LineResult(
            custom_id=custom_id,
            error=str(error.get("message") or error.get("type") or "errored"),
            retryable=error.get("type") in ANTHROPIC_RETRYABLE,
        )
    return LineResult(custom_id=custom_id, error=f"the batch request {kind}", retryable=True)


class AnthropicBatches:
    def __init__(self, http: _Http) -> None:
        self.http = http

    async def submit(self, lines: list[BatchLine], ref: str) -> str:
        created = await self.http.json(
            "POST",
            self.http.url("messages/batches"),
            json={
                "requests": [{"custom_id": line.custom_id, "params": line.body} for line in lines]
            },
        )
        return str(created["id"])

    async def find(self, ref: str) -> str | None:
        return None  # Message Batches carry no metadata to find ours by

    async def poll(self, batch_id: str) -> Polled:
        data = await self.http.json("GET", self.http.url(f"messages/batches/{batch_id}"))
        status = str(data.get("processing_status"))
        return Polled(status == "ended", status, data)

    async def results(self, polled: Polled) -> list[LineResult]:
        url = polled.raw.get("results_url")
        if not url:
            return []
        if not self.http.same_origin(str(url)):
            raise ProviderError(
                f"{self.http.label}: the batch's results_url is not on the endpoint's host",
                retryable=False,
            )
        response = await self.http.request("GET", str(url))
        return [anthropic_result(line) for line in jsonl(response.text)]


# Wire format -> its batch API.
BATCH_WIRES = frozenset({"openai", "openai-responses", "anthropic"})


def batch_api(
    wire: str,
    http: httpx.AsyncClient,
    base_url: str,
    headers: Mapping[str, str],
    label: str,
    path: str,
) -> BatchApi:
    """The batch API of a wire format (one of BATCH_WIRES); `path` is its direct path."""
    client = _Http(http, base_url, headers, label)
    if wire == "anthropic":
        return AnthropicBatches(client)
    return OpenAIBatches(client, path)
