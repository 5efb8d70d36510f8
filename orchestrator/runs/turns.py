"""A run on a thread: what creating it asks of the thread it continues.

The threads package stands above runs (it reads runs to judge a turn), so runs name it
by this protocol only; `Client` hands its `Threads` to its `Runs`.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.messages import Message


class Turn(BaseModel):
    """A thread's turn, taken for one run: the history the run starts from."""

    model_config = ConfigDict(frozen=True)

    thread_id: str  # in the tenant's namespace
    run_id: str
    history: tuple[Message, ...] = ()
    taken: bool = True  # False: the run had the turn already (the same run again)


class ThreadTurns(Protocol):
    async def take(self, thread_id: str, tenant: str | None, run_id: str) -> Turn:
        """Take the thread's turn for `run_id` (creating the thread on its first run);
        ThreadBusyError while the thread's run is still going."""
        ...

    async def give_back(self, turn: Turn) -> None:
        """The run was not created (or existed already): the thread is as it was."""
        ...
