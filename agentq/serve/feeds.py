"""One blocking Redis read for every run (or call) this process follows, fanned out.

A hundred browsers on one run cost one JSON encoding per event, not a hundred; two
thousand `?wait=` requests on two thousand runs cost one connection, not two thousand:
the runs followed are read together (`Runs.event_pages`, one XREAD per read group), so
the Redis connections a process holds for following do not grow with its streams. Calls
without a run (`ToolCalls`) are followed the same way, by a `CallFeeds` of their own.

A stream joins in three moves that leave no gap and no duplicate: subscribe to the run's
feed (which reads from the run's seq when it was made, no later than now), catch up from
Redis after its own position, then take the feed's events, skipping seqs it already has.
A stream that falls too far behind is dropped from the feed and catches up from Redis
again. A waiter only needs the end: it waits on the feed's `ended`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from agentq.orchestrator.calls.api import ToolCalls
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.events import TERMINAL, Event, wire_json
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.runs.result import TERMINAL_STATUSES

BACKLOG = 5000  # events a stream may lag behind its feed before it re-reads Redis
BLOCK_MS = 5000  # one read's wait; a run joining meanwhile wakes the reader at once


@dataclass(frozen=True)
class Frame:
    """An event with its JSON encoded once, for every stream that sends it."""

    event: Event
    json: str

    @classmethod
    def of(cls, event: Event) -> Frame:
        return cls(event, wire_json(event))


_END = object()


class Source(Protocol):
    """What is followed: runs, or calls without a run."""

    async def start(self, id_: str) -> int | None:
        """The seq a new feed reads after; None when it has ended (its stream is whole)."""
        ...

    def read_group(self, id_: str) -> int: ...

    async def event_pages(
        self, positions: Mapping[str, int], *, block_ms: int
    ) -> dict[str, list[Event]]: ...

    def history(self, id_: str, after: int) -> AsyncIterator[Event]:
        """What Redis holds after `after`, without waiting."""
        ...

    def ends(self, event: Event) -> bool: ...


class _RunSource:
    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        self.read_group = runs.read_group
        self.event_pages = runs.event_pages

    async def start(self, id_: str) -> int | None:
        head = await self.runs.status(id_)
        return None if head.status in TERMINAL_STATUSES else head.seq

    def history(self, id_: str, after: int) -> AsyncIterator[Event]:
        return self.runs.events(id_, after=after)

    def ends(self, event: Event) -> bool:
        return isinstance(event, TERMINAL)


class _CallSource:
    def __init__(self, calls: ToolCalls) -> None:
        self.calls = calls
        self.read_group = calls.read_group
        self.event_pages = calls.event_pages
        self.ends = calls.ends_stream

    async def start(self, id_: str) -> int | None:
        # A call's stream is short: its feed reads it from the start.
        return None if await self.calls.result(id_) is not None else 0

    def history(self, id_: str, after: int) -> AsyncIterator[Event]:
        return self.calls.events(id_, after, follow=False)


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[object] = field(default_factory=lambda: asyncio.Queue(BACKLOG))
    lagged: bool = False


@dataclass(eq=False)
class _Feed:
    id: str
    last: int  # the seq read so far
    subscribers: set[_Subscriber] = field(default_factory=set)
    waiters: int = 0
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def idle(self) -> bool:
        return not self.subscribers and not self.waiters


@dataclass(eq=False)
class _Reader:
    """The read of one group: the feeds it reads, and a wake-up when one joins."""

    feeds: dict[str, _Feed] = field(default_factory=dict)
    joined: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Feeds:
    def __init__(self, source: Source, *, retry_s: float, block_ms: int = BLOCK_MS) -> None:
        self.source = source
        self.retry_s = retry_s  # how long a read retries through a Redis outage
        self.block_ms = block_ms
        self._feeds: dict[str, _Feed] = {}
        self._readers: dict[int, _Reader] = {}

    async def _join(self, id_: str) -> _Feed | None:
        """The feed of `id_` (made if needed); None when it has ended: its stream in
        Redis is then complete. RunNotFoundError (CallNotFoundError) when there is none."""
        feed = self._feeds.get(id_)
        if feed is not None:
            return feed
        start = await self.source.start(id_)
        if start is None:
            return None
        feed = self._feeds.get(id_)  # another stream may have made it meanwhile
        if feed is None:
            feed = _Feed(id_, start)
            self._feeds[id_] = feed
            group = self.source.read_group(id_)
            reader = self._readers.get(group)
            if reader is None:
                reader = self._readers[group] = _Reader()
                reader.task = asyncio.create_task(self._read(group, reader))
            reader.feeds[id_] = feed
            reader.joined.set()
        return feed

    def _leave(self, feed: _Feed) -> None:
        """Forget an idle feed. Its reader drops it at its next read (no wake-up: a
        wake-up costs a reconnect, and one stream more in a read costs nothing)."""
        if not feed.idle() or self._feeds.get(feed.id) is not feed:
            return
        del self._feeds[feed.id]
        for reader in self._readers.values():
            if reader.feeds.get(feed.id) is feed:
                del reader.feeds[feed.id]

    async def _read(self, group: int, reader: _Reader) -> None:
        outage_since: float | None = None
        try:
            while reader.feeds:
                reader.joined.clear()
                try:
                    pages = await self._next(reader)
                except Exception as exc:
                    now = time.monotonic()
                    outage_since = outage_since or now
                    if now - outage_since > self.retry_s:
                        self._fail(reader, exc)
                        return
                    await asyncio.sleep(min(1.0, 0.1 + (now - outage_since) / 10))
                    continue
                outage_since = None
                if pages is not None:
                    self._deliver(reader, pages)
        finally:
            if self._readers.get(group) is reader:
                del self._readers[group]

    async def _next(self, reader: _Reader) -> dict[str, list[Event]] | None:
        """One read of every feed of the reader; None when a run joined first (the read
        is cancelled and made again with it)."""
        positions = {id_: feed.last for id_, feed in reader.feeds.items()}
        read = asyncio.ensure_future(self.source.event_pages(positions, block_ms=self.block_ms))
        woken = asyncio.ensure_future(reader.joined.wait())
        try:
            await asyncio.wait({read, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not read.done():
                read.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await read
        return None if read.cancelled() else read.result()

    def _deliver(self, reader: _Reader, pages: dict[str, list[Event]]) -> None:
        for id_, events in pages.items():
            feed = reader.feeds.get(id_)
            if feed is None:
                continue
            for event in events:
                feed.last = event.seq
                self._broadcast(feed, Frame.of(event))
                if self.source.ends(event):
                    self._end(reader, feed, _END)
                    break

    def _fail(self, reader: _Reader, exc: Exception) -> None:
        for feed in list(reader.feeds.values()):
            self._end(reader, feed, exc)

    def _end(self, reader: _Reader, feed: _Feed, item: object) -> None:
        self._broadcast(feed, item)
        feed.ended.set()
        del reader.feeds[feed.id]
        if self._feeds.get(feed.id) is feed:
            del self._feeds[feed.id]

    @staticmethod
    def _broadcast(feed: _Feed, item: object) -> None:
        for subscriber in feed.subscribers:
            if subscriber.lagged:
                continue
            try:
                subscriber.queue.put_nowait(item)
            except asyncio.QueueFull:
                subscriber.lagged = True

    async def frames(self, id_: str, after: int) -> AsyncIterator[Frame]:
        """The run's events after `after` until its terminal one (RunNotFoundError first
        when there is no such run)."""
        last = after
        while True:
            feed = await self._join(id_)
            subscriber = _Subscriber()
            if feed is not None:
                feed.subscribers.add(subscriber)
            try:
                async for event in self.source.history(id_, last):
                    yield Frame.of(event)
                    last = event.seq
                    if self.source.ends(event):
                        return
                if feed is None:
                    return  # ended before we joined: what Redis holds is all there is
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
                    if self.source.ends(item.event):
                        return
            finally:
                if feed is not None:
                    feed.subscribers.discard(subscriber)
                    self._leave(feed)

    async def events(self, id_: str, after: int = 0) -> AsyncIterator[Event]:
        """`frames`, as events."""
        async for frame in self.frames(id_, after):
            yield frame.event

    async def wait_ended(self, id_: str, timeout_s: float) -> None:
        """Return once the run has ended or `timeout_s` has passed, whichever is first,
        holding no connection meanwhile (RunNotFoundError when there is no such run)."""
        feed = await self._join(id_)
        if feed is None:
            return
        feed.waiters += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(feed.ended.wait(), timeout_s)
        finally:
            feed.waiters -= 1
            self._leave(feed)

    async def aclose(self) -> None:
        for reader in list(self._readers.values()):
            if reader.task is not None:
                reader.task.cancel()


class RunFeeds(Feeds):
    def __init__(self, client: Client, *, block_ms: int = BLOCK_MS) -> None:
        super().__init__(
            _RunSource(client.runs), retry_s=client.settings.redis_retry_s, block_ms=block_ms
        )


class CallFeeds(Feeds):
    def __init__(self, client: Client, *, block_ms: int = BLOCK_MS) -> None:
        super().__init__(
            _CallSource(client.calls), retry_s=client.settings.redis_retry_s, block_ms=block_ms
        )
