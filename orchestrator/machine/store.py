"""The Store base: what the run, call and batch stores do alike.

A machine's store applies a transition (its typed input as JSON to one Lua script,
the script's one typed reply parsed), maps Redis errors to agentq's at its boundary,
and reads its event stream a page at a time. What is a machine's own (its scripts,
its keys, its reads) is in its subclass: `RunStore`, `CallStore`, `BatchStore`.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from agentq.orchestrator.core.events import Event, parse_event, stream_seq
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.machine.transition import Transition, script_args
from agentq.orchestrator.redis.acks import acknowledged, acknowledged_many
from agentq.orchestrator.redis.faults import redis_errors_mapped

T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)

EVENT_PAGE = 500  # events read per round trip


def text(value: bytes | str) -> str:
    """A Redis reply as text (clients with and without `decode_responses`)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def texts(raw: Mapping[Any, Any]) -> dict[str, str]:
    """A hash as read (HGETALL) as text."""
    return {text(k): text(v) for k, v in raw.items()}


async def resolved(value: Awaitable[T] | T) -> T:
    """redis-py types its asyncio commands as `Awaitable[X] | X`; this narrows them."""
    if inspect.isawaitable(value):
        return await value
    return value


class Ride(Protocol):
    """How a caller sends a transition itself, with something of its own in the same
    round trip (a worker ends its job and claims the next ones behind the job's last
    transition: workers/worker/runtime.py). It returns the script's reply, or raises its
    error, as running the script alone would, and waits for the replicas as
    `acks.acknowledged` does."""

    async def __call__(self, script: AsyncScript, keys: list[str], args: list[Any]) -> Any: ...

    def takes_from(self, jobs: Iterable[QueuedJob]) -> str | None:
        """Asked before the transition is sent, with the jobs it may enqueue: the wake-up
        list of the queue the ride claims from in the same round trip, whose first ready
        job then pushes no token (enqueue.lua: `rider_wake`); None for none."""
        ...


class _Registered(dict[str, AsyncScript]):
    """A machine's scripts registered on one Redis, each when first sent: registering
    one builds its source (machine/scripts.py: `Scripts`) and its SHA1."""

    def __init__(self, redis: Redis, sources: Mapping[str, str]) -> None:
        super().__init__()
        self._redis = redis
        self._sources = sources

    def __missing__(self, name: str) -> AsyncScript:
        script = self[name] = self._redis.register_script(self._sources[name])
        return script


class Store:
    """A machine's scripts registered on one Redis, and the reads every machine has.

    `retention_s`, when the machine's records expire once ended, travels in every
    transition's input (the scripts read it as `A.retention_s`)."""

    def __init__(
        self, redis: Redis, scripts: Mapping[str, str], *, retention_s: int | None = None
    ) -> None:
        self.redis = redis
        self.retention_s = retention_s
        self._scripts = _Registered(redis, scripts)

    async def _send(
        self,
        script: str,
        keys: list[str],
        transition: Transition,
        reply: type[R],
        *,
        ride: Ride | None = None,
    ) -> R:
        """Apply one transition: its input as JSON to its script, sent in the caller's
        `ride` when it brings one; the script's reply parsed into `reply`."""
        args = script_args(transition, retention_s=self.retention_s)
        with redis_errors_mapped():
            if ride is not None:
                raw = await ride(self._scripts[script], keys, args)
            else:
                # Acknowledged once the replicas the deployment asks for have it.
                source = self._scripts[script]
                raw = await acknowledged(self.redis, source.sha, source.script, keys, args)
        return reply.model_validate_json(raw)

    async def _send_many(
        self, script: str, calls: list[tuple[list[str], Transition]], reply: type[R]
    ) -> list[R]:
        """Apply many transitions of one script in one round trip (one per Redis node of
        a cluster), acknowledged as `_send`'s are; their replies in order."""
        if not calls:
            return []
        source = self._scripts[script]
        sent = [
            (keys, script_args(transition, retention_s=self.retention_s))
            for keys, transition in calls
        ]
        with redis_errors_mapped():
            raw = await acknowledged_many(self.redis, source.sha, source.script, sent)
        return [reply.model_validate_json(r) for r in raw]

    async def _hash(self, key: str) -> dict[str, str]:
        """A hash of the machine's, as text ({} when there is none)."""
        with redis_errors_mapped():
            return texts(await resolved(self.redis.hgetall(key)))

    async def _record(self, key: str, missing: Exception) -> dict[str, str]:
        """A machine's record (its hash, as text); `missing` is raised when there is none
        (never created, or expired with its retention)."""
        fields = await self._hash(key)
        if not fields:
            raise missing
        return fields

    async def _pop_answer(self, key: str, timeout_s: float) -> str | None:
        """Block until an answer is pushed to `key` (or the timeout, whole seconds, passes)."""
        with redis_errors_mapped():
            popped = await resolved(self.redis.blpop([key], timeout=max(1, int(timeout_s))))
        return text(popped[1]) if popped else None

    async def _events(
        self,
        stream: str,
        after: int,
        *,
        follow: bool,
        block_ms: int,
        end_events: frozenset[str],
        ended: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[Event]:
        """A machine's events after sequence `after`, a page at a time. With `follow`, it
        waits for more until one of `end_events` (what follows that is a late report: it
        reads what is there then, without waiting) or until `ended()` says the machine
        ended before `after` (nothing more will come)."""
        last = after
        while True:
            page = await self.event_page(stream, last, follow=follow, block_ms=block_ms)
            for event in page:
                last = event.seq
                yield event
                if event.type in end_events:
                    follow = False
            if not follow and len(page) < EVENT_PAGE:
                return
            if follow and not page and await ended():
                return

    async def event_page(
        self, stream: str, last: int, *, follow: bool, block_ms: int
    ) -> list[Event]:
        """The next events of an event stream after sequence `last`: with `follow`,
        waiting up to `block_ms` for one; else what is there now. At most EVENT_PAGE."""
        with redis_errors_mapped():
            if follow:
                reply = await self.redis.xread(
                    {stream: f"0-{last}"}, count=EVENT_PAGE, block=block_ms
                )
                entries = reply[0][1] if reply else []
            else:
                entries = await self.redis.xrange(stream, min=f"(0-{last}", count=EVENT_PAGE)
        return await self._parsed(entries)

    async def event_pages(
        self, streams: Mapping[str, int], *, block_ms: int
    ) -> dict[str, list[Event]]:
        """The next events of several event streams (stream -> sequence read so far) in one
        blocking read: whatever any of them has, or {} once `block_ms` passes. The streams
        must share a hash slot on a cluster (one partition's)."""
        with redis_errors_mapped():
            reply = await self.redis.xread(
                {stream: f"0-{last}" for stream, last in streams.items()},
                count=EVENT_PAGE,
                block=block_ms,
            )
        return {text(stream): await self._parsed(entries) for stream, entries in reply or []}

    async def _parsed(self, entries: list[Any]) -> list[Event]:
        bodies = [
            (
                stream_seq(text(entry_id)),
                json.loads(fields[b"e"] if b"e" in fields else fields["e"]),
            )
            for entry_id, fields in entries
        ]
        complete = await self._with_outputs([body for _, body in bodies])
        return [parse_event(seq, body) for (seq, _), body in zip(bodies, complete, strict=True)]

    async def _with_outputs(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A page's event bodies made whole; a machine whose events refer to what it
        stores elsewhere (the run's results) reads it back here."""
        return bodies
