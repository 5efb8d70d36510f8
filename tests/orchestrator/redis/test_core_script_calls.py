"""A script's `redis.call` and `cjson` on the embedded Redis (`script_calls`) answer as
fakeredis's own path does: every command agentq's scripts call, run both ways on the same
keys with the same arguments (errors, missing keys, wrong types, numbers from Lua
included), gives the same reply as Lua sees it, the same error and the same keys after;
and it takes the planned path, not fakeredis's per-call dispatch and globals check."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from fakeredis._commands import Signature
from fakeredis._socket._base import BaseFakeSocket
from fakeredis.commands_mixins import scripting_mixin
from redis.exceptions import WatchError

from agentq.orchestrator.redis.connect import connect, forget_memory_server
from tests.support.calls import calls_to

pytestmark = pytest.mark.unit

URL = "memory://test-script-calls"
ROOT = Path(__file__).resolve().parents[3]
_CALLED = re.compile(r"""redis\.p?call\(\s*['"]([A-Za-z]+)['"]""")

# A reply as Lua holds it, written out: types, `false` for a nil, {ok=...} and {err=...}.
SHOW = """
local function show(v)
  local t = type(v)
  if t == 'table' then
    local parts = {}
    for _, k in ipairs({'ok', 'double', 'map'}) do
      if v[k] ~= nil then parts[#parts + 1] = k .. '=' .. show(v[k]) end
    end
    -- fakeredis's own pcall gives its message as a userdata, Redis (and agentq) a string
    if v.err ~= nil then parts[#parts + 1] = 'err=' .. tostring(v.err) end
    for i = 1, #v do parts[#parts + 1] = show(v[i]) end
    return '{' .. table.concat(parts, ',') .. '}'
  end
  return t .. ':' .. tostring(v)
end
"""
# ARGV: how to call ('call' or 'pcall'), the command, its arguments; '#x' is the number x.
CALL = (
    SHOW
    + """
local args = {}
for i = 3, #ARGV do
  local a = ARGV[i]
  if string.sub(a, 1, 1) == '#' then a = tonumber(string.sub(a, 2)) end
  args[#args + 1] = a
end
return show(redis[ARGV[1]](ARGV[2], unpack(args)))
"""
)
DECODE = SHOW + "return {show(cjson.decode(ARGV[1])), cjson.encode(cjson.decode(ARGV[1]))}"
KEYS = ["h", "z", "l", "s", "st", "x", "n", "missing", "expired"]
VALUES = ["a", "1", "0", "-1", "2.5", "inf", "x", "NX", "WITHSCORES", "1-1", "#1", "#2.5"]


def script_commands() -> list[str]:
    """Every command a `.lua` file of agentq's calls by name."""
    found = {
        name.upper()
        for path in (ROOT / "orchestrator").rglob("*.lua")
        for name in _CALLED.findall(path.read_text())
    }
    return sorted(found)


def cases(command: str) -> Iterator[list[str]]:
    """A command's argument lists: each key alone and with one value, then a seeded
    sample of longer ones."""
    for key in KEYS:
        yield [key]
        for value in VALUES:
            yield [key, value]
    draw = random.Random(command)
    for _ in range(120):
        key = draw.choice(KEYS)
        yield [key, *draw.choices(VALUES + KEYS, k=draw.randint(2, 5))]
    yield []


async def seed(r: Any) -> None:
    await r.flushall()
    await r.hset("h", mapping={"a": "1", "b": "x", "f": "1.5"})
    await r.zadd("z", {"a": 1, "x": 2.5})
    await r.rpush("l", "a", "b", "1")
    await r.set("s", "5")
    await r.sadd("st", "a", "b")
    await r.xadd("x", {"f": "v"}, id="1-1")
    await r.set("n", "abc")
    await r.set("expired", "v", px=1)
    await asyncio.sleep(0.005)  # past its expiry: stored still, dropped when next read


async def keyspace(r: Any) -> dict[bytes, Any]:
    """Every key's type, value and whether it expires."""
    kept: dict[bytes, Any] = {}
    for key in sorted(await r.keys("*")):
        kind = (await r.type(key)).decode()
        read = {
            "hash": r.hgetall,
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "list": lambda k: r.lrange(k, 0, -1),
            "string": r.get,
            "set": r.smembers,
            "stream": lambda k: r.xrange(k),
        }[kind]
        kept[key] = (kind, await read(key), await r.ttl(key) > 0)
    return kept


async def answer(r: Any, script: Any, args: list[str]) -> tuple[str, str]:
    try:
        return "reply", (await script(keys=[], args=args)).decode()
    except Exception as exc:  # a ResponseError, or a TypeError out of fakeredis's function
        return type(exc).__name__, str(exc)


@pytest.fixture
async def both() -> AsyncIterator[tuple[Any, Any]]:
    stock = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    ours = connect(URL)
    yield stock, ours
    await stock.aclose()
    await ours.aclose()
    forget_memory_server(URL)


def test_the_scripts_commands_are_found() -> None:
    found = script_commands()
    assert {"HGET", "HSET", "HMGET", "ZADD", "ZREM", "DEL", "RPUSH", "XADD", "TIME"} <= set(found)


@pytest.mark.parametrize("command", script_commands())
async def test_a_command_answers_as_fakeredis_does(command: str, both: tuple[Any, Any]) -> None:
    stock, ours = both
    for r in both:
        await seed(r)
    scripts = [r.register_script(CALL) for r in both]
    for args in cases(command):
        for how in ("call", "pcall"):
            replies = [
                await answer(r, s, [how, command, *args])
                for r, s in zip(both, scripts, strict=True)
            ]
            if command == "TIME":  # the clock moved between the two
                replies = [(kind, re.sub(r"\d+", "N", value)) for kind, value in replies]
            assert replies[0] == replies[1], (how, command, args)
    assert await keyspace(stock) == await keyspace(ours)


# What agentq sends as a client beyond its scripts' commands (blocking: test_core_memory_redis).
CLIENT_COMMANDS = [
    "EVALSHA", "EXISTS", "EXPIRE", "GET", "HGETALL", "HSETNX", "MGET", "OBJECT", "PING",
    "SCRIPT", "SET", "TYPE", "XRANGE", "XREAD", "ZMSCORE", "ZRANGEBYSCORE", "ZREMRANGEBYSCORE",
]  # fmt: skip


async def sent(r: Any, args: list[str]) -> tuple[str, str]:
    try:
        return "reply", repr(await r.execute_command(*args))
    except Exception as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("command", sorted({*script_commands(), *CLIENT_COMMANDS}))
async def test_a_command_a_client_sends_answers_as_fakeredis_does(
    command: str, both: tuple[Any, Any]
) -> None:
    stock, ours = both
    for r in both:
        await seed(r)
    for args in cases(command):
        replies = [await sent(r, [command, *args]) for r in both]
        if command == "TIME":
            replies = [(kind, re.sub(r"\d+", "N", value)) for kind, value in replies]
        assert replies[0] == replies[1], (command, args)
    assert await keyspace(stock) == await keyspace(ours)


async def test_an_unknown_command_or_a_bad_argument_reads_the_same(
    both: tuple[Any, Any],
) -> None:
    odd = [
        "return redis.call('NOSUCHCOMMAND', 'k')",
        "return redis.call('HGET', 'h', {})",
        "return redis.call('HGET', 'h', true)",
        "return redis.call('HGET')",
        "return redis.pcall('HSET', 'h')",
        "return redis.call('EVAL', 'return 1', 0)",
        "return redis.call('hget', 'h', 'a')",
        "return redis.call('OBJECT', 'ENCODING', 'h')",
        "return redis.call('TYPE', 'h')",
        "return redis.call('SET', 'k', 'v')",
        "return redis.call('ZSCORE', 'z', 'a')",
        "return redis.call('HINCRBYFLOAT', 'h', 'f', 1)",
        "return cjson.decode()",
        "return cjson.decode('[1]', 2)",
        "return cjson.encode()",
    ]
    for r in both:
        await seed(r)
    for source in odd:
        replies = [await answer(r, r.register_script(source), []) for r in both]
        assert replies[0] == replies[1], source


@pytest.mark.parametrize(
    "text",
    [
        '{"id":"c1","input":{},"n":null,"t":60.0,"ok":true,"list":[1,2.5,"x",[],{}]}',
        '[1, -0, -0.0, 1e400, 12345678901234567890123, 1.0000000000000002, "\\u00e9\\n"]',
        '"plain"',
        "17",
        "null",
        "{}",
        "[]",
        '{"a": 1, "a": 2}',
        "NaN",
        "[1,]",
        "{",
        "",
        '"\\ud800"',
        "\xff",
        "\ufeff[1]",
        "[\x001\x00]",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "[0.12345678901234567890123, 1e-400, 1.5E3, -0.0, 1e308, 1e309]",
        '  {"a" : {"b":[{"c":null}, "\\u0000\\u20ac\\ud83d\\ude00"]}}  ',
        '{"a":1}x',
    ],
)
async def test_cjson_reads_and_writes_as_fakeredis_does(text: str, both: tuple[Any, Any]) -> None:
    replies = [await answer(r, r.register_script(DECODE), [text]) for r in both]
    assert replies[0] == replies[1]


async def test_a_scripts_calls_skip_fakeredis_per_call_dispatch_and_checks() -> None:
    r = connect(URL)
    try:
        script = r.register_script(
            "redis.call('HSET', KEYS[1], 'n', ARGV[1])"
            " local read = redis.call('HMGET', KEYS[1], 'n', 'gone')"
            " local doc = cjson.decode(ARGV[2])"
            " redis.call('ZADD', KEYS[2], doc.score, 'm')"
            " return cjson.encode({read[1], doc.score})"
        )
        await script(keys=["h", "z"], args=[1, '{"score": 2}'])  # the first call plans
        with calls_to(
            BaseFakeSocket._run_command,
            Signature.apply,
            scripting_mixin._check_for_lua_globals,
            json.loads,
        ) as counts:
            assert await script(keys=["h", "z"], args=[7, '{"score": 3}']) == b'["7",3]'
        assert counts == {
            "BaseFakeSocket._run_command": 0,  # the EVALSHA itself, planned too
            "Signature.apply": 0,
            "_check_for_lua_globals": 0,  # walked in Lua, once after the script
            "loads": 0,  # cjson.decode's JSON read by orjson
        }
    finally:
        await r.aclose()
        forget_memory_server(URL)


@pytest.mark.parametrize(
    "source",
    ["leaked = 1 return 1", "_G[5] = true return 1", "function helper() end return 1"],
)
async def test_a_global_a_script_leaves_reads_as_fakeredis_says(
    source: str, both: tuple[Any, Any]
) -> None:
    for r in both:
        await seed(r)
    for script in (source, "local kept = 2 return kept", "_G.redis = redis return 3"):
        # fakeredis keeps the global: every later script on that server fails too
        replies = [await answer(r, r.register_script(script), []) for r in both]
        assert replies[0] == replies[1], script


async def test_a_pcall_error_is_a_string_that_reads_its_own_error() -> None:
    r = connect(URL)
    try:
        await r.set("text", "abc")
        script = r.register_script(
            "local r = redis.pcall(ARGV[1], KEYS[1]) return {type(r.err), r.err}"
        )
        for _ in range(50):  # fakeredis's userdata read an earlier error's text by now
            assert await script(keys=["text"], args=["INCR"]) == [
                b"string",
                b"ERR value is not an integer or out of range",
            ]
            assert await script(keys=["text"], args=["HGET"]) == [
                b"string",
                b"ERR Wrong number of args calling Redis command from script",
            ]
    finally:
        await r.aclose()
        forget_memory_server(URL)


# Writes whose write-back does more than store a value: a key's expiry set, kept, cleared
# or past; a value emptied; a hash field's own expiry; a key another client watches.
WRITES = [
    ["SET", "k", "v", "PX", "#100000"],
    ["SET", "short", "v", "PX", "#1"],
    ["SET", "k", "w", "KEEPTTL"],
    ["HSET", "k2", "a", "1"],
    ["PEXPIRE", "k2", "#100000"],
    ["HSET", "k2", "b", "2"],
    ["SET", "k", "plain"],
    ["SET", "expired", "again"],
    ["HSET", "fields", "a", "1", "b", "2"],
    ["HPEXPIRE", "fields", "#1", "FIELDS", "#1", "a"],
    ["HGET", "fields", "b"],
    ["HSET", "fields", "c", "3"],
    ["HPEXPIRE", "fields", "#100000", "FIELDS", "#1", "c"],
    ["HSET", "fields", "d", "4"],
    ["HPERSIST", "fields", "FIELDS", "#1", "c"],  # 1: c's expiry outlived the write-back
    ["HDEL", "fields", "b"],
    ["RPUSH", "l2", "a"],
    ["LPOP", "l2"],
    ["SADD", "st", "c"],
    ["SREM", "st", "a", "b", "c"],
    ["DEL", "h"],
    ["HINCRBY", "h", "n", "#2"],
    ["DBSIZE"],  # counts what the expiry schedule has dropped ("short", "expired"'s)
]


# A 1 ms expiry answers 1 (set) or 2 (already past: the machine stalled a millisecond
# inside the command, as a loaded one does); either way the field is gone by the next.
ONE_MS_FIELD = ["HPEXPIRE", "fields", "#1", "FIELDS", "#1", "a"]


def settled(args: list[str], reply: tuple[str, str]) -> tuple[str, str]:
    """The reply, with a 1 ms field expiry's "set" and "past" told as one."""
    return ("reply", "set or past") if args == ONE_MS_FIELD and reply[0] == "reply" else reply


async def expiries(r: Any) -> dict[bytes, int]:
    """Each key's expiry: -1 (none) or 1 (set), as the clocks of the two differ."""
    return {key: min(await r.pttl(key), 1) for key in sorted(await r.keys("*"))}


async def test_a_scripts_writes_leave_keys_watches_and_events_as_fakeredis_does(
    both: tuple[Any, Any],
) -> None:
    watched: list[bool] = []
    events: list[list[Any]] = []
    for r in both:
        await seed(r)
        await r.config_set("notify-keyspace-events", "KEA")
        listener = r.pubsub()
        await listener.psubscribe("__key*__:*")
        watcher = r.pipeline()
        await watcher.watch("k2")
        script = r.register_script(CALL)
        replies = []
        for args in WRITES:
            replies.append(settled(args, await answer(r, script, ["call", *args])))
            await asyncio.sleep(0.003)  # past a 1 ms expiry
        watcher.multi()
        watcher.exists("k2")
        try:
            await watcher.execute()
            watched.append(False)
        except WatchError:  # a script wrote the watched key
            watched.append(True)
        seen = []
        while (message := await listener.get_message(timeout=0.05)) is not None:
            if message["type"] == "pmessage":
                seen.append((message["channel"], message["data"]))
        events.append(seen)
        await listener.aclose()
        r.replies = replies
        r.after = (await keyspace(r), await expiries(r), await r.hgetall("fields"))
    stock, ours = both
    assert stock.replies == ours.replies
    assert stock.after == ours.after
    assert watched == [True, True]
    assert events[0] == events[1]
    assert events[0]  # keyspace events were published
