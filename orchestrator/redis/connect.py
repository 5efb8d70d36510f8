"""Connecting to Redis: a real server (`redis://…`, `redis+sentinel://…`), a cluster
(`redis+cluster://…`) or the embedded one (`memory://`).

Connecting also sets the process's partition count (`core/keys.py`) from the
settings, so every key a process builds afterwards lands in the right partition.

`memory://NAME` gives an in-process Redis (fakeredis with Lua). Every connection
to the same NAME in one process shares one server, which is how the embedded
mode runs client and workers on the same data.
"""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio as aioredis
from arq.connections import ArqRedis
from redis.asyncio.cluster import RedisCluster

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.envelopes import deserialize, serialize
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.acks import ReplicaAcks, use_acks
from agentq.orchestrator.redis.bounded_pool import BoundedConnectionPool
from agentq.orchestrator.redis.cluster import cluster_client, is_cluster_url, sync_cluster_client
from agentq.orchestrator.redis.lean import lean
from agentq.orchestrator.redis.lean_client import LeanConnectionPool, LeanRedis
from agentq.orchestrator.redis.sentinel import (
    is_sentinel_url,
    sentinel_pool,
    sentinel_sync_client,
)

# Blocking reads (BLPOP, XREAD BLOCK) ask the server to wait at most this long, so a
# reply is always due well within the socket timeout and silence means a stalled Redis.
MAX_BLOCK_S = 5.0

_MEMORY_SERVERS: dict[str, Any] = {}


def is_memory_url(url: str) -> bool:
    return url.startswith("memory://")


def partitions_for(url: str, settings: Settings) -> int:
    """The deployment's partition count: the setting, else 1 (a cluster: 16)."""
    if settings.partitions is not None:
        return settings.partitions
    return keys.CLUSTER_PARTITIONS if is_cluster_url(url) else keys.SINGLE_NODE_PARTITIONS


def is_cluster(redis: Any) -> bool:
    """Whether a client `connect` made talks to a cluster (one key per blocking read)."""
    return isinstance(redis, RedisCluster)


def connect(url: str, settings: Settings | None = None) -> ArqRedis:
    """An arq-capable Redis client for `url` (the pool connects lazily).

    A real server gets connect and socket timeouts and health checks, so a Redis
    that accepts TCP and never answers costs a bounded wait, never a hang. A cluster's
    client is typed as the others: it answers the same commands (see redis_cluster)."""
    conf = settings or Settings()
    keys.use_partitions(partitions_for(url, conf))
    if is_memory_url(url):
        from agentq.orchestrator.redis.memory import MemoryConnection, MemoryServer

        name = url.removeprefix("memory://") or "default"
        server = _MEMORY_SERVERS.setdefault(name, MemoryServer())
        pool = aioredis.ConnectionPool(
            connection_class=MemoryConnection,
            server=server,
        )
    else:
        timeouts: dict[str, Any] = {
            "socket_connect_timeout": conf.redis_connect_timeout_s,
            "socket_timeout": max(conf.redis_socket_timeout_s, MAX_BLOCK_S + 2.0),
            "health_check_interval": conf.redis_health_check_s,
            "socket_keepalive": True,
        }
        if conf.redis_max_connections is not None:
            timeouts["max_connections"] = conf.redis_max_connections
        if is_cluster_url(url):
            cluster = cluster_client(url, **timeouts)
            use_acks(cluster, replica_acks(conf))
            return cast(ArqRedis, cluster)
        if is_sentinel_url(url):
            pool = sentinel_pool(url, **timeouts)
        elif conf.redis_max_connections is not None:
            # A bounded pool makes a caller wait its turn for a connection rather than fail.
            pool = BoundedConnectionPool.from_url(url, timeout=conf.redis_pool_wait_s, **timeouts)
        else:
            pool = LeanConnectionPool.from_url(url, **timeouts)
        pool.connection_class = lean(pool.connection_class)
    # A real Redis's connections are lean: their client sends on them directly.
    client = (ArqRedis if is_memory_url(url) else LeanRedis)(
        pool_or_conn=pool,
        job_serializer=serialize,
        job_deserializer=deserialize,
    )
    if not is_memory_url(url):
        use_acks(client, replica_acks(conf))
    return client


def replica_acks(conf: Settings) -> ReplicaAcks:
    return ReplicaAcks(conf.redis_replica_acks, conf.redis_replica_ack_timeout_s)


async def check_partitions(redis: Any) -> None:
    """Record this process's partition count as the deployment's, or refuse to go on if
    the deployment has another: its keys would miss every other process's."""
    mine = keys.partition_count()
    await redis.set(keys.PARTITIONS, mine, nx=True)
    raw = await redis.get(keys.PARTITIONS)
    theirs = int(raw) if raw is not None else mine
    if theirs != mine:
        raise InfrastructureError(
            f"this deployment's Redis uses {theirs} partition(s) (AGENTQ_PARTITIONS) and this "
            f"process {mine}: set AGENTQ_PARTITIONS={theirs} (the count is fixed per deployment)"
        )


def connect_sync(url: str, **options: Any) -> Any:
    """A blocking client for `url` (a thread's own, e.g. the lease renewer's): a
    `redis.Redis` (a Sentinel URL's follows the master), or a cluster client."""
    if is_cluster_url(url):
        return sync_cluster_client(url, **options)
    if is_sentinel_url(url):
        return sentinel_sync_client(url, **options)
    return redis.Redis.from_url(url, **options)


def forget_memory_server(url: str) -> None:
    """Drop an embedded server's data (tests and the embedded runtime's teardown)."""
    _MEMORY_SERVERS.pop(url.removeprefix("memory://") or "default", None)
