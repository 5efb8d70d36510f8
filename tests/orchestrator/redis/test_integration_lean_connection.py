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


async def test_the_pools_check_of_an_idle_connection_does_not_wait_on_the_loop(
    redis_url: str,
) -> None:
    # redis-py's check read under a zero timeout: a trip through the event loop and an
    # exception for every command taken from the pool.
    client = connect(redis_url)
    await client.ping()
    conn = await client.connection_pool.get_connection()
    try:
        check = conn.can_read_destructive()
        with pytest.raises(StopIteration) as answered:
            check.send(None)
        assert answered.value.value is False
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()


async def test_a_connection_with_a_reply_left_unread_is_not_handed_out(redis_url: str) -> None:
    client = connect(redis_url)
    await client.set("k", "fresh")
    conn = await client.connection_pool.get_connection()
    await conn.send_command("GET", "k")
    await client.ping()  # a round trip on another connection: the reply is in by now
    await client.connection_pool.release(conn)
    try:
        await client.set("other", "1")
        assert await client.get("k") == b"fresh"
    finally:
        await client.aclose()


async def test_a_connection_the_server_closed_is_replaced(redis_url: str) -> None:
    client, killer = connect(redis_url), connect(redis_url)
    await client.set("k", "v")
    await killer.client_kill_filter(_type="normal", skipme=True)
    try:
        assert await client.get("k") == b"v"
    finally:
        await client.aclose()
        await killer.aclose()
