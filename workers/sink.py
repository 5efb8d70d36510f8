"""Text deltas from a streaming model, appended to the run's events in batches.

Each delta carries the delivery attempt of its model step: a step re-delivered
after its worker died streams its text again, and a reader keeps only the
deltas of the step's latest attempt (`agentq run`'s live view does).

Each append is a round trip to Redis; coalescing the deltas that arrive within
a few milliseconds keeps a fast stream from costing one round trip per token.
"""

from __future__ import annotations

import time

from agentq.orchestrator.errors import ProviderError
from agentq.orchestrator.events import event_json
from agentq.orchestrator.store import RunStore


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
        self._buffer: list[str] = []
        self._last_flush = time.monotonic()

    async def text_delta(self, delta: str) -> None:
        if not delta:
            return
        self._buffer.append(delta)
        if time.monotonic() - self._last_flush >= self.flush_after_s:
            await self.flush()

    async def flush(self) -> None:
        if self._buffer:
            text, self._buffer = "".join(self._buffer), []
            await self.store.emit(
                self.run_id,
                [
                    event_json(
                        "text-delta", self.run_id, step=self.step, attempt=self.attempt, delta=text
                    )
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
