"""Redis Cluster: `redis+cluster://host:port[,host:port...]` (any node(s) of the cluster).

redis-py's cluster client routes each command (and each EVALSHA, by its first key) to
the primary of its slot, follows MOVED/ASK, and splits non-transactional pipelines by
node. Two things agentq uses it lacks, added here:

- transactions (`pipeline(transaction=True)`): the commands are grouped by slot and
  each group runs as one MULTI/EXEC on its slot's primary, so a transaction whose keys
  share a slot (every run's do: see `core/keys.py`) is as atomic as on one Redis;
- pub/sub: classic PUBLISH reaches the subscribers of every node, so a subscription
  is made on a connection to one node.

The partitions (`keys.use_partitions`) decide that a run's keys share a slot; nothing
here knows about runs.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.cluster
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline, PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster

SCHEME = "redis+cluster://"


def is_cluster_url(url: str) -> bool:
    return url.startswith(SCHEME)


def _startup_nodes(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """The seed nodes and credentials of a cluster URL; a ValueError names what is wrong."""
    parts = urlsplit("redis://" + url.removeprefix(SCHEME))
    credentials, _, hosts = (parts.netloc or "").rpartition("@")
    auth: dict[str, Any] = {}
    if credentials:
        user, _, password = credentials.partition(":")
        if user:
            auth["username"] = unquote(user)
        if password:
            auth["password"] = unquote(password)
    nodes: list[tuple[str, int]] = []
    for entry in filter(None, hosts.split(",")):
        host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "6379")
        if not host or not port.isdigit():
            raise ValueError(f"cluster URL: bad host:port {entry!r}")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise ValueError("cluster URL: no host")
    return nodes, auth


def cluster_client(url: str, **options: Any) -> ClusterRedis:
    """An asyncio cluster client for `url` (it connects lazily, on its first command)."""
    nodes, auth = _startup_nodes(url)
    client: ClusterRedis = ClusterRedis(  # type: ignore[abstract]  # redis-py's stub
        startup_nodes=[ClusterNode(host, port) for host, port in nodes], **auth, **options
    )
    return client


def sync_cluster_client(url: str, **options: Any) -> redis.cluster.RedisCluster:
    """A blocking cluster client (the lease renewer's thread)."""
    nodes, auth = _startup_nodes(url)
    seeds = [redis.cluster.ClusterNode(host, port) for host, port in nodes]  # type: ignore[no-untyped-call]
    client: redis.cluster.RedisCluster = redis.cluster.RedisCluster(
        startup_nodes=seeds, **auth, **options
    )
    return client


class ClusterRedis(RedisCluster):
    """redis-py's cluster client, with per-slot transactions and pub/sub on one node."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._node_options = {
            k: v
            for k, v in options.items()
            if k
            in (
                "username",
                "password",
                "socket_timeout",
                "socket_connect_timeout",
                "socket_keepalive",
                "health_check_interval",
            )
        }
        self._node_clients: dict[str, Redis] = {}

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> Any:  # a ClusterPipeline, or a SlotTransactions (same calling convention)
        if transaction:
            return SlotTransactions(self)
        return super().pipeline()

    def node_client(self, node: ClusterNode) -> Redis:
        """A plain client of one node (for MULTI/EXEC and pub/sub), kept for reuse."""
        client = self._node_clients.get(node.name)
        if client is None:
            client = Redis(host=node.host, port=int(node.port), **self._node_options)
            self._node_clients[node.name] = client
        return client

    def pubsub(self, **kwargs: Any) -> PubSub:
        """A subscription on one node: a cluster delivers every PUBLISH to every node."""
        seed = self.nodes_manager.startup_nodes
        node = self.nodes_manager.default_node or next(iter(seed.values()))
        return self.node_client(node).pubsub(**kwargs)

    async def publish(self, channel: str, message: str | bytes) -> int:
        """Classic PUBLISH, from one node (the cluster forwards it to every node)."""
        node = self.nodes_manager.default_node or next(
            iter(self.nodes_manager.startup_nodes.values())
        )
        return int(await self.node_client(node).publish(channel, message))

    async def aclose(self) -> None:
        clients, self._node_clients = list(self._node_clients.values()), {}
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
        await super().aclose()


class SlotTransactions(Pipeline):
    """`pipeline(transaction=True)` on a cluster: commands are buffered as a pipeline
    buffers them, then each slot's commands run as one MULTI/EXEC on its primary and
    the replies come back in the order the commands were given. Atomic per slot, which
    is all a cluster offers; keys of one run share a slot."""

    def __init__(self, cluster: ClusterRedis) -> None:
        super().__init__(
            connection_pool=None,  # type: ignore[arg-type]  # never used: execute() routes
            response_callbacks={},
            transaction=True,
            shard_hint=None,
        )
        self.slots = cluster

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack, self.command_stack = self.command_stack, []
        if not stack:
            return []
        await self.slots.initialize()
        groups: dict[int, list[int]] = {}
        for i, (args, _) in enumerate(stack):
            command, *rest = args
            slot = await self.slots._determine_slot(str(command), *rest)
            groups.setdefault(slot, []).append(i)
        replies: list[Any] = [None] * len(stack)

        async def run(slot: int, positions: list[int]) -> None:
            node = self.slots.nodes_manager.get_node_from_slot(slot)
            async with self.slots.node_client(node).pipeline(transaction=True) as pipe:
                for i in positions:
                    args, options = stack[i]
                    pipe.execute_command(*args, **options)
                for i, reply in zip(
                    positions, await pipe.execute(raise_on_error=raise_on_error), strict=True
                ):
                    replies[i] = reply

        await asyncio.gather(*(run(slot, positions) for slot, positions in groups.items()))
        return replies

    async def reset(self) -> None:
        self.command_stack = []
        self.scripts = set()
        self.watching = False
        self.explicit_transaction = False
