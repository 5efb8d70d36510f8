"""A thread's state: its stored fields, the inputs of its two transitions and their reply.

A thread is a hash (`core/keys.py: thread`), the list of its runs, oldest first, and
the runs queued for its turn (`QueuedRun`, enqueued while its run goes on). Its
history is not copied anywhere: it is its current run's conversation, which started
from the run before it (references, as a run's jobs carry its id, not its messages).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel

from agentq.orchestrator.machine.transition import Transition


class ThreadField(StrEnum):
    """The thread hash's fields (the Lua scripts name them as written here)."""

    TENANT = "tenant"
    CREATED_AT = "created_at"
    UPDATED_AT = "updated_at"
    CURRENT = "current"  # the run that has the turn: the last one started
    METADATA = "metadata"  # JSON, given when the thread was created by `create`
    DOUBLE_TEXTING = "double_texting"  # the thread's policy, given to `create`


class TurnOutcome(StrEnum):
    TAKEN = "taken"
    SAME = "same"
    MOVED = "moved"
    RELEASED = "released"
    NOT_CURRENT = "not_current"


class ThreadTurn(Transition):
    script: ClassVar[str] = "thread_turn"

    tenant: str
    run_id: str
    expected: str  # the current run the caller saw ended ('' for none)
    discard: bool = False  # rollback: the expected run leaves the thread
    queued: str | None = None  # the run's entry in the queued list, when it waited there


class ThreadRelease(Transition):
    script: ClassVar[str] = "thread_release"

    run_id: str


class QueuedRun(BaseModel):
    """A run waiting for its thread's turn (enqueue): created `queued` when it was
    submitted, it starts when the turn comes (Runs.start_queued)."""

    run_id: str


class TurnReply(BaseModel):
    outcome: TurnOutcome
    current: str | None = None
