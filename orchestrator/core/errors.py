"""The agentq exception tree, split by who must act.

    AgentqError
    ├── SpecError            the spec's author: a bad run spec or request (CLI exit 2)
    │   ├── UnknownToolError     a tool no worker serves, an unknown MCP server, …
    │   ├── RunConflictError     the run id is taken by a run of another spec
    │   ├── StartTimeError       a start time or duration that cannot be, or is past
    │   ├── TenantLimitError     the tenant is at a cap (AGENTQ_TENANT_LIMITS): retry later
    │   └── BudgetReachedError   the tenant's shared budget is spent (orchestrator/budgets/)
    ├── ToolError            the model: becomes a tool-error result it sees next step
    │   ├── ToolInputError       unparseable or schema-violating arguments
    │   ├── ToolTimeoutError     the call ran past its deadline
    │   └── ToolOutputTooLargeError  an output over a limit it cannot be cut to
    ├── RunError             the caller of the client API
    │   ├── RunNotFoundError
    │   │   └── ThreadNotFoundError
    │   ├── RunStateError        e.g. approving a call that is not awaiting approval
    │   │   └── ThreadBusyError      a new run on a thread whose run is still going
    │   └── RunTimeoutError      `wait` gave up before the run finished
    ├── ProviderError        a model provider refused or failed (retryable or not)
    └── InfrastructureError  the operator: Redis, Docker, a worker pool missing (CLI exit 3)

Foreign errors are mapped where they enter: the run store turns every redis-py error
into InfrastructureError (retryable when the server is away, loading or out of memory),
and a worker retries a job on a retryable one instead of failing the run.

Retryability is data (`retryable`, `retry_after_s`) rather than a subclass, so
that a retry policy is a pure function of the error.
"""

from __future__ import annotations

from typing import ClassVar

from agentq.orchestrator.core.tool_errors import ToolErrorKind


class AgentqError(Exception):
    """Base of every error agentq raises on purpose."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable


class SpecError(AgentqError):
    """The run spec or a request is invalid; nothing was started."""


class UnknownToolError(SpecError):
    """A spec names a tool (or MCP server) that no worker serves."""


class RunConflictError(SpecError):
    """A run id is resubmitted with a different spec (the same spec is a no-op)."""


class StartTimeError(SpecError):
    """A run's start time (`--at`, `--in`, `start_at`) is malformed or in the past."""


class TenantLimitError(SpecError):
    """The tenant is at one of its caps (core/tenant_limits.py): nothing was started.
    `limit` names the cap (the 429's `limit`); trying again after `retry_after_s` may help."""

    def __init__(self, message: str, *, limit: str, retry_after_s: float) -> None:
        super().__init__(message, retryable=True)
        self.limit = limit
        self.retry_after_s = retry_after_s


class BudgetReachedError(SpecError):
    """The tenant's shared budget is reached (orchestrator/budgets/): nothing was started
    until it is raised. `budget` names its scope, `limit` the limit reached (HTTP 402)."""

    def __init__(self, message: str, *, budget: str, limit: str) -> None:
        super().__init__(message)
        self.budget = budget
        self.limit = limit


class ToolError(AgentqError):
    """A tool call failed in a way the model should see and may recover from. Its
    `kind` is the result's `error_kind`."""

    kind: ClassVar[ToolErrorKind] = ToolErrorKind.EXECUTION


class ToolInputError(ToolError):
    """The model's arguments could not be parsed or violate the tool's schema."""

    kind = ToolErrorKind.INVALID_INPUT


class ToolTimeoutError(ToolError):
    """The call did not finish before its deadline."""

    kind = ToolErrorKind.TIMEOUT


class ToolOutputTooLargeError(ToolError):
    """The tool's output is over a limit and has no shorter faithful form."""

    kind = ToolErrorKind.OUTPUT_TOO_LARGE


class RunError(AgentqError):
    """A client-side request about a run could not be honoured."""


class RunNotFoundError(RunError):
    pass


class RunStateError(RunError):
    pass


class ThreadNotFoundError(RunNotFoundError):
    pass


class ThreadBusyError(RunStateError):
    pass


class RunTimeoutError(RunError):
    pass


class ProviderError(AgentqError):
    """A model provider failed. `status` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, retryable=retryable)
        self.status = status
        self.retry_after_s = retry_after_s


class InfrastructureError(AgentqError):
    """Something the operator must fix: Redis unreachable, no worker for a queue, …"""
