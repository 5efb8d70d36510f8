"""Helpers of the component tests: the embedded runtime (in-memory Redis, in-process
workers) and waiting on events (spec builders: tests/support/specs.py).

`RecordingScripted` wraps the scripted provider: it answers exactly like it,
reports a deterministic usage per step, and records each `ModelRequest` with
the arq job payload that carried the model step (read from Redis while the job
runs, before arq deletes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.events import Event
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import connect, forget_memory_server
from agentq.orchestrator.runs.store import RunStore
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse
from agentq.workers.models.scripted import ScriptedProvider
from agentq.workers.tools.function_tools import FunctionTool
from agentq.workers.worker.embedded import embedded

# A short fallback poll: cancellation (arq's abort set) is noticed on a poll.
FAST = Settings(idle_poll_s=0.1, lease_s=5.0)
TIMEOUT_S = 10.0


def usage_for(step: int) -> Usage:
    """What the recording provider reports for a step: every field apart, so a total that
    drops or mixes one shows."""
    return Usage(
        input_tokens=100 + step,
        output_tokens=10 + step,
        total_tokens=110 + 2 * step,
        cached_input_tokens=60 + step,
        cache_write_tokens=20 + step,
        reasoning_tokens=3 + step,
    )


@dataclass
class ModelCall:
    step: int
    request: ModelRequest
    job_payload: bytes | None


@dataclass
class ModelLog:
    redis: Redis | None = None
    calls: list[ModelCall] = field(default_factory=list)

    def request(self, step: int) -> ModelRequest:
        (found,) = [c.request for c in self.calls if c.step == step]
        return found


class RecordingScripted:
    def __init__(self, log: ModelLog) -> None:
        self.log = log
        self.inner = ScriptedProvider()

    async def _job_payload(self, step: int) -> bytes | None:
        if self.log.redis is None:
            return None
        async for key in self.log.redis.scan_iter(match=f"arq:job:aq:*:{step}:model"):
            payload: bytes | None = await self.log.redis.get(key)
            return payload
        return None

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        payload = await self._job_payload(request.step)
        self.log.calls.append(ModelCall(request.step, request, payload))
        response = await self.inner.generate(request, sink)
        return response.model_copy(update={"usage": usage_for(request.step)})


class Embedded:
    """`async with Embedded(tools, log) as client:` the embedded runtime, its model recorded."""

    def __init__(self, tools: Sequence[FunctionTool], log: ModelLog) -> None:
        self._cm = embedded(tools=tools, settings=FAST)
        self._log = log

    async def __aenter__(self) -> Client:
        client = await self._cm.__aenter__()
        self._log.redis = client.redis
        return client

    async def __aexit__(self, *exc: Any) -> None:
        self._log.redis = None
        await self._cm.__aexit__(*exc)


async def all_events(client: Client, run_id: str, after: int | None = None) -> list[Event]:
    return [e async for e in client.runs.events(run_id, after=after)]


def call_ids(events: Sequence[Event], type_: str) -> list[str]:
    """The tool call ids of the events of one type, in stream order."""
    ids = [getattr(e, "tool_call_id", None) for e in events if e.type == type_]
    assert None not in ids, ids
    return [i for i in ids if i is not None]


async def wait_event(
    client: Client, run_id: str, match: Callable[[Event], bool], timeout_s: float = TIMEOUT_S
) -> Event:
    """The first event (from the start) that matches, waiting for it if need be."""

    async def find() -> Event:
        async for event in client.runs.events(run_id, follow=True):
            if match(event):
                return event
        raise AssertionError(f"the run ended without the awaited event: {event.model_dump()}")

    return await asyncio.wait_for(find(), timeout_s)


def of_type(type_: str, **fields: Any) -> Callable[[Event], bool]:
    def match(event: Event) -> bool:
        body = event.model_dump()
        return event.type == type_ and all(body.get(k) == v for k, v in fields.items())

    return match


async def until(flag: asyncio.Event, timeout_s: float = TIMEOUT_S) -> None:
    await asyncio.wait_for(flag.wait(), timeout_s)


def tool_message_parts(messages: Sequence[Any], index: int = -1) -> list[Any]:
    """The result parts of the index-th tool message of a history."""
    tool_msgs = [m for m in messages if m.role == "tool"]
    return list(tool_msgs[index].content)


@contextlib.asynccontextmanager
async def memory_run_store(name: str) -> AsyncIterator[RunStore]:
    """A RunStore on an in-memory Redis of its own (`memory://NAME-<uuid>`), forgotten
    after: the real transitions without a redis-server."""
    url = f"memory://{name}-{uuid.uuid4().hex}"
    redis: Redis = connect(url)
    try:
        yield RunStore(redis)
    finally:
        await redis.aclose()
        forget_memory_server(url)
