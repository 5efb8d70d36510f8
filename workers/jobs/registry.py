"""Handlers registered against the JobKind table (orchestrator/core/jobs.py).

Each module of this package declares the kind it handles with `@handles(JobKind.X)`;
`job_handlers()` loads every module of the package and returns one handler per kind,
from which the runtime builds arq's function list (a job's `f` is its kind). A kind
with no handler, or with two, is an error at start, not a job dropped later.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from agentq.orchestrator.core.envelopes import JobKind

Handler = Callable[[dict[str, Any], dict[str, Any]], Coroutine[Any, Any, None]]
H = TypeVar("H", bound=Handler)

_HANDLERS: dict[JobKind, Handler] = {}


class HandlerConflict(RuntimeError):
    """Two handlers for one job kind, or a kind without one."""


def handles(kind: JobKind) -> Callable[[H], H]:
    """Register the decorated coroutine as the handler of jobs of `kind`."""

    def register(handler: H) -> H:
        known = _HANDLERS.get(kind)
        if known is not None and known is not handler:
            raise HandlerConflict(
                f"{kind} is handled by {_name(known)} and {_name(handler)}: one handler a kind"
            )
        _HANDLERS[kind] = handler
        return handler

    return register


def _name(handler: Handler) -> str:
    return f"{handler.__module__}.{getattr(handler, '__qualname__', handler)}"


def job_handlers() -> Mapping[JobKind, Handler]:
    """Every job kind's handler, each module of this package loaded (its decorators
    register what it handles)."""
    package = importlib.import_module(__package__ or "agentq.workers.jobs")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    missing = [kind.value for kind in JobKind if kind not in _HANDLERS]
    if missing:
        raise HandlerConflict(f"no handler for job kind(s) {', '.join(missing)}")
    return MappingProxyType({kind: _HANDLERS[kind] for kind in JobKind})
