"""agentq's orchestrator: the run spec, the durable loop, the run store and the client."""

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
    UnknownToolError,
)
from agentq.orchestrator.events import Event
from agentq.orchestrator.result import RunResult, StepResult
from agentq.orchestrator.spec import RunSpec

__all__ = [
    "AgentqError",
    "Client",
    "Event",
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
    "ToolError",
    "UnknownToolError",
]
