"""A run on a thread: what creating it asks of the thread it continues.

The threads package stands above runs (it reads runs to judge a turn), so runs name it
by this protocol only; `Client` hands its `Threads` to its `Runs`.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.spec.run import RunSpec


class Turn(BaseModel):
    """A thread's turn, taken for one run: the history the run starts from."""

    model_config = ConfigDict(frozen=True)

    thread_id: str  # in the tenant's namespace
    run_id: str
    history: tuple[Message, ...] = ()
    taken: bool = True  # False: the run had the turn already (the same run again)
    # The run waits in the thread's queue (enqueue): it is created `queued`, its first
    # step held until its turn comes (Runs.start_queued).
    queued: bool = False
    # It replaces the thread's run, which ends at its step's end (interrupt): counted at
    # the tenant's caps, never refused for the run it replaces.
    replacing: bool = False
    # What the run's end enqueues: the thread's next queued run starts.
    end_job: QueuedJob | None = None


class ThreadTurns(Protocol):
    async def take(self, spec: RunSpec, tenant: str | None, run_id: str) -> Turn:
        """Take the turn of the spec's thread for `run_id` (creating the thread on its
        first run), as the thread's double-texting policy says while its run goes on:
        ThreadBusyError (reject), a queued turn (enqueue), or the running one cancelled."""
        ...

    async def give_back(self, turn: Turn) -> None:
        """The run was not created (or existed already): the thread is as it was."""
        ...

    async def queued(self, spec: RunSpec, tenant: str | None, turn: Turn) -> None:
        """The queued run was created: it starts at once if the run it waited for ended
        in the meantime (that run's end found no one to start)."""
        ...
