"""Test helpers shared by provider tests."""

from __future__ import annotations

from typing import Any

import httpx

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.core.model_io import ModelResponse
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import ProviderContext, make_provider
from agentq.workers.models.base import ModelRequest


class ListSink:
    """A DeltaSink that keeps the deltas."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.reasoning_deltas: list[str] = []
        # ("start", call id, tool name) and ("delta", call id, piece), in arrival order.
        self.tool_inputs: list[tuple[str, str, str]] = []

    async def text_delta(self, delta: str) -> None:
        self.deltas.append(delta)

    async def reasoning_delta(self, delta: str) -> None:
        self.reasoning_deltas.append(delta)

    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        self.tool_inputs.append(("start", call_id, tool_name))

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        self.tool_inputs.append(("delta", call_id, delta))

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_deltas)

    @property
    def text(self) -> str:
        return "".join(self.deltas)


async def generate_once(
    http: httpx.AsyncClient, ref: ModelRef, env: dict[str, str], **request: Any
) -> tuple[ModelResponse, ListSink]:
    """One `generate` of the provider `ref` names (a one-line user prompt by default)."""
    request.setdefault("messages", [UserMessage(content="hi")])
    provider = make_provider(ref, ProviderContext(http=http, env=env))
    sink = ListSink()
    response = await provider.generate(ModelRequest(model=ref, timeout_s=10, **request), sink)
    return response, sink
