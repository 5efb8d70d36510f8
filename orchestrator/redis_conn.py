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
from agentq.orchestrator.settings import Settings

# Blocking reads (BLPOP, XREAD BLOCK) ask the server to wait at most this long, so a
# reply is always due well within the socket timeout and silence means a stalled Redis.
MAX_BLOCK_S = 5.0

_MEMORY_SERVERS: dict[str, Any] = {}


def is_memory_url(url: str) -> bool:
    return url.startswith("memory://")


def connect(url: str, settings: Settings | None = None) -> ArqRedis:
    """An arq-capable Redis client for `url` (the pool connects lazily).

    A real server gets connect and socket timeouts and health checks, so a Redis
    that accepts TCP and never answers costs a bounded wait, never a hang."""
    if is_memory_url(url):
        import fakeredis

        from agentq.orchestrator.memory_redis import MemoryConnection

        name = url.removeprefix("memory://") or "default"
        server = _MEMORY_SERVERS.setdefault(name, fakeredis.FakeServer())
        pool = aioredis.ConnectionPool(
            connection_class=MemoryConnection,
            server=server,
        )
    else:
        conf = settings or Settings()
        timeouts: dict[str, Any] = {
            "socket_connect_timeout": conf.redis_connect_timeout_s,
            "socket_timeout": max(conf.redis_socket_timeout_s, MAX_BLOCK_S + 2.0),
            "health_check_interval": conf.redis_health_check_s,
            "socket_keepalive": True,
        }
        if is_sentinel_url(url):
            pool = sentinel_pool(url, **timeouts)
        else:
            pool = aioredis.ConnectionPool.from_url(url, **timeouts)
    return ArqRedis(
        pool_or_conn=pool,
        job_serializer=serialize,
        job_deserializer=deserialize,
    )


def forget_memory_server(url: str) -> None:
    """Drop an embedded server's data (tests and the embedded runtime's teardown)."""
    _MEMORY_SERVERS.pop(url.removeprefix("memory://") or "default", None)
