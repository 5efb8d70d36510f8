"""The embedded Redis (`memory://`) answers as Redis does on the paths it shortcuts:
commands without RESP, scripts compiled once, `redis.call` without the globals check,
blocked readers woken on their own loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fakeredis._socket._base import BaseFakeSocket
from fakeredis.commands_mixins.list_mixin import ListCommandsMixin
from redis.exceptions import ResponseError

from agentq.orchestrator.redis.connect import connect, forget_memory_server
from tests.support.calls import calls_to

pytestmark = pytest.mark.unit

URL = "memory://test-memory-redis"


@pytest.fixture(autouse=True)
async def fresh_server() -> AsyncIterator[None]:
    yield
    forget_memory_server(URL)


def client() -> Any:
    """A client of the test's embedded server (`Any`: redis-py types its async
    replies as `Awaitable[X] | X`)."""
    return connect(URL)


async def test_commands_and_replies_keep_their_types() -> None:
    r = client()
    await r.hset("h", mapping={"a": 1, "b": "x"})
    assert await r.hgetall("h") == {b"a": b"1", b"b": b"x"}
    assert await r.hincrby("h", "a", 2) == 3
    assert await r.set("s", "v", nx=True) is True
    assert await r.set("s", "w", nx=True) is None
    assert await r.zadd("z", {"m": 1.5}) == 1
    assert await r.zscore("z", "m") == 1.5
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await r.lpush("h", "x")
    await r.aclose()


async def test_a_transaction_and_a_pipeline() -> None:
    r = client()
    async with r.pipeline(transaction=True) as pipe:
        pipe.set("k", "1").incr("k").get("k")
        assert await pipe.execute() == [True, 2, b"2"]
    async with r.pipeline(transaction=False) as pipe:
        pipe.rpush("l", "a", "b").lrange("l", 0, -1)
        assert await pipe.execute() == [2, [b"a", b"b"]]
    await r.aclose()


async def test_a_script_runs_compiled_once_and_errors_read_as_redis_says() -> None:
    r = client()
    script = r.register_script(
        "redis.call('HSET', KEYS[1], 'n', ARGV[1]); return redis.call('HGET', KEYS[1], 'n')"
    )
    assert await script(keys=["h"], args=[7]) == b"7"
    assert await script(keys=["h"], args=[8]) == b"8"
    failing = r.register_script("return redis.call('INCR', KEYS[1])")
    await r.set("text", "abc")
    with pytest.raises(ResponseError, match="not an integer"):
        await failing(keys=["text"])
    caught = r.register_script("return redis.pcall('INCR', KEYS[1])")
    with pytest.raises(ResponseError, match="not an integer"):
        await caught(keys=["text"])
    broken = r.register_script("return redis.call('NOSUCHCOMMAND')")
    with pytest.raises(ResponseError, match=r"(?i)unknown command"):
        await broken(keys=[])
    await r.aclose()


async def test_a_script_with_a_shebang_runs_as_on_redis_7() -> None:
    """`#!lua flags=...` (as `runs/lua/admit.lua` opens) runs, its flags checked and its
    lines counted as Redis 7 does them (messages as a redis-server 7 words them)."""
    r = client()
    assert await r.register_script("#!lua\nreturn 1")(keys=[]) == 1
    flagged = r.register_script("#!lua flags=no-writes,allow-oom\nreturn ARGV[1]")
    assert await flagged(keys=[], args=["x"]) == b"x"
    with pytest.raises(ResponseError, match=r":2:"):
        await r.register_script("#!lua\nerror('x')")(keys=[])
    refused = {
        "#!python\nreturn 1": "Unexpected engine in script shebang: #!python",
        "#!lua flags=bogus\nreturn 1": "Unexpected flag in script shebang: bogus",
        "#!lua name=x\nreturn 1": "Unknown lua shebang option: name=x",
    }
    for source, message in refused.items():
        with pytest.raises(ResponseError, match=message):
            await r.register_script(source)(keys=[])
    await r.aclose()


async def test_a_blocked_reader_is_woken_by_a_push_from_another_connection() -> None:
    reader, writer = client(), client()
    popped = asyncio.create_task(reader.blpop(["wake"], timeout=5))
    await asyncio.sleep(0)  # lets it block first (if not, it finds the push at once)
    await writer.set("other", "1")  # a write elsewhere does not answer it
    await writer.lpush("wake", "1")
    assert await asyncio.wait_for(popped, 5) == (b"wake", b"1")
    assert await reader.blpop(["empty"], timeout=1) is None
    await reader.aclose()
    await writer.aclose()


async def test_commands_after_a_blocking_one_in_a_pipeline_wait_for_it() -> None:
    r, writer = client(), client()
    async with r.pipeline(transaction=False) as pipe:
        pipe.blpop(["later"], timeout=5).get("after")
        replies = asyncio.create_task(pipe.execute())
        await asyncio.sleep(0)
        await writer.set("after", "yes")
        await writer.lpush("later", "v")
        assert await asyncio.wait_for(replies, 5) == [(b"later", b"v"), b"yes"]
    await r.aclose()
    await writer.aclose()


async def test_commands_kept_behind_a_blocking_one_are_not_packed_as_resp() -> None:
    r, writer = client(), client()
    async with r.pipeline(transaction=False) as pipe:
        pipe.blpop(["later"], timeout=5).set("after", "1").blpop(["again"], timeout=5)
        pipe.incr("after")
        replies = asyncio.create_task(pipe.execute())
        await asyncio.sleep(0)
        with calls_to(BaseFakeSocket._extract_line) as counts:
            await writer.lpush("later", "v")
            await writer.lpush("again", "w")
            assert await asyncio.wait_for(replies, 5) == [
                (b"later", b"v"),
                True,
                (b"again", b"w"),
                2,
            ]
        assert counts == {"BaseFakeSocket._extract_line": 0}
    await r.aclose()
    await writer.aclose()


async def test_a_blocked_reader_looks_again_only_after_a_write_to_a_key_it_names() -> None:
    reader, streams, writer = client(), client(), client()
    popped = asyncio.create_task(reader.blpop(["wake"], timeout=5))
    read = asyncio.create_task(streams.xread({"events": "0-0"}, block=5000))
    await asyncio.sleep(0)  # both block first
    with calls_to(ListCommandsMixin._bpop_pass) as counts:
        for n in range(5):
            await writer.set("other", n)  # fakeredis woke both readers for each
            await writer.hset("h", "f", n)
            await asyncio.sleep(0)  # a woken reader looks again here
        await writer.xadd("events", {"n": "1"}, id="1-1")
        await writer.lpush("wake", "1")
        assert await asyncio.wait_for(popped, 5) == (b"wake", b"1")
        assert await asyncio.wait_for(read, 5) == [[b"events", [(b"1-1", {b"n": b"1"})]]]
    assert counts == {"ListCommandsMixin._bpop_pass": 1}  # once, woken by its push
    blocked = asyncio.create_task(reader.blpop(["never"], timeout=5))
    await asyncio.sleep(0)
    for listed in await writer.client_list():  # CLIENT UNBLOCK still wakes it
        await writer.client_unblock(int(listed["id"]))
    assert await asyncio.wait_for(blocked, 5) is None
    for r in (reader, streams, writer):
        await r.aclose()
