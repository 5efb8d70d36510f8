"""Text, reasoning and tool-input deltas from a streaming model, appended to the run's
events in batches.

Reasoning (thinking, a reasoning summary) is shown live only: it is an event,
never part of the step's text. A call's arguments stream as `tool-input-start` and
`tool-input-delta` events before the step commits its `tool-call` event. Each delta
carries the delivery attempt of its model step: a step re-delivered after its worker
died streams again, and a reader keeps only the deltas of the step's latest attempt
(`agentq run`'s live view does).

Each append is a round trip to Redis; coalescing the deltas that arrive within
a few milliseconds keeps a fast stream from costing one round trip per token. What
a stream sent before it stalls (a model thinking over a call's next argument) is
written when its window ends, not held until the next delta. The last window of a
step is not appended on its own: the step's commit takes it (`take`) and writes it
before the step's own events, in the same transition.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import EventType, event_json
from agentq.orchestrator.runs.store import RunStore


@dataclass
class _Pending:
    """One event to write; a run of deltas of one kind (and one call) is one."""

    kind: EventType
    delta: str = ""
    call_id: str | None = None  # the call a tool-input event is about
    tool_name: str | None = None

    def extends(self, kind: EventType, call_id: str | None) -> bool:
        return kind == self.kind and call_id == self.call_id and kind != "tool-input-start"


class DeltaEvents:
    def __init__(
        self,
        store: RunStore,
        run_id: str,
        step: int,
        *,
        attempt: int = 1,
        flush_after_s: float = 0.02,
    ) -> None:
        self.store = store
        self.attempt = attempt
        self.run_id = run_id
        self.step = step
        self.flush_after_s = flush_after_s
        # Pending events in arrival order, so the flushed ones keep the order reasoning,
        # text and tool input arrived in.
        self._buffer: list[_Pending] = []
        self._last_flush = time.monotonic()
        # One flush at a time, so batches reach the stream in the order they were cut.
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._late: asyncio.Task[None] | None = None

    async def text_delta(self, delta: str) -> None:
        await self._add("text-delta", delta)

    async def reasoning_delta(self, delta: str) -> None:
        await self._add("reasoning-delta", delta)

    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        self._buffer.append(_Pending("tool-input-start", call_id=call_id, tool_name=tool_name))
        await self._due()

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        await self._add("tool-input-delta", delta, call_id)

    async def _add(self, kind: EventType, delta: str, call_id: str | None = None) -> None:
        if not delta:
            return
        if self._buffer and self._buffer[-1].extends(kind, call_id):
            self._buffer[-1].delta += delta
        else:
            self._buffer.append(_Pending(kind, delta, call_id))
        await self._due()

    async def _due(self) -> None:
        if time.monotonic() - self._last_flush >= self.flush_after_s:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self.flush_after_s, self._flush_late
            )

    def _flush_late(self) -> None:
        self._timer = None
        self._late = asyncio.ensure_future(self._flush_quietly())

    async def _flush_quietly(self) -> None:
        # A failed write puts its events back: the step's own flush writes them or raises.
        with contextlib.suppress(Exception):
            await self.flush()

    async def take(self) -> list[str]:
        """The events not written yet, for the caller to write in its own transition
        (ahead of its events); they are the caller's to write from now on."""
        async with self._lock:
            self._cancel_timer()
            pending, self._buffer = self._buffer, []
            self._last_flush = time.monotonic()
        return [self._event(p) for p in pending]

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def flush(self) -> None:
        async with self._lock:
            self._cancel_timer()
            if self._buffer:
                pending, self._buffer = self._buffer, []
                try:
                    await self.store.emit(self.run_id, [self._event(p) for p in pending])
                except BaseException:
                    self._buffer[:0] = pending
                    raise
            self._last_flush = time.monotonic()

    def _event(self, p: _Pending) -> str:
        run, step, attempt = self.run_id, self.step, self.attempt
        if p.kind == "tool-input-start":
            return event_json(
                "tool-input-start",
                run,
                step=step,
                attempt=attempt,
                tool_call_id=p.call_id,
                tool_name=p.tool_name,
            )
        if p.kind == "tool-input-delta":
            return event_json(
                "tool-input-delta",
                run,
                step=step,
                attempt=attempt,
                tool_call_id=p.call_id,
                delta=p.delta,
            )
        return event_json(p.kind, run, step=step, attempt=attempt, delta=p.delta)

    async def retrying(
        self, error: ProviderError, delay_s: float, attempt: int, max_attempts: int
    ) -> None:
        """A failed model call is about to be retried: say so in the run's events."""
        await self.flush()
        # The status only: a provider's message may echo the key, and events are stored.
        reason = str(error.status) if error.status is not None else "a connection error"
        await self.store.emit(
            self.run_id,
            [
                event_json(
                    "model-retry",
                    self.run_id,
                    step=self.step,
                    reason=reason,
                    delay_s=round(delay_s, 2),
                    attempt=attempt,
                    max_attempts=max_attempts,
                )
            ],
        )
