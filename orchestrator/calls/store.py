"""The store of tool calls without a run: each change is one atomic Lua transition.

The counterpart of `RunStore` for `client.calls.call` (state declared in
`orchestrator/calls/state.py`, scripts `lua/call_*.lua` after `lua/call_prelude.lua`).
Redis errors leave it only as `InfrastructureError`, as from the run store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from redis.asyncio import Redis

from agentq.orchestrator.calls.state import (
    CALL_INPUTS,
    CallField,
    CallReply,
    CallTransitionInput,
    CancelCall,
    ClaimToolCall,
    CreateCall,
    EmitCall,
    FinishCall,
    RedriveCallJob,
)
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Store
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.state import lua_constants
from agentq.orchestrator.runs.state.inputs import ANSWER_TTL_S, DEFAULT_RETENTION_S

# The events that end a call's stream: its result, or its error.
CALL_END_EVENTS = frozenset({"tool-result", "tool-error"})


# Each call transition's full source: generated constants, the call prelude, its file.
_SCRIPTS = scripts.load(
    "agentq.orchestrator.calls",
    (m.script for m in CALL_INPUTS),
    constants=lua_constants.render({"CF": CallField}),
    prelude="call_prelude",
)


class CallNotFoundError(RunNotFoundError):
    """No call with that id (never created, or expired with its retention)."""


class CallStore(Store):
    retention_s: int

    def __init__(self, redis: Redis, *, retention_s: int = DEFAULT_RETENTION_S) -> None:
        super().__init__(redis, _SCRIPTS, retention_s=retention_s)

    async def _apply(self, transition: CallTransitionInput) -> CallReply:
        return await self._send(
            transition.script, keys.call_keys(transition.call_id), transition, CallReply
        )

    async def create(self, transition: CreateCall) -> CallReply:
        return await self._apply(transition)

    async def claim(self, transition: ClaimToolCall) -> CallReply:
        return await self._apply(transition)

    async def finish(self, transition: FinishCall) -> CallReply:
        return await self._apply(transition)

    async def cancel(self, transition: CancelCall) -> CallReply:
        return await self._apply(transition)

    async def redrive(self, transition: RedriveCallJob) -> CallReply:
        return await self._apply(transition)

    async def emit(self, call_id: str, events: Sequence[str]) -> int:
        if not events:
            return 0
        return (await self._apply(EmitCall(call_id=call_id, events=list(events)))).seq

    async def post_answer(self, call_id: str, request_id: str, answer: str) -> None:
        """Hand the answer to an input request to the call's worker (which BLPOPs it)."""
        key = keys.call_answer(call_id, request_id)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.lpush(key, answer)
                pipe.expire(key, ANSWER_TTL_S)
                await pipe.execute()

    async def wait_answer(self, call_id: str, request_id: str, timeout_s: float) -> str | None:
        return await self._pop_answer(keys.call_answer(call_id, request_id), timeout_s)

    async def read(self, call_id: str) -> dict[str, str]:
        """The call's hash; CallNotFoundError when there is none."""
        return await self._record(
            keys.call_meta(call_id), CallNotFoundError(f"no tool call with id {call_id!r}")
        )

    def events(
        self, call_id: str, after: int = 0, *, follow: bool = True, block_ms: int = 5000
    ) -> AsyncIterator[Event]:
        """The call's events after `after`; with `follow`, until its result's event."""

        async def ended() -> bool:  # (or gone: CallNotFoundError)
            return CallField.RESULT in await self.read(call_id)

        return self._events(
            keys.call_events(call_id),
            after,
            follow=follow,
            block_ms=block_ms,
            end_events=CALL_END_EVENTS,
            ended=ended,
        )
