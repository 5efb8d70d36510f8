"""Commands that ride along with a job's last run transition, in its round trip.

A worker ends each job with one Redis call of its own (arq's cleanup, and the claim of
the next jobs). A job's last transition (a model step's `commit_step`, a tool call's
`record_result`) is the moment that call could go too: the worker sets a `Rider` for
the job, and the store hands the rider the transition to send, which it pipelines with
its own command. The store knows nothing of what rides; the rider rides once.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from redis.commands.core import AsyncScript


class Rider(Protocol):
    def rides_on(self, script: str) -> bool:
        """Whether this transition (its script's name) is the one to ride on."""
        ...

    async def ride(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any:
        """Send the transition (and what rides with it); return the transition's reply
        or raise its error, as running the script alone would."""
        ...


# The current job's rider (tasks copy it when they are created: set it before).
RIDER: ContextVar[Rider | None] = ContextVar("agentq_rider", default=None)
