"""agentq's orchestrator: the run spec, the durable loop, the run store and the client."""

from orchestrator.client import Client
from orchestrator.errors import (
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
from orchestrator.events import Event
from orchestrator.result import RunResult, StepResult
from orchestrator.spec import RunSpec

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
