"""The scripted provider: deterministic answers for tests and the offline demo.

Step k of a run answers `script[k]` (reporting its `usage`, if given); the i-th repair
request of step k answers with the call `script[k].repair[i]`. It calls no model, and
says so: every
response carries `provider_metadata["scripted"] = True`, which the CLI shows.
"""

from __future__ import annotations

import json

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.policy.model_ref import ScriptedToolCall, ScriptedUsage
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse, ProviderToolCall


class ScriptedProvider:
    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        script = request.model.script or []
        if request.step >= len(script):
            raise ProviderError(
                f"the scripted model has {len(script)} steps; step {request.step} was asked for"
            )
        answer = script[request.step]
        if request.repair_index is not None:
            return _repair_answer(answer.repair, request)
        if answer.reasoning:
            await sink.reasoning_delta(answer.reasoning)
        if answer.text:
            await sink.text_delta(answer.text)
        calls = [
            ProviderToolCall(
                id=call.id or f"call_{request.step}_{i}",
                name=call.name,
                arguments=json.dumps(call.input) if call.input is not None else "{}",
            )
            for i, call in enumerate(answer.tool_calls)
        ]
        finish = answer.finish_reason or ("tool-calls" if calls else "stop")
        return ModelResponse(
            text=answer.text,
            tool_calls=calls,
            finish_reason=finish,
            usage=_usage(answer.usage),
            provider_metadata={"scripted": True},
        )


def _usage(given: ScriptedUsage | None) -> Usage:
    if given is None:
        return Usage()
    return Usage(**given.model_dump(), total_tokens=given.input_tokens + given.output_tokens)


def _repair_answer(repairs: list[ScriptedToolCall], request: ModelRequest) -> ModelResponse:
    index = request.repair_index or 0
    if index >= len(repairs):
        raise ProviderError(
            f"the scripted model has {len(repairs)} repair answers in step {request.step}; "
            f"repair {index} was asked for"
        )
    call = repairs[index]
    return ModelResponse(
        tool_calls=[
            ProviderToolCall(
                id=call.id or f"repair_{request.step}_{index}",
                name=call.name,
                arguments=json.dumps(call.input) if call.input is not None else "{}",
            )
        ],
        finish_reason="tool-calls",
        provider_metadata={"scripted": True},
    )
