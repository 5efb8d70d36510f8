"""Tool-call repair, the pure part: which calls of a model answer need it, what the model
is asked, and how its answer rewrites the original call.

A call needs repair when its tool is offered but its input is invalid (unparseable
JSON or against the schema). An unknown tool is not repaired: the model learns the
available names from the tool error. The repair exchange is a side request: the
messages built here are sent once and never stored, so the run's history shows only
the final call. The provider round trip lives in `workers/steps/repair.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentq.orchestrator.core.messages import Message, UserMessage
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.loop.plan import call_ids, input_error, offered_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef

Arguments = str | dict[str, Any] | list[Any] | None


@dataclass(frozen=True)
class RepairNeed:
    """One call to repair: where it sits in the response, and what is wrong with it."""

    index: int
    call_id: str
    tool: ToolDef
    arguments: Arguments
    error: str


def calls_to_repair(
    spec: RunSpec, tools: list[ToolDef], step: int, response: ModelResponse
) -> list[RepairNeed]:
    if spec.model.repair is None:
        return []
    by_name = {t.name: t for t in offered_tools(spec, tools)}
    needs: list[RepairNeed] = []
    ids = call_ids(step, response)
    for index, (call_id, raw) in enumerate(zip(ids, response.tool_calls, strict=True)):
        tool = by_name.get(raw.name)
        unreadable = raw.parse_error is not None  # reported to the model as it is
        if raw.provider_executed or unreadable or tool is None or tool.kind == "provider":
            continue
        error = input_error(tool, raw.arguments)
        if error is not None:
            needs.append(RepairNeed(index, call_id, tool, raw.arguments, error))
    return needs


def arguments_shown(arguments: Arguments) -> str:
    """The bad arguments as the model sent them (a string verbatim), cut to a sane size."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 4000 else text[:4000] + "…(truncated)"


def repair_prompt(tool: ToolDef, arguments: Arguments, error: str) -> str:
    schema = json.dumps(tool.input_schema, ensure_ascii=False, indent=2)
    return (
        f"Your call to the tool `{tool.name}` was rejected because its arguments are invalid.\n\n"
        f"Error: {error}\n\n"
        f"The arguments you sent:\n{arguments_shown(arguments)}\n\n"
        f"The tool's input must be one JSON object matching this JSON Schema:\n{schema}\n\n"
        f"Call `{tool.name}` again, once, with corrected arguments. "
        "Make only that one call, with no other text."
    )


def repair_messages(history: list[Message], need: RepairNeed) -> list[Message]:
    """The conversation so far (so the model knows what the call was for) and the request
    to fix the one call. The failed call is quoted in the prompt, not replayed as a turn."""
    return [*history, UserMessage(content=repair_prompt(need.tool, need.arguments, need.error))]


def repaired_arguments(need: RepairNeed, answer: ModelResponse) -> Arguments | None:
    """The arguments of the answer's first call of the tool under repair, if any."""
    for call in answer.tool_calls:
        if call.name == need.tool.name and not call.provider_executed:
            return call.arguments
    return None


def apply_repairs(response: ModelResponse, fixed: dict[int, Arguments]) -> ModelResponse:
    """The response with the calls at the given positions carrying their repaired
    arguments; ids, names and everything else stay as the model first answered."""
    if not fixed:
        return response
    calls: list[ProviderToolCall] = [
        call.model_copy(update={"arguments": fixed[i]}) if i in fixed else call
        for i, call in enumerate(response.tool_calls)
    ]
    return response.model_copy(update={"tool_calls": calls})
