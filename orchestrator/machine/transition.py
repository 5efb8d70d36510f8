"""The base of every machine's transition inputs (runs, calls, batches).

A transition's input is one typed model, sent as JSON to one Lua script (the
Store base's `_send`): the script it runs and the time it happens at, which the
scripts read as their clock (`A.at`). Each machine adds whose record it changes.
"""

from __future__ import annotations

import functools
import time
import typing
from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.queued_job import QueuedJob


class Transition(BaseModel):
    """One transition's input: nothing the script does not read is accepted."""

    model_config = ConfigDict(extra="forbid")
    script: ClassVar[str]  # the Lua file it runs, without `.lua`

    at: float = Field(default_factory=time.time)

    def idle_job_fields(self) -> frozenset[str]:
        """Fields whose job this transition never enqueues, whatever Redis holds: no
        send span is started for them (tracing's cost is per span)."""
        return frozenset()

    def carried_jobs(self) -> Iterator[QueuedJob]:
        """The jobs this transition may enqueue (those of its fields that hold a
        `QueuedJob`, alone or in a list, but the idle ones): tracing stamps them."""
        idle = self.idle_job_fields()
        for field in _job_fields(type(self)):
            if field in idle:
                continue
            value = getattr(self, field)
            if isinstance(value, QueuedJob):
                yield value
            elif isinstance(value, list):
                yield from (job for job in value if isinstance(job, QueuedJob))


@functools.cache
def _job_fields(kind: type[Transition]) -> tuple[str, ...]:
    """The fields of a transition's input that can hold a job (optional or in a list)."""

    def holds_job(annotation: Any) -> bool:
        return annotation is QueuedJob or any(holds_job(a) for a in typing.get_args(annotation))

    return tuple(name for name, info in kind.model_fields.items() if holds_job(info.annotation))
