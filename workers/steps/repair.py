"""Tool-call repair, the round trip: ask the model again for each invalid call.

Called by the model step between the provider's answer and planning. For each call
that `agentq.orchestrator.loop.repair.calls_to_repair` picks, the model gets a side request (the
history plus a repair prompt, only that tool offered and forced) up to
`max_attempts` times; a valid answer replaces the call's arguments, keeping its id.
Nothing of the exchange is stored in the run: one `tool-call-repair` event per call
says what happened. A repair that fails in any way (the provider errs, the model
answers without the call or with input still invalid) leaves the original call,
whose tool error then goes back to the model as it would have without repair.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import event_json
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.model_io import ModelResponse
from agentq.orchestrator.loop.plan import input_error, lenient_parse
from agentq.orchestrator.loop.repair import (
    Arguments,
    RepairNeed,
    apply_repairs,
    calls_to_repair,
    repair_messages,
    repaired_arguments,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec, ToolChoiceTool
from agentq.orchestrator.tools import ToolDef
from agentq.workers.models.base import DeltaSink, DiscardDeltas, ModelRequest, OfferedTool

log = logging.getLogger("agentq.worker")

Generate = Callable[[ModelRequest, DeltaSink], Awaitable[ModelResponse]]


def _repair_request(request: ModelRequest, need: RepairNeed, index: int) -> ModelRequest:
    tool = need.tool
    return request.model_copy(
        update={
            "messages": repair_messages(request.messages, need),
            "tools": [
                OfferedTool(
                    name=tool.name, description=tool.description, input_schema=tool.input_schema
                )
            ],
            "tool_choice": ToolChoiceTool(tool=tool.name),
            "repair_index": index,
        }
    )


async def repair_calls(
    *,
    spec: RunSpec,
    tools: list[ToolDef],
    request: ModelRequest,
    response: ModelResponse,
    generate: Generate,
    store: RunStore,
    run_id: str,
) -> ModelResponse:
    """The response with its invalid calls repaired where the model managed to; the
    usage of the repair requests is added to the step's."""
    policy = spec.model.repair
    needs = calls_to_repair(spec, tools, request.step, response)
    if policy is None or not needs:
        return response
    fixed: dict[int, Arguments] = {}
    usage = Usage()
    events: list[str] = []
    asked = 0
    for need in needs:
        current, attempts = need, 0
        repaired: Arguments | None = None
        while attempts < policy.max_attempts and repaired is None:
            attempts += 1
            try:
                answer = await generate(_repair_request(request, current, asked), DiscardDeltas())
            except ProviderError as exc:
                log.info("repair of %s in run %s: %s", need.call_id, run_id, exc.message)
                break
            finally:
                asked += 1
            usage = usage + answer.usage
            arguments = repaired_arguments(current, answer)
            error = (
                "the model answered without calling the tool"
                if arguments is None
                else input_error(need.tool, arguments)
            )
            if error is None:
                repaired = arguments
            elif arguments is not None:
                current = RepairNeed(need.index, need.call_id, need.tool, arguments, error)
        if repaired is not None:
            fixed[need.index] = repaired
        events.append(
            event_json(
                "tool-call-repair",
                run_id,
                step=request.step,
                tool_call_id=need.call_id,
                tool_name=need.tool.name,
                input=lenient_parse(need.arguments),
                error=need.error,
                repaired=repaired is not None,
                repaired_input=lenient_parse(repaired) if repaired is not None else None,
                attempts=attempts,
            )
        )
    await store.emit(run_id, events)
    repaired_response = apply_repairs(response, fixed)
    return repaired_response.model_copy(update={"usage": response.usage + usage})
