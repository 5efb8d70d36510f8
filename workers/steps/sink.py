"""Text and reasoning deltas from a streaming model, appended to the run's events in batches.

Reasoning (thinking, a reasoning summary) is shown live only: it is an event,
never part of the step's text. Each delta carries the delivery attempt of its
model step: a step re-delivered after its worker died streams its text again,
and a reader keeps only the deltas of the step's latest attempt (`agentq run`'s
live view does).

Each append is a round trip to Redis; coalescing the deltas that arrive within
a few milliseconds keeps a fast stream from costing one round trip per token.
"""

from __future__ import annotations

import time

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.events import EventType, event_json
from agentq.orchestrator.runs.store import RunStore


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
        # Pending deltas in arrival order, as (event type, text); a run of one type is one
        # entry, so the flushed events keep the order reasoning and text arrived in.
        self._buffer: list[tuple[EventType, str]] = []
        self._last_flush = time.monotonic()

    async def text_delta(self, delta: str) -> None:
        await self._add("text-delta", delta)

    async def reasoning_delta(self, delta: str) -> None:
        await self._add("reasoning-delta", delta)

    async def _add(self, kind: EventType, delta: str) -> None:
        if not delta:
            return
        if self._buffer and self._buffer[-1][0] == kind:
            self._buffer[-1] = (kind, self._buffer[-1][1] + delta)
        else:
            self._buffer.append((kind, delta))
        if time.monotonic() - self._last_flush >= self.flush_after_s:
            await self.flush()

    async def flush(self) -> None:
        if self._buffer:
            pending, self._buffer = self._buffer, []
            await self.store.emit(
                self.run_id,
                [
                    event_json(kind, self.run_id, step=self.step, attempt=self.attempt, delta=text)
                    for kind, text in pending
                ],
            )
        self._last_flush = time.monotonic()

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
