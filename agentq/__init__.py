"""agentq: LLM agent loops as durable distributed jobs on Redis.

The public face is `from agentq import Client, RunSpec, tool`; the architecture
lives in `agentq.orchestrator` (the loop, the run store, the client),
`agentq.workers` (job handlers, providers, tool executors) and `agentq.sandbox`
(the code sandbox). Exports load lazily so that `agentq --help` and a worker's
start do not import what they do not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentq.orchestrator.calls.catalogue import CallInputError, ToolCallResult
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.core.errors import (
        AgentqError,
        InfrastructureError,
        ProviderError,
        RunError,
        RunNotFoundError,
        RunStateError,
        RunTimeoutError,
        SpecError,
        ToolError,
    )
    from agentq.orchestrator.core.events import Event
    from agentq.orchestrator.policy.guardrails import GuardCheck
    from agentq.orchestrator.runs.result import RunResult, StepResult
    from agentq.orchestrator.spec.run import RunSpec
    from agentq.workers.steps.hooks import guardrail, needs_approval, prepare_step, stop_when
    from agentq.workers.tools.context import ToolContext
    from agentq.workers.tools.function_tools import FunctionTool, tool
    from agentq.workers.tools.model_output import to_model_output
    from agentq.workers.worker.embedded import embedded

_EXPORTS = {
    "AgentqError": "agentq.orchestrator.core.errors",
    "CallInputError": "agentq.orchestrator.calls.catalogue",
    "ToolCallResult": "agentq.orchestrator.calls.catalogue",
    "Client": "agentq.orchestrator.client",
    "Event": "agentq.orchestrator.core.events",
    "FunctionTool": "agentq.workers.tools.function_tools",
    "GuardCheck": "agentq.orchestrator.policy.guardrails",
    "InfrastructureError": "agentq.orchestrator.core.errors",
    "ProviderError": "agentq.orchestrator.core.errors",
    "RunError": "agentq.orchestrator.core.errors",
    "RunNotFoundError": "agentq.orchestrator.core.errors",
    "RunResult": "agentq.orchestrator.runs.result",
    "RunSpec": "agentq.orchestrator.spec.run",
    "RunStateError": "agentq.orchestrator.core.errors",
    "RunTimeoutError": "agentq.orchestrator.core.errors",
    "SpecError": "agentq.orchestrator.core.errors",
    "StepResult": "agentq.orchestrator.runs.result",
    "ToolContext": "agentq.workers.tools.context",
    "ToolError": "agentq.orchestrator.core.errors",
    "embedded": "agentq.workers.worker.embedded",
    "guardrail": "agentq.workers.steps.hooks",
    "needs_approval": "agentq.workers.steps.hooks",
    "prepare_step": "agentq.workers.steps.hooks",
    "stop_when": "agentq.workers.steps.hooks",
    "to_model_output": "agentq.workers.tools.model_output",
    "tool": "agentq.workers.tools.function_tools",
}
__all__ = [
    "AgentqError",
    "CallInputError",
    "Client",
    "Event",
    "FunctionTool",
    "GuardCheck",
    "InfrastructureError",
    "ProviderError",
    "RunError",
    "RunNotFoundError",
    "RunResult",
    "RunSpec",
    "RunStateError",
    "RunTimeoutError",
    "SpecError",
    "StepResult",
    "ToolCallResult",
    "ToolContext",
    "ToolError",
    "embedded",
    "guardrail",
    "needs_approval",
    "prepare_step",
    "stop_when",
    "to_model_output",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentq' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
