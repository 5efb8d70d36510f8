"""Where a tool call is kept: its run's step, or its own hash (a call without a run).

Whatever executes a call (a worker's `tool_call` or `call` job, a remote service's
lease) claims it, reads it, emits its events, asks its caller for input and records
its result through its `CallHome`, so none of it branches on where the call lives.
`RunCallHome` keeps it in the run's step (`RunStore`: the result joins the step and may
move the run on); `OwnCallHome` in its own hash (`CallStore`, `client.calls.call`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentq.orchestrator import tracing
from agentq.orchestrator.calls.catalogue import claim_call_args, finish_call_args
from agentq.orchestrator.calls.state import CallField
from agentq.orchestrator.calls.store import CallNotFoundError, CallStore
from agentq.orchestrator.core.envelopes import JobEnvelope, JobKind
from agentq.orchestrator.core.events import EventType, event_json
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message, ToolResultPart
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.loop.plan import CallPlan
from agentq.orchestrator.machine.store import Ride
from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.runs.definitions import stored_tool
from agentq.orchestrator.runs.ended import run_ended
from agentq.orchestrator.runs.state import ClaimCall, InputStatus, MetaField, Outcome
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import (
    enqueued_job_ids,
    input_answer_args,
    input_request_args,
    result_args,
)
from agentq.orchestrator.tools import ToolDef

log = logging.getLogger("agentq.worker")


@dataclass(frozen=True)
class ClaimedCall:
    """A call claimed for execution (queued -> running); `tool` is None when its run
    does not define the tool the model named."""

    call: CallPlan
    tool: ToolDef | None


@dataclass(frozen=True)
class HeldTools:
    """A run's tools as a worker already read them (for a model step of the run), under
    the run's stamp: a claim of one of its calls then reads no tool
    (orchestrator/runs/lua/claim_call.lua)."""

    stamp: str
    tools: Sequence[ToolDef]

    def named(self, name: str) -> ToolDef | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class InputAsk:
    """One question to a running call's caller (an elicitation, or a sampling request)."""

    request_id: str
    tool_name: str
    message: str
    input: dict[str, Any]
    deadline_at: float  # the call's own deadline
    park_timeout_s: float | None = None
    kind: str | None = None  # "sampling"; None: an elicitation

    def parked_wait_s(self) -> float:
        """How long a run parked on the question waits: until the call's deadline, and
        no longer than a parked call may wait."""
        remaining_s = max(0.0, self.deadline_at - time.time())
        if self.park_timeout_s is None:
            return remaining_s
        return min(remaining_s, self.park_timeout_s)


@dataclass(frozen=True)
class CallOwner:
    """Whose the call is: its tenant, and its run's metadata (none for a call without a
    run)."""

    tenant: str = DEFAULT_TENANT
    metadata: dict[str, Any] = field(default_factory=dict)


class CallHome(Protocol):
    """The state of one tool call, wherever it is kept."""

    # The id of the event stream the call's events go to (its run's, or its own).
    stream_id: str
    # The step of the call's run; None for a call without a run.
    step: int | None
    call_id: str
    # Whether the caller hears the tool's logs and answers its sampling requests (an
    # MCP gateway's client does; a run's driver does not).
    relays_logs_and_sampling: bool

    async def claim(self, attempt: int) -> ClaimedCall | None:
        """Claim the call; None when it is not to be executed (it has its result, its
        run ended, or it is not there)."""
        ...

    async def call(self) -> CallPlan | None:
        """The call's record (its name and input), or None when it is gone."""
        ...

    async def tool(self, name: str) -> ToolDef | None: ...

    async def owner(self) -> CallOwner:
        """Whose the call is (read when asked: most calls never are)."""
        ...

    async def messages(self) -> list[Message]:
        """The history the call was made in (its run's, up to the call's step); empty
        for a call without a run."""
        ...

    async def emit(self, type_: EventType, **fields: Any) -> bool:
        """Emit an event of the call; False when its home has ended."""
        ...

    async def ask(self, ask: InputAsk) -> str | None:
        """Ask the caller; its raw answer, or None (not asked, or no answer in time)."""
        ...

    async def record(self, result: ToolResultPart, *, ride: Ride | None = None) -> bool:
        """Record the call's write-once result; False when it had one already. `ride`:
        the executing job's end, sent with the transition where the home's can carry it
        (a run's `record_result`)."""
        ...


