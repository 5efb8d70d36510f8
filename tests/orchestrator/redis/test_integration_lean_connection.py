"""A command on a connection `connect` made is written from its caller's task: no task of
its own per write (redis-py's `wait_for` made one on Python 3.11), on a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any

import pytest

from agentq.orchestrator.redis.connect import connect

pytestmark = pytest.mark.integration


async def test_a_command_makes_no_task_of_its_own(redis_url: str) -> None:
    client = connect(redis_url)
    await client.ping()  # connected: what follows is the commands alone
    made: list[str] = []

    def counting(
        loop: asyncio.AbstractEventLoop,
        coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any],
        **options: Any,
    ) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", repr(coro)))
        return asyncio.Task(coro, loop=loop, **options)

    loop = asyncio.get_running_loop()
    loop.set_task_factory(counting)
    try:
        await client.set("k", "v")
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            pipe.exists("k")
            assert await pipe.execute() == [b"v", 1]
    finally:
        loop.set_task_factory(None)
        await client.aclose()
    assert made == []
