"""Redis Cluster: `redis+cluster://host:port[,host:port...]` (any node(s) of the cluster).

redis-py's cluster client routes each command (and each EVALSHA, by its first key) to
the primary of its slot, follows MOVED/ASK, and splits non-transactional pipelines by
node. Two things agentq uses it lacks, added here:

- transactions (`pipeline(transaction=True)`): the commands are grouped by slot and
  each group runs as one MULTI/EXEC on its slot's primary, so a transaction whose keys
  share a slot (every run's do: see `core/keys.py`) is as atomic as on one Redis;
- pub/sub: classic PUBLISH reaches the subscribers of every node, so a subscription
  is made on a connection to one node.

It also keeps redis-py 5's slot map alive through a primary's death (`SteadyNodes`).

The partitions (`keys.use_partitions`) decide that a run's keys share a slot; nothing
here knows about runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableSequence
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
import redis.cluster
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline, PubSub
from redis.asyncio.cluster import ClusterNode, NodesManager, RedisCluster

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


class SteadyNodes(NodesManager):
    """redis-py 5's slot map, made to outlive a primary's death.

    At each connection error redis-py 5 drops the failed node from its startup nodes and
    resets the client, and each reset (and each map it reads) disconnects every
    connection of every node, busy ones included. Under load the errors a reset causes
    on live nodes drop those nodes too, until no startup node is left and the client is
    lost for good ("Redis Cluster cannot be connected ... None"), though the cluster
    promoted the dead primary's replica seconds later. redis-py 6 fixed this (failed
    nodes are tried last, known nodes keep their connections, one refresh at a time);
    arq pins redis-py below 6, so this does the same on 5:

    - every node ever known stays a startup node (a dead one is asked last and fails
      fast), so the map can always be read again from a live one;
    - concurrent refreshes coalesce: one reads the map, those that waited for it use it;
    - a node already known keeps its object and its connections, and a reset closes idle
      connections only: a command in flight on a live node ends as it would have.
    """

    def __init__(self, startup_nodes: list[ClusterNode], *args: Any, **options: Any) -> None:
        super().__init__(startup_nodes, *args, **options)
        self.known = {node.name: node for node in startup_nodes}
        self.refreshes = 0
        self.refreshing = asyncio.Lock()

    async def initialize(self) -> None:
        seen = self.refreshes
        async with self.refreshing:
            if self.refreshes != seen:
                return  # read by another caller while this one waited
            for name, node in self.known.items():
                self.startup_nodes.setdefault(name, node)
            await super().initialize()
            for name, node in self.startup_nodes.items():
                self.known.setdefault(name, node)
            self._share_node_objects()
            self.refreshes += 1

    def _share_node_objects(self) -> None:
        """Point the new slot map at the kept node objects (`set_nodes` keeps them)."""
        shared: dict[int, list[ClusterNode]] = {}
        slots: dict[int, list[ClusterNode]] = {}
        for slot, nodes in self.slots_cache.items():
            kept = shared.get(id(nodes))
            if kept is None:
                kept = shared[id(nodes)] = [self.nodes_cache.get(n.name, n) for n in nodes]
            slots[slot] = kept
        self.slots_cache = slots

    def set_nodes(
        self,
        old: dict[str, ClusterNode],
        new: dict[str, ClusterNode],
        remove_old: bool = False,
    ) -> None:
        if remove_old:
            for name in [name for name in old if name not in new]:
                _close_soon(old.pop(name))  # gone from the cluster's map
        for name, node in new.items():
            kept = old.setdefault(name, node)
            if kept is not node:
                kept.server_type = node.server_type  # a replica promoted, say

    async def aclose(self, attr: str = "nodes_cache") -> None:
        self.default_node = None  # type: ignore[assignment]  # as redis-py's own aclose
        # Startup nodes redis-py dropped are still known, and may hold a connection.
        nodes = self.known.values() if attr == "startup_nodes" else self.nodes_cache.values()
        await asyncio.gather(*(close_idle(node._free) for node in nodes))


def _close_soon(node: ClusterNode) -> None:
    task = asyncio.get_running_loop().create_task(node.disconnect())
    # Its error is read and dropped: the node left the cluster, a failed close is no news.
    task.add_done_callback(lambda done: done.cancelled() or done.exception())


async def close_idle(idle: MutableSequence[Any]) -> None:
    """Disconnect a pool's idle connections (redis-py's own pool list, private but
    stable through 4.x and 5.x). They are taken out of the pool before they close, so no
    command can pick one up half closed (redis-py's own disconnect of idle connections
    races with that), then put back to reconnect on their next use. A busy connection is
    left to end its command."""
    taken = list(idle)
    idle.clear()
    await asyncio.gather(*(c.disconnect() for c in taken), return_exceptions=True)
    idle.extend(taken)


class ClusterRedis(RedisCluster):
    """redis-py's cluster client, with per-slot transactions, pub/sub on one node and a
    slot map that outlives a primary's death (`SteadyNodes`)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        manager = self.nodes_manager
        self.nodes_manager = SteadyNodes(
            list(manager.startup_nodes.values()),
            manager.require_full_coverage,
            manager.connection_kwargs,
            address_remap=manager.address_remap,
            event_dispatcher=self._event_dispatcher,
        )
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

    async def refresh(self) -> None:
        """Read the slot map again after a node failed (best effort: if no node answers
        now, the caller's retry fails and refreshes again)."""
        with contextlib.suppress(Exception):
            await self.nodes_manager.initialize()

    async def aclose(self) -> None:
        """Close idle connections. redis-py calls this itself to reset after a node
        failed, while other commands are in flight: the node clients are kept and a busy
        connection ends its command (once the client is done, all are idle)."""
        pools = [client.connection_pool for client in self._node_clients.values()]
        await asyncio.gather(*(close_idle(pool._available_connections) for pool in pools))
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
                try:
                    done = await pipe.execute(raise_on_error=raise_on_error)
                except (redis.ConnectionError, redis.TimeoutError):
                    await self.slots.refresh()  # the slot's primary may have moved
                    raise
                for i, reply in zip(positions, done, strict=True):
                    replies[i] = reply

        await asyncio.gather(*(run(slot, positions) for slot, positions in groups.items()))
        return replies

    async def reset(self) -> None:
        self.command_stack = []
        self.scripts = set()
        self.watching = False
        self.explicit_transaction = False
