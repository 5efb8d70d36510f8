"""Following a run's events with heartbeats, a pace limit and a clean end on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from agentq.serve.feeds import Frame, RunFeeds

_END = object()
_draining = False


def start_draining() -> None:
    """The server was asked to exit: every open stream ends at its next look (within 1 s),
    so uvicorn's graceful shutdown completes their responses instead of cutting them."""
    global _draining
    _draining = True


def draining() -> bool:
    return _draining


async def follow(
    feeds: RunFeeds,
    run_id: str,
    after: int,
    *,
    idle_s: float,
    events_per_second: float | None = None,
) -> AsyncIterator[Frame | None]:
    """The run's events after `after` until its terminal event; None after each `idle_s`
    without one (a heartbeat, or a moment to look at the run). Ends when the server drains."""
    queue: asyncio.Queue[object] = asyncio.Queue(maxsize=1000)

    async def pump() -> None:
        try:
            async for frame in feeds.frames(run_id, after):
                await queue.put(frame)
            await queue.put(_END)
        except Exception as exc:  # handed to the reader, which raises it
            await queue.put(exc)

    task = asyncio.create_task(pump())
    pace = 1.0 / events_per_second if events_per_second else 0.0
    next_at = 0.0
    last_out = time.monotonic()
    try:
        while not draining():
            try:
                item = await asyncio.wait_for(queue.get(), timeout=min(idle_s, 1.0))
            except TimeoutError:
                if time.monotonic() - last_out >= idle_s:
                    last_out = time.monotonic()
                    yield None
                continue
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, Frame)
            if pace:
                now = time.monotonic()
                if next_at > now:
                    await asyncio.sleep(next_at - now)
                next_at = max(now, next_at) + pace
            last_out = time.monotonic()
            yield item
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
