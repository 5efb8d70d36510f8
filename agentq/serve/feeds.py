"""One Redis reader per followed run in this process, fanned out to all its streams.

A hundred browsers on one run cost one XREAD and one JSON encoding per event, not a
hundred. A stream joins in three moves that leave no gap and no duplicate: subscribe to
the run's feed (which started reading at a seq no later than now), catch up from Redis
after its own position, then take the feed's events, skipping seqs it already has. A
stream that falls too far behind is dropped from the feed and catches up from Redis again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.events import TERMINAL, Event, wire_json

BACKLOG = 5000  # events a stream may lag behind its feed before it re-reads Redis


@dataclass(frozen=True)
class Frame:
    """An event with its JSON encoded once, for every stream that sends it."""

    event: Event
    json: str

    @classmethod
    def of(cls, event: Event) -> Frame:
        return cls(event, wire_json(event))


_END = object()


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[object] = field(default_factory=lambda: asyncio.Queue(BACKLOG))
    lagged: bool = False


@dataclass(eq=False)
class _Feed:
    start: int
    subscribers: set[_Subscriber] = field(default_factory=set)
    task: asyncio.Task[None] | None = None


class RunFeeds:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._feeds: dict[str, _Feed] = {}

    async def _feed(self, run_id: str) -> _Feed:
        feed = self._feeds.get(run_id)
        if feed is None:
            start = (await self.client.runs.status(run_id)).seq
            feed = self._feeds.get(run_id)  # another stream may have started it meanwhile
            if feed is None:
                feed = _Feed(start)
                self._feeds[run_id] = feed
                feed.task = asyncio.create_task(self._pump(run_id, feed))
        return feed

    async def _pump(self, run_id: str, feed: _Feed) -> None:
        try:
            async for event in self.client.runs.events(run_id, after=feed.start, follow=True):
                self._broadcast(feed, Frame.of(event))
            self._broadcast(feed, _END)
        except Exception as exc:  # each stream raises it
            self._broadcast(feed, exc)
        finally:
            if self._feeds.get(run_id) is feed:
                del self._feeds[run_id]

    @staticmethod
    def _broadcast(feed: _Feed, item: object) -> None:
        for subscriber in feed.subscribers:
            if subscriber.lagged:
                continue
            try:
                subscriber.queue.put_nowait(item)
            except asyncio.QueueFull:
                subscriber.lagged = True

    async def frames(self, run_id: str, after: int) -> AsyncIterator[Frame]:
        """The run's events after `after` until its terminal one (RunNotFoundError first
        when there is no such run)."""
        last = after
        while True:
            feed = await self._feed(run_id)
            subscriber = _Subscriber()
            feed.subscribers.add(subscriber)
            try:
                async for event in self.client.runs.events(run_id, after=last):
                    yield Frame.of(event)
                    last = event.seq
                    if isinstance(event, TERMINAL):
                        return
                while not subscriber.lagged:
                    item = await subscriber.queue.get()
                    if item is _END:
                        return
                    if isinstance(item, Exception):
                        raise item
                    assert isinstance(item, Frame)
                    if item.event.seq <= last:
                        continue
                    yield item
                    last = item.event.seq
                    if isinstance(item.event, TERMINAL):
                        return
            finally:
                feed.subscribers.discard(subscriber)
                if not feed.subscribers and feed.task is not None:
                    # Out of the table before any await, so no stream joins a dying feed.
                    if self._feeds.get(run_id) is feed:
                        del self._feeds[run_id]
                    feed.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await feed.task

    async def aclose(self) -> None:
        for feed in list(self._feeds.values()):
            if feed.task is not None:
                feed.task.cancel()
