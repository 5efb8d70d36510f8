"""A model provider from outside agentq, registered when a worker loads this module
(`agentq worker --tools tests/support/plugins/echo_provider.py`).

`echo-model:NAME` calls the first tool it is offered once, with `{"text": "hi"}`,
then answers with the last tool result it saw. It calls no network.
"""

from __future__ import annotations

import json

from agentq.orchestrator.core.messages import ToolMessage
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    ProviderContext,
    ProviderToolCall,
    register_provider,
)


class EchoModel:
    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        results = [p for m in request.messages if isinstance(m, ToolMessage) for p in m.content]
        if request.tools and not results:
            call = ProviderToolCall(id="e1", name=request.tools[0].name, arguments='{"text": "hi"}')
            return ModelResponse(tool_calls=[call], finish_reason="tool-calls")
        text = "echo-model saw " + (json.dumps(results[-1].output) if results else "nothing")
        await sink.text_delta(text)
        return ModelResponse(text=text, finish_reason="stop")


def echo_model(ref: ModelRef, ctx: ProviderContext) -> EchoModel:
    return EchoModel()


register_provider("echo-model", echo_model)