class RunCallHome:
    """A call of a run's step: its result joins the step (and may move the run on)."""

    relays_logs_and_sampling = False

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        step: int,
        call_id: str,
        held_tools: HeldTools | None = None,
    ) -> None:
        self.store = store
        self.stream_id = run_id
        self.step: int | None = step
        self._step = step
        self.call_id = call_id
        self._held_tools = held_tools

    async def claim(self, attempt: int) -> ClaimedCall | None:
        claim = await self.store.claim_call(
            ClaimCall(
                run_id=self.stream_id,
                step=self._step,
                call_id=self.call_id,
                event=self._event("tool-running", tool_call_id=self.call_id, attempt=attempt),
                known_stamp=self._held_tools.stamp if self._held_tools else None,
            )
        )
        if claim.outcome != Outcome.CLAIMED or claim.call is None:
            log.debug("tool call %s/%d/%s skipped: %s", *self._where(), claim.outcome)
            return None
        call = CallPlan.model_validate_json(claim.call)
        if claim.tool_held and self._held_tools is not None:
            return ClaimedCall(call, self._held_tools.named(call.name))
        return ClaimedCall(call, stored_tool(claim.tool) if claim.tool else None)

    async def call(self) -> CallPlan | None:
        call_json, _ = await self.store.call_state(self.stream_id, self._step, self.call_id)
        return CallPlan.model_validate_json(call_json) if call_json else None

    async def tool(self, name: str) -> ToolDef | None:
        raw = await self.store.tool_def(self.stream_id, name)
        return stored_tool(raw) if raw else None

    async def owner(self) -> CallOwner:
        meta = await self.store.meta(self.stream_id)
        spec = json.loads(meta.get(MetaField.SPEC) or "{}")
        return CallOwner(meta.get("tenant", DEFAULT_TENANT), spec.get("metadata") or {})

    async def messages(self) -> list[Message]:
        # Length 0 reads to the list's end: every message, as of the call's step.
        raw = await self.store.history(self.stream_id, self._step, 0, 0)
        return [MESSAGE_ADAPTER.validate_json(m) for m in raw]

    async def emit(self, type_: EventType, **fields: Any) -> bool:
        return bool(await self.store.emit(self.stream_id, [self._event(type_, **fields)]))

    async def ask(self, ask: InputAsk) -> str | None:
        """Park the run on the question until it is answered, the park timeout passes
        or the call's deadline does (recorded as expired)."""
        requested = await self.store.input_request(
            input_request_args(
                self.stream_id,
                self._step,
                call_id=self.call_id,
                tool_name=ask.tool_name,
                request_id=ask.request_id,
                message=ask.message,
                schema=ask.input,
            ),
        )
        if requested.outcome != Outcome.PARKED:
            return None
        wait_s = ask.parked_wait_s()
        raw = await _answer(self.store.wait_answer, self.stream_id, ask.request_id, wait_s)
        if raw is None:
            await self.store.input_answer(
                input_answer_args(
                    self.stream_id,
                    self._step,
                    request_id=ask.request_id,
                    call_id=self.call_id,
                    outcome=InputStatus.EXPIRED,
                ),
            )
        return raw

    async def record(self, result: ToolResultPart, *, ride: Ride | None = None) -> bool:
        hops = tracing.Hops(self.stream_id)
        args = hops.stamp(result_args(self.stream_id, self._step, result))
        reply = await self.store.record_result(args, ride=ride)
        hops.sent(enqueued_job_ids(args, reply.outcome))
        if reply.outcome in (Outcome.FINISHED, Outcome.FAILED):
            await run_ended(self.store, self.stream_id)
        return reply.outcome in (Outcome.RECORDED, Outcome.CONTINUED, Outcome.FINISHED)

    def _event(self, type_: EventType, **fields: Any) -> str:
        return event_json(type_, self.stream_id, step=self._step, **fields)

    def _where(self) -> tuple[str, int, str]:
        return self.stream_id, self._step, self.call_id


