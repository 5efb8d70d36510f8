"""The base of every machine's transition inputs (runs, calls, batches).

A transition's input is one typed model, sent as JSON to one Lua script (the
Store base's `_send`): the script it runs and the time it happens at, which the
scripts read as their clock (`A.at`). Each machine adds whose record it changes.

A field typed `Spilled` (JSON the script stores or sends as it is: a tool's result, an
event) travels beside the input instead of inside it: ARGV[1] names it by its index in
ARGV, and the script reads `ARGV[A.field]`. Nested in the input, its bytes would be
escaped here and unescaped by Redis's cjson, one by one, on every call (a 1 KB result
costs Redis ~4 us to decode), only to be stored as they came.
"""

from __future__ import annotations

import functools
import time
import typing
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    WrapSerializer,
)

from agentq.orchestrator.core.queued_job import QueuedJob


def _spill(value: str, info: SerializationInfo) -> str | int:
    """A spilled field's value as the input's JSON carries it: its index in ARGV when the
    store collects the spilled values (`context`, a list: ARGV[2], ...), else itself."""
    spilled = info.context
    if not isinstance(spilled, list):
        return value
    spilled.append(value)
    return len(spilled) + 1


Spilled = Annotated[str, PlainSerializer(_spill, when_used="json")]


def _spill_payload(
    job: QueuedJob, handler: SerializerFunctionWrapHandler, info: SerializationInfo
) -> Any:
    body = handler(job)
    body["payload"] = _spill(job.payload, info)
    return body


# A job the transition enqueues as it comes (never stores to enqueue later): its payload,
# JSON nested in the input, is spilled (enqueue.lua reads `ARGV[job.payload]`), so Redis
# does not unescape it byte by byte only to store it as it came.
SentJob = Annotated[QueuedJob, WrapSerializer(_spill_payload, when_used="json")]


# What a store adds to every transition's input from its own settings, once (a model
# field beside it would be sent twice, the default then overridden): scripts read it as
# `A.retention_s` like the model's fields.
ADDED_BY_STORE = frozenset({"retention_s"})


def script_args(transition: BaseModel, *, retention_s: int | None = None) -> list[str]:
    """A transition's input as its script reads it: ARGV[1] the model's own JSON (written
    once by pydantic-core, with `retention_s` added to the object it closes: a transition
    has at least `at`), then its spilled values."""
    spilled: list[str] = []
    body = transition.model_dump_json(exclude_none=True, context=spilled)
    if retention_s is not None:
        body = f'{body[:-1]},"retention_s":{retention_s}}}'
    return [body, *spilled]


class Transition(BaseModel):
    """One transition's input: nothing the script does not read is accepted."""

    model_config = ConfigDict(extra="forbid")
    script: ClassVar[str]  # the Lua file it runs, without `.lua`

    at: float = Field(default_factory=time.time)

    def carried_jobs(self) -> Iterator[QueuedJob]:
        """The jobs this transition may enqueue (those of its fields that hold a
        `QueuedJob`, alone or in a list): tracing stamps them."""
        for field in _job_fields(type(self)):
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
