"""The one HTTP driver every wire format plugs into.

A wire format says what differs (the path, the auth headers, the body, how a
stream folds into a response and how it ends, how a whole answer parses); the
driver does the rest once: the endpoint and key, the POST with its deadline,
streaming deltas to the sink, a stream cut off before its end marker, and
scrubbing the key from every error.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple, Protocol

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.policy.endpoints import Endpoint
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse, ProviderContext
from agentq.workers.models.batch_api import BatchApi, batch_api
from agentq.workers.models.history import extra_headers
from agentq.workers.models.http import join_url, parse_event_json, post, read_json, read_key
from agentq.workers.models.redact import key_scrubbed
from agentq.workers.models.sse import SSEEvent, iter_sse


class ToolInputStart(NamedTuple):
    call_id: str
    tool_name: str


class ToolInputDelta(NamedTuple):
    call_id: str
    delta: str


ToolInput = ToolInputStart | ToolInputDelta


class StreamDelta(NamedTuple):
    """What one stream event adds: answer text, reasoning the model shows, and the calls
    it begins and the pieces of their arguments, in order."""

    text: str = ""
    reasoning: str = ""
    tool_inputs: tuple[ToolInput, ...] = ()


NO_DELTA = StreamDelta()


class StreamFold(Protocol):
    """Folds a stream's events into a response; pure, so event sequences are unit-testable."""

    @property
    def ended(self) -> bool:
        """The end marker was seen: stop reading."""
        ...

    def feed(self, data: dict[str, Any], event: SSEEvent, label: str) -> StreamDelta:
        """Fold one event in (its JSON `data`); return its text and reasoning deltas."""
        ...

    def result(self, label: str) -> ModelResponse:
        """The response; a retryable ProviderError when the stream was cut off."""
        ...


class WireFormat(Protocol):
    def path(self, request: ModelRequest, stream: bool) -> str: ...

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The key's header, and any header the format always sends."""
        ...

    def body(self, request: ModelRequest, stream: bool) -> dict[str, Any]: ...

    def fold(self, request: ModelRequest) -> StreamFold: ...

    def parse(self, data: dict[str, Any], request: ModelRequest, label: str) -> ModelResponse:
        """A whole (non-streamed) answer."""
        ...


class BearerAuthWire:
    """The `auth_headers` of a wire format that sends the key as a bearer token
    (OpenAI's APIs and the many hosts that copy them)."""

    def auth_headers(self, key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}


class HttpProvider:
    """A provider speaking `wire` to the endpoint in `ctx`."""

    def __init__(self, wire: WireFormat, ref: ModelRef, ctx: ProviderContext) -> None:
        if ctx.endpoint is None:
            raise ValueError("HttpProvider needs a resolved endpoint (use make_provider)")
        self.wire = wire
        self.endpoint: Endpoint = ctx.endpoint
        self.ctx = ctx

    def served(self, request: ModelRequest) -> ModelRequest:
        """The request as the endpoint serves it: its model name and merged options."""
        model = request.model.model_copy(
            update={"name": self.endpoint.model, "options": self.endpoint.options}
        )
        return request.model_copy(update={"model": model})

    def batch_request(self, request: ModelRequest) -> tuple[str, dict[str, Any]]:
        """The (path, body) this provider would POST for `request`, unstreamed: what a
        provider batch API takes as one line (workers/models/batch/)."""
        request = self.served(request)
        return self.wire.path(request, False), self.wire.body(request, False)

    def batch_group(self) -> str:
        """Requests that may share one provider batch: same endpoint, key and model."""
        e = self.endpoint
        identity = [e.provider.wire, e.base_url, e.key_env, e.model]
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]

    def batch_api(self, request: ModelRequest) -> BatchApi:
        """The endpoint's batch API, with the key read from the environment now."""
        label = self.served(request).model.label
        if self.endpoint.base_url is None:
            raise ProviderError(f"{label}: the endpoint has no base URL", retryable=False)
        key = read_key(self.endpoint, self.ctx.env, label)
        path, _ = self.batch_request(request)
        return batch_api(
            self.endpoint.provider.wire,
            self.ctx.http,
            self.endpoint.base_url,
            self.wire.auth_headers(key),
            label,
            path,
        )

    async def batch_answer(
        self, data: dict[str, Any], request: ModelRequest, sink: DeltaSink
    ) -> ModelResponse:
        """A batch line's answer body, parsed as a direct unstreamed answer is."""
        request = self.served(request)
        result = self.wire.parse(data, request, request.model.label)
        if result.text:
            await sink.text_delta(result.text)
        return result

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        request = self.served(request)
        label = request.model.label
        key = read_key(self.endpoint, self.ctx.env, label)
        with key_scrubbed(key):
            return await self._generate(request, sink, label, key)

    async def _generate(
        self, request: ModelRequest, sink: DeltaSink, label: str, key: str | None
    ) -> ModelResponse:
        options = request.model.options
        stream = bool(options.get("stream", True))
        headers = {
            "content-type": "application/json",
            **self.wire.auth_headers(key),
            **extra_headers(options),
        }
        if self.endpoint.base_url is None:
            raise ProviderError(f"{label}: the endpoint has no base URL", retryable=False)
        async with post(
            self.ctx.http,
            join_url(self.endpoint.base_url, self.wire.path(request, stream)),
            label=label,
            body=self.wire.body(request, stream),
            headers=headers,
            timeout_s=request.timeout_s,
            secrets=(key,),
            on_headers=self.ctx.on_headers,
        ) as response:
            if not stream:
                result = self.wire.parse(await read_json(response, label), request, label)
                if result.text:
                    await sink.text_delta(result.text)
                return result
            fold = self.wire.fold(request)
            async for event in iter_sse(response):
                data = event.data.strip()
                delta = fold.feed(
                    {} if data == "[DONE]" else parse_event_json(event.data, label), event, label
                )
                if delta.reasoning:
                    await sink.reasoning_delta(delta.reasoning)
                if delta.text:
                    await sink.text_delta(delta.text)
                await _tool_inputs(delta.tool_inputs, sink)
                if fold.ended:
                    break
            return fold.result(label)


async def _tool_inputs(parts: tuple[ToolInput, ...], sink: DeltaSink) -> None:
    for part in parts:
        match part:
            case ToolInputStart(call_id, tool_name):
                await sink.tool_input_start(call_id, tool_name)
            case ToolInputDelta(call_id, delta):
                await sink.tool_input_delta(call_id, delta)
