"""Errors the sandbox raises on purpose, split by who must act.

    SandboxError
    ├── InvalidRequestError (also ValueError)  the caller: a bad request; names the field
    ├── CapacityError                          nobody, yet: all containers busy; retryable
    ├── SandboxUnavailableError                the operator: Docker unreachable, image missing
    ├── DriverProtocolError                    the sandbox: its driver broke the wire protocol
    └── SessionLostError                       the model: its run session's state is gone

What the *code* does (crash, timeout, OOM, flooding output) is not an error
here: it is a normal `ExecResult` with `error` set, for the model to read.
`sandbox` imports nothing of agentq, so the worker maps these onto its own tree;
`retryable` is data so that mapping needs no isinstance ladder.
"""

from __future__ import annotations


class SandboxError(Exception):
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequestError(SandboxError, ValueError):
    """The request is invalid; `field` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class CapacityError(SandboxError):
    """No container slot freed up before the admission deadline."""

    retryable = True


class SandboxUnavailableError(SandboxError):
    """The container engine or an image is missing; an operator must act."""

    retryable = True


class DriverProtocolError(SandboxError):
    """The in-container driver sent something that is not a valid frame."""


class SessionLostError(SandboxError):
    """A run session's container (or the worker holding it) is gone; the next call starts
    a fresh session. Reported to the model, never hidden by running in a new interpreter."""
