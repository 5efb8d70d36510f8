"""The client `connect` makes for a real Redis sends a command, and a pipeline that is not
a transaction, straight on its connection, with redis-py's behaviour kept: replies
through their response callbacks, error replies raised (a pipeline's in place, or the
first raised), a lost or late connection disconnected and given back to the pool,
transactions and WATCH as redis-py runs them. On a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.redis.lean_client import LeanConnectionPool, LeanPipeline, LeanRedis

pytestmark = pytest.mark.integration


async def test_a_real_redis_gets_the_lean_client_and_pool(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        assert isinstance(client, LeanRedis)
        assert isinstance(client.connection_pool, LeanConnectionPool)
        assert isinstance(client.pipeline(transaction=False), LeanPipeline)
    finally:
        await client.aclose()


async def test_replies_go_through_their_commands_callbacks(redis_url: str) -> None:
    client: Any = connect(redis_url)
    try:
        assert await client.set("k", "v") is True  # +OK -> True (SET's callback)
        assert await client.hset("h", mapping={"a": "1"}) == 1
        assert await client.hgetall("h") == {b"a": b"1"}  # a flat list -> a dict
        await client.zadd("z", {"m": 1.5})
        assert await client.zrange("z", 0, -1, withscores=True) == [(b"m", 1.5)]
        assert await client.get("missing") is None
        async with client.pipeline(transaction=False) as pipe:
            pipe.hgetall("h")
            pipe.zrange("z", 0, -1, withscores=True)
            pipe.set("k2", "v")
            assert await pipe.execute() == [{b"a": b"1"}, [(b"m", 1.5)], True]
    finally:
        await client.aclose()


async def test_an_error_reply_is_raised_and_the_connection_reads_on(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        await client.set("k", "v")
        with pytest.raises(ResponseError, match="not an integer"):
            await client.incr("k")
        async with client.pipeline(transaction=False) as pipe:
            pipe.incr("k")
            pipe.get("k")
            with pytest.raises(ResponseError, match=r"Command # 1 \(INCRBY k 1\) of pipeline"):
                await pipe.execute()
        assert await client.get("k") == b"v"
        assert len(client.connection_pool._in_use_connections) == 0  # given back
    finally:
        await client.aclose()


async def test_transactions_and_watch_run_as_redis_py_runs_them(redis_url: str) -> None:
    client: Any = connect(redis_url)
    other = connect(redis_url)
    try:
        async with client.pipeline(transaction=True) as pipe:
            pipe.set("k", "1")
            pipe.incr("k")
            assert await pipe.execute() == [True, 2]
        async with client.pipeline(transaction=True) as pipe:
            await pipe.watch("k")
            assert await pipe.get("k") == b"2"
            await other.set("k", "changed")
            pipe.multi()
            pipe.set("k", "mine")
            with pytest.raises(WatchError):
                await pipe.execute()
        assert await client.get("k") == b"changed"
    finally:
        await client.aclose()
        await other.aclose()


async def test_a_closed_connection_is_replaced(redis_url: str) -> None:
    client, killer = connect(redis_url), connect(redis_url)
    try:
        await client.set("k", "v")
        await killer.client_kill_filter(_type="normal", skipme=True)
        await asyncio.sleep(0.05)
        assert await client.get("k") == b"v"  # the pool saw it closed: reconnected
    finally:
        await client.aclose()
        await killer.aclose()


async def test_a_connection_lost_under_a_command_disconnects_and_is_given_back() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if b"GET" in data:
                writer.close()  # lost under the command
                return
            # The connection's setup and health check answered.
            writer.write(b"+OK\r\n" * data.count(b"CLIENT") + b"+PONG\r\n" * data.count(b"PING"))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client: Any = connect(f"redis://127.0.0.1:{port}/0")
    pool = client.connection_pool
    try:
        with pytest.raises(RedisConnectionError):
            await client.get("k")
        assert not pool._in_use_connections
        assert not pool._available_connections[-1].is_connected
        async with client.pipeline(transaction=False) as pipe:
            pipe.set("k", "v")
            pipe.get("k")
            with pytest.raises(RedisConnectionError):
                await pipe.execute()
        assert not pool._in_use_connections
    finally:
        await client.aclose()
        server.close()


async def test_a_silent_server_times_out_a_command_and_a_pipeline() -> None:
    """A server that accepts and never answers (past the handshake): each ends within its
    socket timeout, disconnected and given back to the pool."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            seen.append(data)
            # redis-py's CLIENT SETINFO at connect is answered; nothing after it is.
            writer.write(b"+OK\r\n" * data.count(b"CLIENT"))

    async with await asyncio.start_server(serve, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        settings = Settings(redis_socket_timeout_s=0.3, redis_health_check_s=0)
        client = connect(f"redis://127.0.0.1:{port}/0", settings)
        pool: Any = client.connection_pool
        pool.connection_kwargs["socket_timeout"] = 0.3  # (connect keeps at least 7 s)
        with pytest.raises(RedisTimeoutError, match="Timeout reading"):
            await client.get("k")
        assert any(b"GET" in data for data in seen)  # connected: the GET's read timed out
        assert not pool._in_use_connections
        assert not pool._available_connections[-1].is_connected
        pipe: Any = client.pipeline(transaction=False)
        pipe.get("k").get("k")
        with pytest.raises(RedisTimeoutError, match="Timeout reading"):
            await pipe.execute()
        assert not pool._in_use_connections
        await client.aclose()


async def test_an_idle_connection_is_handed_out_without_a_trip_through_the_loop(
    redis_url: str,
) -> None:
    """redis-py's pool takes its lock and awaits the connection's connect and check:
    an idle connected one that holds nothing is handed out at once, even while another
    caller holds the lock (connecting a connection of its own)."""
    client = connect(redis_url)
    await client.ping()
    pool: Any = client.connection_pool
    try:
        async with pool._lock:
            taking = pool.get_connection()
            with pytest.raises(StopIteration) as taken:
                taking.send(None)
        conn = taken.value.value
        assert conn.is_connected
        assert conn in pool._in_use_connections
        await pool.release(conn)
        # One with a reply left unread goes the base pool's way: read, reconnected.
        conn = await pool.get_connection()
        await conn.send_command("PING")
        await pool.release(conn)
        await asyncio.sleep(0.05)
        assert await client.get("missing") is None
    finally:
        await client.aclose()
