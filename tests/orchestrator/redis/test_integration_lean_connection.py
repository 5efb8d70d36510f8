"""A command on a connection `connect` made costs no more asyncio work than it needs (no task
of its own per write, no deadline on a write the socket takes at once, no trip through
the event loop to take a connection from the pool), with redis-py's behaviour kept: a
late write, a reply left unread, a closed connection. On a real redis-server."""

from __future__ import annotations

import asyncio
import gc
import resource
import socket
from collections.abc import Coroutine, Generator
from typing import Any

import pytest
import redis.asyncio.connection as redis_connection
from redis.asyncio.connection import Connection
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.redis.lean import lean

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


async def test_a_connection_past_a_thousand_descriptors_is_checked(redis_url: str) -> None:
    """A process holding over a thousand sockets (`agentq serve` with its waiters) gets
    descriptors past select's FD_SETSIZE: the pool's check must still answer."""
    # Garbage of earlier tests (a client never closed) collected mid-test would free a
    # low descriptor for the connection: collected first.
    gc.collect()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 2048), hard), hard))
    filler = [socket.socket() for _ in range(1100)]
    client = connect(redis_url)
    try:
        await client.set("k", "v")
        conn = await client.connection_pool.get_connection()
        assert conn._writer.get_extra_info("socket").fileno() > 1024
        await client.connection_pool.release(conn)
        assert await client.get("k") == b"v"
    finally:
        await client.aclose()
        for held in filler:
            held.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_connection_the_server_closed_is_replaced(redis_url: str) -> None:
    client, killer = connect(redis_url), connect(redis_url)
    await client.set("k", "v")
    await killer.client_kill_filter(_type="normal", skipme=True)
    try:
        assert await client.get("k") == b"v"
    finally:
        await client.aclose()
        await killer.aclose()


