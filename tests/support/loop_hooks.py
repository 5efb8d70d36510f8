"""prepare_step hooks the end-to-end tests load into `agentq worker --tools`."""

from __future__ import annotations

from typing import Any

from agentq import prepare_step
from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.runs.result import StepResult


@prepare_step
def numbered_system(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
    """Each step gets its own system prompt, naming how far the run has come."""
    return {"system": f"step {step} after {len(steps)} steps and {len(messages)} messages"}


@prepare_step
def broken_hook(step: int, steps: list[StepResult], messages: list[Message]) -> Any:
    raise RuntimeError("the planner is offline")
