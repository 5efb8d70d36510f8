"""Connecting to Redis: a real server (`redis://…`) or the embedded one (`memory://`).

`memory://NAME` gives an in-process Redis (fakeredis with Lua). Every connection
to the same NAME in one process shares one server, which is how the embedded
mode runs client and workers on the same data.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from arq.connections import ArqRedis

from agentq.orchestrator.envelopes import deserialize, serialize
from agentq.orchestrator.sentinel import is_sentinel_url, sentinel_pool

_MEMORY_SERVERS: dict[str, Any] = {}


def is_memory_url(url: str) -> bool:
    return url.startswith("memory://")


def connect(url: str) -> ArqRedis:
    """An arq-capable Redis client for `url` (the pool connects lazily)."""
    if is_memory_url(url):
        import fakeredis

        name = url.removeprefix("memory://") or "default"
        server = _MEMORY_SERVERS.setdefault(name, fakeredis.FakeServer())
        pool = aioredis.ConnectionPool(
            connection_class=fakeredis.aioredis.FakeAsyncRedisConnection,
            server=server,
        )
    elif is_sentinel_url(url):
        pool = sentinel_pool(url)
    else:
        # BLPOP and XREAD block for up to a few seconds; the socket timeout must not be shorter.
        pool = aioredis.ConnectionPool.from_url(url, socket_timeout=None)
    return ArqRedis(
        pool_or_conn=pool,
        job_serializer=serialize,
        job_deserializer=deserialize,
    )


def forget_memory_server(url: str) -> None:
    """Drop an embedded server's data (tests and the embedded runtime's teardown)."""
    _MEMORY_SERVERS.pop(url.removeprefix("memory://") or "default", None)
