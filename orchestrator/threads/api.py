"""Threads through `Client`: a conversation whose runs continue one another.

    thread_id = await client.threads.create()
    run_id = await client.runs.submit({**spec, "thread_id": thread_id})
    view = await client.threads.get(thread_id)   # messages, runs, status

A run whose spec names a `thread_id` takes the thread's turn (creating the thread on its
first run) and starts from the thread's history, then its own messages. One run holds
the turn at a time: a new run while the current one is still going is refused
(ThreadBusyError), or queued (`enqueue`: created `queued` at once, its first step held
until the runs before it end), or it interrupts the current one (`interrupt`,
`rollback`). A thread id is a name in its tenant's namespace, as a chosen run id
is: another tenant's thread of the same name is another thread. A thread expires a
retention after its last run started.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter
from redis.asyncio import Redis

from agentq.orchestrator.core.envelopes import ThreadJobEnvelope
from agentq.orchestrator.core.errors import (
    RunNotFoundError,
    SpecError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.core.keys import RUN_ID_PATTERN
from agentq.orchestrator.core.messages import Message, Usage
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, TENANT_RUN_ID, tenant_run_id
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.runs.result import TERMINAL_STATUSES, RunStatus
from agentq.orchestrator.runs.turns import Turn
from agentq.orchestrator.spec.run import DoubleTexting, RunSpec
from agentq.orchestrator.threads.history import continued
from agentq.orchestrator.threads.state import (
    QueuedRun,
    ThreadField,
    ThreadRelease,
    ThreadTurn,
    TurnOutcome,
)
from agentq.orchestrator.threads.store import ThreadStore

log = logging.getLogger("agentq.threads")

IDLE = "idle"  # a thread whose last run ended (or that has none yet)
EXPIRED = "expired"  # a run of the thread whose keys went with their retention
_POLICY: TypeAdapter[DoubleTexting] = TypeAdapter(DoubleTexting)
# Taking a turn is judged, then checked in one transition; another run taking it in
# between sends the judgment round again, at most this many times.
TURN_ATTEMPTS = 5


class ThreadRun(BaseModel):
    id: str
    status: str  # "expired" once the run's keys went with its retention
    created_at: float = 0.0
    total_tokens: int = 0
    cost_usd: float | None = 0.0  # its own steps' (None: a model without a price)


class ThreadView(BaseModel):
    """A thread as `GET /v1/threads/{id}` and `agentq thread show` give it."""

    id: str
    tenant: str
    status: str  # idle, or its current run's status (running, awaiting)
    current_run: str | None = None
    runs: list[ThreadRun] = Field(default_factory=list)
    queued: list[str] = Field(default_factory=list)  # runs waiting for the turn, in order
    double_texting: DoubleTexting = "reject"
    messages: list[Message] = Field(default_factory=list)
    # What its runs used, summed, their sub-agents' and workflows' included (as a run's
    # parent is charged); the cost is None when a model without a price took part.
    usage: Usage = Field(default_factory=Usage)
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
        double_texting: DoubleTexting = "reject",
    ) -> str:
        """A new thread (its id, chosen or made up); an existing id is left as it is.
        `double_texting`: what a new run does while the thread's run goes on, unless its
        spec says otherwise (reject, enqueue, interrupt, rollback)."""
        chosen = thread_id or uuid.uuid4().hex
        _check_id(chosen)
        owner = tenant or DEFAULT_TENANT
        await self.store.open(
            tenant_run_id(owner, chosen),
            owner,
            json.dumps(dict(metadata or {}), default=str),
            double_texting,
        )
        await self.store.list_under(owner, chosen)
        return chosen

    async def get(self, thread_id: str, *, tenant: str | None = None) -> ThreadView:
        """The thread: its status, its runs, oldest first, and its messages (its current
        run's conversation). ThreadNotFoundError when the tenant has no such thread."""
        owner = tenant or DEFAULT_TENANT
        key = tenant_run_id(owner, thread_id)
        record = await self.store.record(key)
        if not record:
            raise ThreadNotFoundError(f"no thread with id {thread_id!r}")
        run_ids = await self.store.runs(key)
        found = await self.runs.store.summaries(run_ids)
        runs = [
            ThreadRun(
                id=r,
                status=found[r].status,
                created_at=found[r].created_at,
                total_tokens=found[r].total_tokens,
                cost_usd=found[r].cost_usd,
            )
            if r in found
            else ThreadRun(id=r, status=EXPIRED)
            for r in run_ids
        ]
        queued = [_queued_id(q) for q in await self.store.queued(key)]
        # Its runs, queued ones too (nothing used yet, unless they started meanwhile); a
        # run rollback dropped left the thread, its usage with it, and an expired run's
        # keys are gone (it counts nothing).
        usages = await self.runs.store.usages([*run_ids, *queued])
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
            queued=queued,
            usage=sum(usages.values(), Usage()),
            double_texting=_policy(record.get(ThreadField.DOUBLE_TEXTING)),
            messages=messages,
            created_at=float(record.get(ThreadField.CREATED_AT, 0)),
            updated_at=float(record.get(ThreadField.UPDATED_AT, 0)),
            metadata=json.loads(record.get(ThreadField.METADATA) or "{}"),
        )

    async def current(self, thread_id: str, *, tenant: str | None = None) -> str | None:
        """The id of the thread's run that has the turn (its last started), or None."""
        record = await self.store.record(tenant_run_id(tenant or DEFAULT_TENANT, thread_id))
        return record.get(ThreadField.CURRENT) or None

    async def list(
        self, tenant: str | None = None, *, limit: int = 50
    ) -> builtins.list[ThreadSummary]:
        """The tenant's threads, the most recently started first."""
        owner = tenant or DEFAULT_TENANT
        chosen = await self.store.listed(owner, limit)
        records = await self.store.records([tenant_run_id(owner, t) for t in chosen])
        currents = [r.get(ThreadField.CURRENT) for r in records]
        statuses = await self.runs.store.statuses(c for c in currents if c)
        found = []
        for thread_id, record, current in zip(chosen, records, currents, strict=True):
            if not record:
                continue  # expired with its retention
            found.append(
                ThreadSummary(
                    id=thread_id,
                    status=_thread_status(statuses.get(current, EXPIRED) if current else None),
                    current_run=current,
                    created_at=float(record.get(ThreadField.CREATED_AT, 0)),
                    updated_at=float(record.get(ThreadField.UPDATED_AT, 0)),
                )
            )
        return found

    # -- the turns runs take (runs/turns.py: ThreadTurns) ---------------------------

    async def take(self, spec: RunSpec, tenant: str | None, run_id: str) -> Turn:
        assert spec.thread_id is not None, "a run on no thread takes no turn"
        thread_id = spec.thread_id
        _check_id(thread_id)  # a spec's was; a door's copy of one may not have been
        owner = tenant or DEFAULT_TENANT
        key = tenant_run_id(owner, thread_id)
        end = queued_job(ThreadJobEnvelope(tenant=owner, thread_id=thread_id, run_id=run_id))
        for _ in range(TURN_ATTEMPTS):
            record = await self.store.record(key)
            current = record.get(ThreadField.CURRENT) or ""
            if current == run_id:
                return Turn(thread_id=key, run_id=run_id, taken=False)
            # A new run waits for the run that goes on, and for the runs queued before it.
            waits = bool(await self.store.queued(key))
            going = await self._going(current)
            policy = spec.double_texting or _policy(record.get(ThreadField.DOUBLE_TEXTING))
            if (going or waits) and policy in ("reject", "enqueue"):
                if policy == "reject":
                    raise ThreadBusyError(
                        f"thread {thread_id!r} has a run in progress ({current}): wait for "
                        "it to end, cancel it, or send with another double_texting policy"
                    )
                await self.store.enqueue(key, QueuedRun(run_id=run_id).model_dump_json())
                return Turn(thread_id=key, run_id=run_id, taken=False, queued=True, end_job=end)
            if going and policy == "interrupt":
                # The run ends at its step's end; the new one, first in line, starts from
                # its history then, that last step included.
                await self._interrupt(current, thread_id, policy)
                entry = QueuedRun(run_id=run_id).model_dump_json()
                await self.store.enqueue(key, entry, first=True)
                return Turn(
                    thread_id=key,
                    run_id=run_id,
                    taken=False,
                    queued=True,
                    replacing=True,
                    end_job=end,
                )
            if going:  # rollback
                await self._interrupt(current, thread_id, policy)
            discard = going and policy == "rollback"
            history = await self._history(key, thread_id, current, discard)
            turn = ThreadTurn(tenant=owner, run_id=run_id, expected=current, discard=discard)
            reply = await self.store.turn(key, turn)
            if reply.outcome == TurnOutcome.SAME:
                return Turn(thread_id=key, run_id=run_id, taken=False)
            if reply.outcome == TurnOutcome.TAKEN:
                await self.store.list_under(owner, thread_id)
                return Turn(thread_id=key, run_id=run_id, history=tuple(history), end_job=end)
        raise ThreadBusyError(f"thread {thread_id!r}: other runs keep taking its turn; try again")

    async def give_back(self, turn: Turn) -> None:
        if turn.queued:
            entry = QueuedRun(run_id=turn.run_id).model_dump_json()
            await self.store.drop_queued(turn.thread_id, entry)
        elif turn.taken:
            await self.store.release(turn.thread_id, ThreadRelease(run_id=turn.run_id))

    async def queued(self, spec: RunSpec, tenant: str | None, turn: Turn) -> None:
        assert spec.thread_id is not None
        await self.advance(tenant or DEFAULT_TENANT, spec.thread_id)

    async def advance(self, tenant: str, thread_id: str) -> str | None:
        """Start the run first in the thread's queue, unless the thread's run goes on (its
        end advances the queue then). Its id, or None. Idempotent: a queued run starts
        once (`start_queued`), and runs cancelled while they waited leave the queue."""
        key = tenant_run_id(tenant, thread_id)
        for _ in range(TURN_ATTEMPTS):
            current = (await self.store.record(key)).get(ThreadField.CURRENT) or ""
            if current and await self._status(current) == RunStatus.QUEUED:
                # Its turn was taken, and the start was lost (a worker died in between).
                await self._start(key, current)
                return current
            if await self._going(current):
                return None
            head = await self._head(key)
            if head is None:
                return None
            turn = ThreadTurn(tenant=tenant, run_id=_queued_id(head), expected=current, queued=head)
            reply = await self.store.turn(key, turn)
            if reply.outcome in (TurnOutcome.TAKEN, TurnOutcome.SAME):
                await self.store.list_under(tenant, thread_id)
                await self._start(key, turn.run_id)
                return turn.run_id
        return None

    async def _head(self, key: str) -> str | None:
        """The queued run first in line; runs that ended while they waited (cancelled)
        leave the queue on the way. None also while the first is not created yet: its
        creation advances the thread then (`queued`)."""
        for entry in await self.store.queued(key):
            status = await self._status(_queued_id(entry))
            if status == RunStatus.QUEUED:
                return entry
            if status == EXPIRED:
                return None
            await self.store.drop_queued(key, entry)
        return None

    async def _start(self, key: str, run_id: str) -> None:
        """Start a queued run that has the turn, from the history of the run before it."""
        runs = await self.store.runs(key)
        before = runs[: runs.index(run_id)] if run_id in runs else runs
        previous = before[-1] if before else ""
        history: builtins.list[Message] = []
        if previous and await self._status(previous) != EXPIRED:
            history = continued(
                await self.runs.conversation(previous), self.settings.thread_max_messages
            )
        await self.runs.start_queued(run_id, history)

    async def _interrupt(self, current: str, thread_id: str, policy: str) -> None:
        """Cancel the thread's run for a new message: at its step's end (interrupt), or
        now, its step in flight dropped (rollback: the run leaves the thread anyway)."""
        why = "discarded" if policy == "rollback" else "interrupted"
        with contextlib.suppress(RunNotFoundError):
            await self.runs.cancel(
                current,
                f"{why} by a new run on thread {thread_id}",
                at_step_end=policy == "interrupt",
            )

    async def _history(
        self, key: str, thread_id: str, current: str, discard: bool
    ) -> builtins.list[Message]:
        """What the next run starts from: the current run's conversation, or with
        `discard` (rollback) the one of the run before it."""
        if discard:
            runs = await self.store.runs(key)
            before = runs[:-1] if runs and runs[-1] == current else runs
            current = before[-1] if before else ""
        if not current or await self._status(current) == EXPIRED:
            return []
        if await self._going(current):
            raise ThreadBusyError(f"thread {thread_id!r} has a run in progress ({current})")
        return continued(await self.runs.conversation(current), self.settings.thread_max_messages)

    async def _going(self, run_id: str) -> bool:
        """Whether the run is still going (neither ended nor expired)."""
        if not run_id:
            return False
        status = await self._status(run_id)
        return status != EXPIRED and status not in TERMINAL_STATUSES

    async def _status(self, run_id: str) -> str:
        return (await self.runs.store.statuses([run_id])).get(run_id, EXPIRED)


def _policy(stored: str | None) -> DoubleTexting:
    """The thread's stored policy (a thread made by its first run has none: reject)."""
    return _POLICY.validate_python(stored or "reject")


def _queued_id(entry: str) -> str:
    return QueuedRun.model_validate_json(entry).run_id


def _thread_status(last_run_status: str | None) -> str:
    if last_run_status is None or last_run_status in TERMINAL_STATUSES:
        return IDLE
    if last_run_status == EXPIRED:
        return IDLE
    return last_run_status
