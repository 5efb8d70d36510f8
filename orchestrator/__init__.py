"""agentq's orchestrator: the run spec, the durable loop, the run store and the client."""

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import (
    AgentqError,
    InfrastructureError,
    ProviderError,
    RunConflictError,
    RunError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    SpecError,
    ToolError,
    UnknownToolError,
)
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.core.spec import RunSpec
from agentq.orchestrator.runs.result import RunResult, StepResult
from agentq.orchestrator.runs.state import RunFailure

__all__ = [
    "AgentqError",
    "Client",
    "Event",
    "InfrastructureError",
    "ProviderError",
    "RunConflictError",
    "RunError",
    "RunFailure",
    "RunNotFoundError",
    "RunResult",
    "RunSpec",
    "RunStateError",
    "RunTimeoutError",
    "SpecError",
    "StepResult",
    "ToolError",
    "UnknownToolError",
]
