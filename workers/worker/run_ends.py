"""The run ends a worker process hears: those of the runs whose jobs it holds.

A run's end is told (orchestrator/machine/lua/run_end.lua) on the channel of each process
holding one of the run's current jobs, which the claim's in-progress keys name, and on
the fleet's channel for the processes whose executors keep something for runs between
calls (sandbox sessions). A process subscribes before its first claim, so no end of a run
whose job it holds comes before it listens: a cancelled job is aborted at once, whatever
its age. A process that holds nothing of a run hears nothing of its end, so the notices
per run end do not grow with the fleet.

A notice missed while disconnected is covered as before: aborts by the fallback poll,
what executors keep by their own idle timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.workers.queue.liveness import OUTAGE


class RunEnds:
    """One process's subscription to the run ends it must hear, and its reader."""

    def __init__(
        self,
        redis: Redis,
        channels: Sequence[str],
        *,
        heard: Callable[[str], Awaitable[None]],
        retry_s: float,
    ) -> None:
        self._redis = redis
        self.channels = list(channels)
        self._heard = heard
        self._retry_s = retry_s
        self._pubsub: PubSub | None = None
        self.notices = 0  # run ends heard so far

    async def subscribe(self) -> None:
        """Listen from now on (the start calls it before the process claims a job)."""
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*self.channels)
        except BaseException:
            await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py's is untyped
            raise
        self._pubsub = pubsub

    async def run_forever(self) -> None:
        """Read the notices; after an outage, subscribe again."""
        while True:
            try:
                if self._pubsub is None:
                    await self.subscribe()
                    OUTAGE.succeeded()
                assert self._pubsub is not None
                await self._read(self._pubsub)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                await self.aclose()
                await asyncio.sleep(max(OUTAGE.failed(exc), self._retry_s))

    async def _read(self, pubsub: PubSub) -> None:
        while True:
            raise_if_cancel_requested()  # a cancel a timed read swallowed
            # A read bounded below the socket timeout: an idle channel is silence, not a
            # dead Redis (`listen()` would time out and log an outage every socket
            # timeout while no run ends).
            message = await pubsub.get_message(timeout=MAX_BLOCK_S)
            if message is None:
                continue
            data = message["data"]
            self.notices += 1
            await self._heard(data.decode() if isinstance(data, bytes) else str(data))

    async def aclose(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py's is untyped
