"""Answering a server's `sampling/createMessage` with the model its config routes to.

The request becomes a tool-less `ModelRequest` for the routed model; the
answer goes back as one assistant text block. The server's own choices are
kept where the provider has an option for them (maxTokens, temperature,
stopSequences) and its model preferences are ignored: the deployment, not the
server, decides which model and which key pay for the call.

A request this client cannot honour (tools, audio, an image the assistant
"said") and a provider failure are answered with an error the server sees;
provider errors are already scrubbed of API keys (workers/models/redact.py).
Sampling goes through the worker's model client, so it counts against the
fleet-wide rate limit like any model step.

With `"sampling": "forward"` the request goes instead to whoever drives the call
(`ToolContext.sample`: the MCP gateway asks its own client, when it declared sampling).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import mcp_types as types

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    TextPart,
    UserMessage,
)
from agentq.orchestrator.core.model_io import FinishReason
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import ModelRequest, ModelResponse, providers
from agentq.workers.models.base import DiscardDeltas
from agentq.workers.models.model_client import ModelClient
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.mcp.config import SamplingRoute

log = logging.getLogger(__name__)

_STOP_REASONS: dict[FinishReason, str] = {
    "stop": "endTurn",
    "length": "maxTokens",
    "tool-calls": "toolUse",
}


class Unsupported(ValueError):
    """The request asks for something this client does not sample with."""


def to_messages(messages: list[types.SamplingMessage]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        parts = [_part(block) for block in message.content_as_list]
        texts = [p.text for p in parts if isinstance(p, TextPart)]
        if message.role == "assistant":
            if len(texts) < len(parts):
                # Our neutral assistant message holds no media to replay.
                raise Unsupported("an assistant message with an image cannot be sampled from")
            out.append(AssistantMessage(content="".join(texts)))
        elif len(parts) == 1 and texts:
            out.append(UserMessage(content=texts[0]))
        else:
            out.append(UserMessage(content=parts))
    return out


def _part(block: types.SamplingMessageContentBlock) -> TextPart | MediaPart:
    if isinstance(block, types.TextContent):
        return TextPart(text=block.text)
    if isinstance(block, types.ImageContent):
        return MediaPart(media_type=block.mime_type, data=block.data)
    raise Unsupported(f"{block.type!r} content is not supported in sampling (text and images are)")


def sampling_options(
    provider: str, params: types.CreateMessageRequestParams, cap: int | None
) -> dict[str, Any]:
    """The server's limits in the option names of `provider`'s wire format."""
    info = providers().get(provider)
    names = info.sampling_options if info is not None else {}
    wanted: dict[str, Any] = {
        "max_tokens": params.max_tokens if cap is None else min(params.max_tokens, cap),
        "temperature": params.temperature,
        "stop": params.stop_sequences or None,
    }
    options = {names[k]: v for k, v in wanted.items() if k in names and v is not None}
    if info is not None and info.sampling_options_under and options:
        return {info.sampling_options_under: options}
    return options


def routed_model(route: SamplingRoute, params: types.CreateMessageRequestParams) -> ModelRef:
    """The configured model with the server's limits merged over its options."""
    ref = route.model
    extra = sampling_options(ref.provider, params, route.max_tokens)
    options = dict(ref.options)
    for key, value in extra.items():
        current = options.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            value = {**current, **value}
        options[key] = value
    return ref.model_copy(update={"options": options})


def to_model_request(
    route: SamplingRoute, params: types.CreateMessageRequestParams, *, timeout_s: float
) -> ModelRequest:
    if params.tools or params.tool_choice is not None:
        # We never declare `sampling.tools`; a server sending them anyway gets a no.
        raise Unsupported("tools in sampling requests are not supported by this client")
    return ModelRequest(
        model=routed_model(route, params),
        system=params.system_prompt or None,
        messages=to_messages(params.messages),
        step=0,
        timeout_s=timeout_s,
    )


def to_result(response: ModelResponse, ref: ModelRef) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=response.text),
        model=ref.name,
        stop_reason=_STOP_REASONS.get(response.finish_reason, response.finish_reason),
    )


class Sampler:
    """Calls the routed model for every server of one executor, through the worker's
    model client: its endpoints, keys, fleet-wide rate limit, retries and deadlines."""

    def __init__(self, models: ModelClient) -> None:
        self.models = models

    async def sample(
        self,
        server: str,
        route: SamplingRoute,
        params: types.CreateMessageRequestParams,
        deadline_at: float | None = None,
    ) -> types.CreateMessageResult | types.ErrorData:
        """Answer one request; `deadline_at` (wall clock) is the calling tool's, if known."""
        timeout_s = route.model.timeout_s
        if deadline_at is not None:
            timeout_s = min(timeout_s, deadline_at - time.time())
        if timeout_s <= 0:
            return _error(types.INTERNAL_ERROR, "the tool call's deadline passed before sampling")
        try:
            request = to_model_request(route, params, timeout_s=timeout_s)
        except Unsupported as exc:
            return _error(types.INVALID_PARAMS, str(exc))
        try:
            # The route is the deployment's (its MCP config), not a spec's: trusted.
            response = await self.models.generate_within(
                request, DiscardDeltas(), timeout_s, trusted=True
            )
        except ProviderError as exc:
            log.warning(
                "MCP server %r: sampling with %s failed: %s", server, route.model.label, exc
            )
            return _error(types.INTERNAL_ERROR, f"sampling failed: {exc}")
        return to_result(response, request.model)


def _error(code: int, message: str) -> types.ErrorData:
    return types.ErrorData(code=code, message=message)


async def forward_sampling(
    params: types.CreateMessageRequestParams, call: ToolContext | None
) -> types.CreateMessageResult | types.ErrorData:
    """The request asked of whoever drives the call; declined when nobody can answer
    (no call to tie it to, a driver that takes no input, or the driver declined)."""
    declined = types.ErrorData(code=types.INVALID_REQUEST, message="sampling is declined")
    if call is None or call.sample is None:
        return declined
    answer = await call.sample(params.model_dump(mode="json", by_alias=True, exclude_none=True))
    if answer is None:
        return declined
    try:
        return types.CreateMessageResult.model_validate(answer)
    except ValueError:
        return types.ErrorData(
            code=types.INTERNAL_ERROR, message="sampling answer is not a CreateMessageResult"
        )