class OwnCallHome:
    """A call without a run, in its own hash: its result is the call's, write-once (a
    cancellation may have written it)."""

    relays_logs_and_sampling = True
    step: int | None = None

    def __init__(self, calls: CallStore, call_id: str) -> None:
        self.calls = calls
        self.stream_id = call_id
        self.call_id = call_id

    async def claim(self, attempt: int) -> ClaimedCall | None:
        claim = await self.calls.claim(claim_call_args(self.call_id, attempt))
        if claim.outcome != Outcome.CLAIMED or claim.call is None or claim.tool is None:
            log.debug("call %s skipped: %s", self.call_id, claim.outcome)
            return None
        return ClaimedCall(CallPlan.model_validate_json(claim.call), stored_tool(claim.tool))

    async def call(self) -> CallPlan | None:
        raw = await self._field(CallField.CALL)
        return CallPlan.model_validate_json(raw) if raw else None

    async def tool(self, name: str) -> ToolDef | None:
        raw = await self._field(CallField.TOOL)
        return stored_tool(raw) if raw else None

    async def owner(self) -> CallOwner:
        return CallOwner(await self._field(CallField.TENANT) or DEFAULT_TENANT)

    async def messages(self) -> list[Message]:
        return []

    async def emit(self, type_: EventType, **fields: Any) -> bool:
        event = event_json(type_, self.call_id, **fields)
        return bool(await self.calls.emit(self.call_id, [event]))

    async def ask(self, ask: InputAsk) -> str | None:
        """A `tool-input-request` event on the call's stream, then the answer its caller
        posts (`ToolCalls.answer`; the MCP gateway asks its own client) until the
        call's deadline."""
        request: dict[str, Any] = {"message": ask.message, "input": ask.input}
        if ask.kind is not None:
            request = {"kind": ask.kind, **request}
        asked = await self.emit(
            "tool-input-request",
            tool_call_id=self.call_id,
            tool_name=ask.tool_name,
            request_id=ask.request_id,
            **request,
        )
        if not asked:
            return None  # the call has ended
        wait_s = max(0.0, ask.deadline_at - time.time())
        return await _answer(self.calls.wait_answer, self.call_id, ask.request_id, wait_s)

    async def record(self, result: ToolResultPart, *, ride: Ride | None = None) -> bool:
        # The call's transition carries no job end: the worker ends the job after it.
        recorded = await self.calls.finish(finish_call_args(self.call_id, result))
        log.debug("call %s: %s", self.call_id, recorded.outcome)
        return recorded.outcome == Outcome.RECORDED

    async def _field(self, field: str) -> str | None:
        try:
            return (await self.calls.read(self.call_id)).get(field)
        except CallNotFoundError:
            return None


class _WaitAnswer(Protocol):
    async def __call__(self, id_: str, request_id: str, timeout_s: float, /) -> str | None: ...


async def _answer(wait: _WaitAnswer, id_: str, request_id: str, wait_s: float) -> str | None:
    """The posted answer, read in slices: a blocking read longer than the socket
    timeout would look like a stalled Redis."""
    raw = None
    until = time.time() + wait_s
    while raw is None and time.time() < until:
        raw = await wait(id_, request_id, min(MAX_BLOCK_S, max(0.0, until - time.time())))
    return raw


def call_home(envelope: JobEnvelope, runs: RunStore, calls: CallStore) -> CallHome:
    """The home of the call a job executes: its own for a `call` job, else its run's."""
    if envelope.kind == JobKind.CALL:
        return OwnCallHome(calls, envelope.run_id)
    return RunCallHome(runs, envelope.run_id, envelope.step, envelope.call_id or "")
