"""The scripted provider: deterministic answers for tests and the offline demo.

Step k of a run answers `script[k]`. It calls no model, and says so: every
response carries `provider_metadata["scripted"] = True`, which the CLI shows.
"""

from __future__ import annotations

import json

from orchestrator.errors import ProviderError
from workers.providers.base import DeltaSink, ModelRequest, ModelResponse, ProviderToolCall


class ScriptedProvider:
    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        script = request.model.script or []
        if request.step >= len(script):
            raise ProviderError(
                f"the scripted model has {len(script)} steps; step {request.step} was asked for"
            )
        answer = script[request.step]
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
            provider_metadata={"scripted": True},
        )
