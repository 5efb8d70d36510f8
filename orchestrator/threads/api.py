"""Threads through `Client`: a conversation whose runs continue one another.

    thread_id = await client.threads.create()
    run_id = await client.runs.submit({**spec, "thread_id": thread_id})
    view = await client.threads.show(thread_id)   # messages, runs, status

A run whose spec names a `thread_id` takes the thread's turn (creating the thread on its
first run) and starts from the thread's history, then its own messages. One run holds
the turn at a time: a new run while the current one is still going is refused
(ThreadBusyError). A thread id is a name in its tenant's namespace, as a chosen run id
is: another tenant's thread of the same name is another thread. A thread expires a
retention after its last run started.
"""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agentq.orchestrator.core.errors import (
    RunNotFoundError,
    SpecError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from agentq.orchestrator.core.keys import RUN_ID_PATTERN
from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, TENANT_RUN_ID, tenant_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.runs.result import TERMINAL_STATUSES
from agentq.orchestrator.runs.turns import Turn
from agentq.orchestrator.threads.history import continued
from agentq.orchestrator.threads.state import (
    ThreadField,
    ThreadRelease,
    ThreadTurn,
    TurnOutcome,
)
from agentq.orchestrator.threads.store import ThreadStore

IDLE = "idle"  # a thread whose last run ended (or that has none yet)
# Taking a turn is judged, then checked in one transition; another run taking it in
# between sends the judgment round again, at most this many times.
TURN_ATTEMPTS = 5


class ThreadRun(BaseModel):
    id: str
    status: str  # "expired" once the run's keys went with its retention


class ThreadView(BaseModel):
    """A thread as `GET /v1/threads/{id}` and `agentq thread show` give it."""

    id: str
    tenant: str
    status: str  # idle, or its current run's status (running, awaiting)
    current_run: str | None = None
    runs: list[ThreadRun] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadSummary(BaseModel):
    id: str
    status: str
    current_run: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


def _check_id(thread_id: str) -> None:
    if not RUN_ID_PATTERN.match(thread_id) or TENANT_RUN_ID.match(thread_id):
        raise SpecError(
            f"thread id {thread_id!r}: must be 1-128 characters of letters, digits, "
            "'_', '.' or '-' (and not n<12 hex>.…, the tenants' namespaces)"
        )


class Threads:
    """The thread operations of one Client (`client.threads`), and the turns its runs take."""

    def __init__(self, redis: Redis, settings: Settings, runs: Runs) -> None:
        self.settings = settings
        self.runs = runs
        self.store = ThreadStore(redis, retention_s=settings.retention_s)

    async def create(
        self,
        thread_id: str | None = None,
        *,
        tenant: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """A new thread (its id, chosen or made up); an existing id is left as it is."""
        chosen = thread_id or uuid.uuid4().hex
        _check_id(chosen)
        owner = tenant or DEFAULT_TENANT
        await self.store.open(
            tenant_run_id(owner, chosen), owner, json.dumps(dict(metadata or {}), default=str)
        )
        await self.store.list_under(owner, chosen)
        return chosen

    async def show(self, thread_id: str, *, tenant: str | None = None) -> ThreadView:
        """The thread: its status, its runs, oldest first, and its messages (its current
        run's conversation). ThreadNotFoundError when the tenant has no such thread."""
        owner = tenant or DEFAULT_TENANT
        key = tenant_run_id(owner, thread_id)
        record = await self.store.record(key)
        if not record:
            raise ThreadNotFoundError(f"no thread with id {thread_id!r}")
        run_ids = await self.store.runs(key)
        runs = [ThreadRun(id=r, status=await self._status(r)) for r in run_ids]
        current = record.get(ThreadField.CURRENT)
        messages: builtins.list[Message] = []
        if current:
            try:
                messages = await self.runs.conversation(current)
            except RunNotFoundError:
                messages = []
        return ThreadView(
            id=thread_id,
            tenant=owner,
            status=_thread_status(runs[-1].status if runs else None),
            current_run=current,
            runs=runs,
            messages=messages,
            created_at=float(record.get(ThreadField.CREATED_AT, 0)),
            updated_at=float(record.get(ThreadField.UPDATED_AT, 0)),
            metadata=json.loads(record.get(ThreadField.METADATA) or "{}"),
        )

    async def list(
        self, tenant: str | None = None, *, limit: int = 50
    ) -> builtins.list[ThreadSummary]:
        """The tenant's threads, the most recently started first."""
        owner = tenant or DEFAULT_TENANT
        chosen = await self.store.listed(owner, limit)
        records = await self.store.records([tenant_run_id(owner, t) for t in chosen])
        found = []
        for thread_id, record in zip(chosen, records, strict=True):
            if not record:
                continue  # expired with its retention
            current = record.get(ThreadField.CURRENT)
            found.append(
                ThreadSummary(
                    id=thread_id,
                    status=_thread_status(await self._status(current) if current else None),
                    current_run=current,
                    created_at=float(record.get(ThreadField.CREATED_AT, 0)),
                    updated_at=float(record.get(ThreadField.UPDATED_AT, 0)),
                )
            )
        return found

    # -- the turns runs take (runs/turns.py: ThreadTurns) ---------------------------

    async def take(self, thread_id: str, tenant: str | None, run_id: str) -> Turn:
        _check_id(thread_id)  # a spec's was; a door's copy of one may not have been
        owner = tenant or DEFAULT_TENANT
        key = tenant_run_id(owner, thread_id)
        for _ in range(TURN_ATTEMPTS):
            current = (await self.store.record(key)).get(ThreadField.CURRENT) or ""
            if current == run_id:
                return Turn(thread_id=key, run_id=run_id, taken=False)
            history = await self._ended_history(thread_id, current)
            reply = await self.store.turn(
                key, ThreadTurn(tenant=owner, run_id=run_id, expected=current)
            )
            if reply.outcome == TurnOutcome.SAME:
                return Turn(thread_id=key, run_id=run_id, taken=False)
            if reply.outcome == TurnOutcome.TAKEN:
                await self.store.list_under(owner, thread_id)
                return Turn(thread_id=key, run_id=run_id, history=tuple(history))
        raise ThreadBusyError(f"thread {thread_id!r}: other runs keep taking its turn; try again")

    async def give_back(self, turn: Turn) -> None:
        if turn.taken:
            await self.store.release(turn.thread_id, ThreadRelease(run_id=turn.run_id))

    async def _ended_history(self, thread_id: str, current: str) -> builtins.list[Message]:
        """The history after `current`, the thread's run, which must have ended."""
        if not current:
            return []
        status = await self._status(current)
        if status == "expired":
            return []
        if status not in TERMINAL_STATUSES:
            raise ThreadBusyError(
                f"thread {thread_id!r} has a run in progress ({current}, {status}): "
                "wait for it to end, or cancel it"
            )
        return continued(await self.runs.conversation(current), self.settings.thread_max_messages)

    async def _status(self, run_id: str) -> str:
        try:
            return (await self.runs.status(run_id)).status
        except RunNotFoundError:
            return "expired"


def _thread_status(last_run_status: str | None) -> str:
    if last_run_status is None or last_run_status in TERMINAL_STATUSES:
        return IDLE
    if last_run_status == "expired":
        return IDLE
    return last_run_status
