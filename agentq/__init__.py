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
    from agentq.orchestrator.calls import CallInputError, ToolCallResult
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.errors import (
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
    from agentq.orchestrator.events import Event
    from agentq.orchestrator.result import RunResult, StepResult
    from agentq.orchestrator.spec import RunSpec
    from agentq.workers.embedded import embedded
    from agentq.workers.function_tools import FunctionTool, tool
    from agentq.workers.step_hooks import prepare_step

_EXPORTS = {
    "AgentqError": "agentq.orchestrator.errors",
    "CallInputError": "agentq.orchestrator.calls",
    "ToolCallResult": "agentq.orchestrator.calls",
    "Client": "agentq.orchestrator.client",
    "Event": "agentq.orchestrator.events",
    "FunctionTool": "agentq.workers.function_tools",
    "InfrastructureError": "agentq.orchestrator.errors",
    "ProviderError": "agentq.orchestrator.errors",
    "RunError": "agentq.orchestrator.errors",
    "RunNotFoundError": "agentq.orchestrator.errors",
    "RunResult": "agentq.orchestrator.result",
    "RunSpec": "agentq.orchestrator.spec",
    "RunStateError": "agentq.orchestrator.errors",
    "RunTimeoutError": "agentq.orchestrator.errors",
    "SpecError": "agentq.orchestrator.errors",
    "StepResult": "agentq.orchestrator.result",
    "ToolError": "agentq.orchestrator.errors",
    "embedded": "agentq.workers.embedded",
    "prepare_step": "agentq.workers.step_hooks",
    "tool": "agentq.workers.function_tools",
}
__all__ = [
    "AgentqError",
    "CallInputError",
    "Client",
    "Event",
    "FunctionTool",
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
    "ToolError",
    "embedded",
    "prepare_step",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentq' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