async def test_a_write_the_socket_takes_at_once_arms_no_deadline(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = connect(redis_url)
    await client.ping()
    armed: list[float | None] = []
    timeout = asyncio.timeout

    def counting(delay: float | None) -> asyncio.Timeout:
        armed.append(delay)
        return timeout(delay)

    monkeypatch.setattr(asyncio, "timeout", counting)
    try:
        await client.set("k", "v")
        assert await client.get("k") == b"v"
    finally:
        await client.aclose()
    assert armed == []


async def test_a_write_the_peer_never_reads_is_late_as_redis_py_s_is() -> None:
    # A server that accepts and never reads: the socket's buffers fill, the write waits.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    made: Any = lean(Connection)  # typed as redis-py's abstract base
    conn = made(host="127.0.0.1", port=port, socket_timeout=0.2, lib_name=None, lib_version=None)
    try:
        await conn.connect()
        with pytest.raises(RedisTimeoutError, match="Timeout writing to socket"):
            await conn.send_packed_command(b"x" * (64 * 1024 * 1024), check_health=False)
        assert not conn.is_connected
    finally:
        await conn.disconnect()
        server.close()


def _counting_timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every timer the running loop arms from now on (`call_at`, which `call_later` and
    `asyncio.timeout` go through), and every `asyncio.timeout` redis-py's read arms."""
    armed: list[float] = []
    loop = asyncio.get_running_loop()
    call_at = loop.call_at

    def counting_call_at(when: float, callback: Any, *args: Any, **options: Any) -> Any:
        armed.append(when)
        return call_at(when, callback, *args, **options)

    timeout = vars(redis_connection)["async_timeout"]

    def counting_timeout(delay: float | None) -> Any:
        armed.append(delay or 0.0)
        return timeout(delay)

    monkeypatch.setattr(loop, "call_at", counting_call_at)
    monkeypatch.setattr(redis_connection, "async_timeout", counting_timeout)
    return armed


async def test_a_pipeline_s_replies_are_read_as_redis_py_reads_them(redis_url: str) -> None:
    """Redis answers a pipeline in one write: the replies after the first are whole in the
    buffer and taken at once; what they hold is handled as redis-py does (an error reply
    in its place, or raised)."""
    client = connect(redis_url)
    await client.set("k", "v")
    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            pipe.incr("k")  # not an integer: an error reply, between two good ones
            pipe.exists("k")
            got = await pipe.execute(raise_on_error=False)
        assert got[0] == b"v"
        assert got[2] == 1
        assert isinstance(got[1], ResponseError)
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k")
            pipe.incr("k")
            with pytest.raises(ResponseError, match="Command # 2"):
                await pipe.execute()
        assert await client.get("k") == b"v"  # the connection reads on, in step
    finally:
        await client.aclose()


async def test_reads_waited_for_share_one_timer_per_connection(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py arms a timer (and cancels it) around every reply it reads; a lean
    connection's reads share one, armed again only once it fired (after a socket
    timeout) with no read waiting."""
    client = connect(redis_url)
    await client.set("k", "v")  # connected, its first read's timer armed
    armed = _counting_timers(monkeypatch)
    try:
        for _ in range(20):
            assert await client.get("k") == b"v"
            async with client.pipeline(transaction=False) as pipe:
                pipe.get("k")
                pipe.exists("k")
                assert await pipe.execute() == [b"v", 1]
    finally:
        await client.aclose()
    assert armed == []


async def _silent_after(answers: int) -> tuple[asyncio.Server, int]:
    """A server that answers its first `answers` commands with +PONG, then reads and
    never answers again."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        left = answers
        while await reader.read(65536):
            if left > 0:
                left -= 1
                writer.write(b"+PONG\r\n")

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("answered_first", [0, 1, 3])
async def test_a_reply_that_never_comes_is_late_as_redis_py_s_is(answered_first: int) -> None:
    """The read deadline holds for the read that waits, whether the connection's timer
    was armed for it or for an earlier read's deadline."""
    server, port = await _silent_after(answered_first)
    made: Any = lean(Connection)  # typed as redis-py's abstract base
    conn = made(host="127.0.0.1", port=port, socket_timeout=0.3, lib_name=None, lib_version=None)
    try:
        await conn.connect()
        for _ in range(answered_first):
            await conn.send_command("PING", check_health=False)
            assert await conn.read_response() == b"PONG"
            await asyncio.sleep(0.1)  # the next read starts after this one's deadline would
        await conn.send_command("PING", check_health=False)
        with pytest.raises(RedisTimeoutError, match=r"Timeout reading from 127\.0\.0\.1"):
            await conn.read_response()
        assert not conn.is_connected
    finally:
        await conn.disconnect()
        server.close()


async def test_a_read_cancelled_disconnects_and_its_deadline_fails_nothing_later(
    redis_url: str,
) -> None:
    client = connect(redis_url)
    await client.set("k", "v")
    conn: Any = await client.connection_pool.get_connection()
    try:
        await conn.send_command("BLPOP", "no-such-list", 1)
        read = asyncio.ensure_future(conn.read_response())
        await asyncio.sleep(0.05)
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        assert not conn.is_connected  # a reply may still come: the connection is dropped
        await conn.connect()
        await conn.send_command("GET", "k")
        assert await conn.read_response() == b"v"
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()


async def test_a_reply_the_buffer_holds_raises_a_connection_error_and_disconnects(
    redis_url: str,
) -> None:
    client = connect(redis_url)
    await client.ping()
    conn: Any = await client.connection_pool.get_connection()
    try:
        # A reply hiredis parses into a connection error (redis-py's parse_error).
        conn._parser._reader.feed(b"-LOADING Redis is loading the dataset in memory\r\n")
        with pytest.raises(BusyLoadingError):
            await conn.read_response()
        assert not conn.is_connected
    finally:
        await client.connection_pool.release(conn)
        await client.aclose()


async def test_a_reset_connections_error_is_read_from_its_closed_stream() -> None:
    """A connection reset under a read: the error the transport set on its stream's closed
    future is read there as the connection is dropped, so asyncio never logs it as "Future
    exception was never retrieved" (it did, once, in a bench's run: a garbage-collected
    cycle freed the future before its protocol)."""
    import struct

    from redis.exceptions import ConnectionError as RedisConnectionError

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The connection's own commands (CLIENT SETINFO) answered; then the GET: a reset
        # (RST), not a close.
        while (data := await reader.read(1000)) and b"GET" not in data:
            writer.write(b"+OK\r\n" * data.count(b"*"))
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(reset, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        made: Any = lean(Connection)  # typed as redis-py's abstract base
        conn = made(host="127.0.0.1", port=port, socket_timeout=5)
        await conn.connect()
        assert conn._writer is not None
        # Held, as a cycle through the error's traceback holds it until a collection: a
        # protocol freed at once would read its closed future's error itself (__del__).
        protocol = conn._writer._protocol
        closed: asyncio.Future[None] = protocol._closed
        await conn.send_packed_command(conn.pack_command("GET", "x"))
        with pytest.raises(RedisConnectionError):
            await conn.read_response()
        assert closed.done()
        assert not closed._log_traceback  # read: nothing to log
    finally:
        server.close()
        await server.wait_closed()
