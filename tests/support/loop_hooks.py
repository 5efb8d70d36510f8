"""Hooks (prepare_step, stop_when, needs_approval) the end-to-end tests load into `agentq
worker --tools`."""

from __future__ import annotations

from typing import Any

from agentq import needs_approval, prepare_step, stop_when
from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.runs.result import StepResult


@prepare_step
def numbered_system(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
    """Each step gets its own system prompt, naming how far the run has come."""
    return {"system": f"step {step} after {len(steps)} steps and {len(messages)} messages"}


@prepare_step
def broken_hook(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
    raise RuntimeError("the planner is offline")


@stop_when
def says_done(step: StepResult) -> bool:
    """The run ends with the step whose text says DONE."""
    return "DONE" in step.text


@needs_approval
def large_sums(value: Any, tool_name: str) -> bool:
    """An `add` of more than 100 waits for a person."""
    return tool_name == "add" and value["a"] + value["b"] > 100
