"""Replica acknowledgement: a transition whose loss would lose work is acknowledged to
its caller only once `n` replicas have it (`WAIT n timeout`, sent in the same pipeline
as the transition: one replica round trip, no extra client round trip).

Redis replicates asynchronously, so without it a transition the primary acknowledged is
lost if the primary dies before its replica received it, and a failover promotes that
replica. `AGENTQ_REDIS_REPLICA_ACKS` sets `n`; unset, it is 1 while the primary reports
a connected replica, else 0 (a lone Redis, or a promoted replica whose peer is gone):
the primary's `ROLE` rides along in a transition's pipeline every few seconds to keep
that count fresh. A WAIT that does not hear from `n` replicas in time is a retryable
InfrastructureError: the caller applies the (idempotent) transition again, never a
silent success. The embedded Redis asks for no acks.

On a Redis Cluster a WAIT counts the replicas of the node it is sent to, so each
transition's pipeline goes to the primary of its slot (every transition touches one
slot) and carries that shard's WAIT; each shard keeps its own count.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.exceptions import ConnectionError, NoScriptError, TimeoutError

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.cluster import ClusterRedis

# How often an automatic count is refreshed from the primary's ROLE.
ROLE_REFRESH_S = 5.0


class ReplicaAcks:
    """How many replicas must have a transition before it counts, for one connection
    pool. `setting`: AGENTQ_REDIS_REPLICA_ACKS (None: automatic)."""

    def __init__(
        self,
        setting: int | None,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.setting = setting
        self.timeout_ms = max(1, int(timeout_s * 1000))
        self._clock = clock
        self._seen: int | None = None  # replicas the primary last reported (automatic)
        self._seen_at = 0.0
        # A WAIT fell short: the next one must follow a write of its own connection.
        self._owed = False
        self._shards: dict[str, ReplicaAcks] = {}

    def shard(self, node: str) -> ReplicaAcks:
        """The policy for one primary of a cluster: the same setting, its own count."""
        acks = self._shards.get(node)
        if acks is None:
            acks = ReplicaAcks(self.setting, self.timeout_ms / 1000, clock=self._clock)
            self._shards[node] = acks
        return acks

    def needs_role(self) -> bool:
        """Whether the count is unknown (ask the primary before the transition)."""
        return self.setting is None and self._seen is None

    def stale(self) -> bool:
        """Whether the next pipeline should carry a ROLE to refresh the count."""
        return self.setting is None and self._clock() - self._seen_at >= ROLE_REFRESH_S

    def none_due(self) -> bool:
        """Whether a transition may go alone: no replica wanted by a count that is known
        and fresh (a lone Redis on automatic: the script then costs no pipeline). A
        cluster's own policy never learns a count (its shards do), so it never is."""
        return self._seen == 0 and self.setting is None and not self.stale()

    def wanted(self) -> int:
        if self.setting is not None:
            return self.setting
        return min(1, self._seen or 0)

    def saw_role(self, role: Any) -> None:
        """Record a `ROLE` reply: a master's third element lists its connected replicas."""
        if not isinstance(role, list | tuple) or len(role) < 3:
            return
        self._seen = len(role[2]) if _text(role[0]) == "master" else 0
        self._seen_at = self._clock()

    def add(self, pipe: Any, key: str) -> tuple[int, bool]:
        """Queue this pipeline's WAIT (when any replica is wanted) and, when the count is
        stale, a ROLE after it; (replicas waited for, whether a ROLE was queued). `key`:
        one the pipeline's transition touches (a probe write must land on its node)."""
        n = self.wanted()
        if n:
            if self._owed:
                pipe.execute_command("INCR", probe_key(key))
            pipe.execute_command("WAIT", n, self.timeout_ms)
        role = self.stale()
        if role:
            pipe.execute_command("ROLE")
        return n, role

    def check(self, n: int, role: bool, replies: list[Any]) -> None:
        """Read what `add` queued (the pipeline's last replies); raise when fewer than
        `n` replicas acknowledged."""
        if role:
            self.saw_role(replies[-1])
            replies = replies[:-1]
        if not n:
            return
        acked = replies[-1]
        self._owed = isinstance(acked, BaseException) or int(acked) < n
        if isinstance(acked, BaseException):
            raise acked
        if self._owed:
            raise InfrastructureError(
                f"Redis replication: {acked} of {n} replica(s) acknowledged within "
                f"{self.timeout_ms} ms (AGENTQ_REDIS_REPLICA_ACKS); retrying",
                retryable=True,
            )

    async def ensure_known(self, redis: Any) -> None:
        """Ask the primary for its replicas when the count is not known yet."""
        if self.needs_role():
            self.saw_role(await redis.execute_command("ROLE"))


NO_ACKS = ReplicaAcks(0, 1.0)

_POLICIES: weakref.WeakKeyDictionary[Any, ReplicaAcks] = weakref.WeakKeyDictionary()


def use_acks(redis: Any, acks: ReplicaAcks) -> None:
    """Make `redis` (a client `connect` made) wait for replicas as `acks` says."""
    _POLICIES[redis] = acks


def acks_of(redis: Any) -> ReplicaAcks:
    """The policy of a client `connect` made; none for any other."""
    return _POLICIES.get(redis, NO_ACKS)


def probe_key(key: str) -> str:
    """The probe written before a WAIT owed: in `key`'s slot (its hash tag, when it has
    one: a cluster's tags are its partitions', so there are a few probes, not one a run)."""
    start = key.find(keys.TAG_OPEN)
    end = key.find(keys.TAG_CLOSE, start + 1)
    if start < 0 or end <= start + 1:
        return keys.REPLICA_ACK_PROBE
    return f"{keys.REPLICA_ACK_PROBE}:{key[start : end + 1]}"


def pipeline_to(redis: Any, key: str) -> AbstractAsyncContextManager[tuple[Any, ReplicaAcks]]:
    """A non-transactional pipeline to the Redis that serves `key`, and its policy
    (count known). On a cluster that is the primary of `key`'s slot, reached directly:
    a cluster pipeline would send the WAIT to any node, where it counts another shard's
    replicas. A dropped connection makes the cluster client reload its slot map, so the
    caller's retry finds a promoted primary (a MOVED reply, which only a resharding
    gives, is not followed: agentq's partitions never move)."""
    if isinstance(redis, ClusterRedis):
        return _cluster_pipeline_to(redis, key)
    return _Pipelined(redis)


class _Pipelined:
    """`pipeline_to` on a lone Redis (or sentinel's primary): the pipeline, reset on the
    way out as its own `async with` resets it. A class, not a generator's context
    manager: a job's end goes through it, and the generator's machinery costs more
    than the pipeline's own setup."""

    __slots__ = ("_pipe", "_redis")

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._pipe: Any = None

    async def __aenter__(self) -> tuple[Any, ReplicaAcks]:
        acks = acks_of(self._redis)
        if acks.needs_role():
            await acks.ensure_known(self._redis)
        self._pipe = self._redis.pipeline(transaction=False)
        return self._pipe, acks

    async def __aexit__(self, *_: object) -> None:
        await self._pipe.reset()


@contextlib.asynccontextmanager
async def _cluster_pipeline_to(
    redis: ClusterRedis, key: str
) -> AsyncIterator[tuple[Any, ReplicaAcks]]:
    acks = acks_of(redis)
    await redis.initialize()
    node = redis.nodes_manager.get_node_from_slot(redis.keyslot(key))
    target, acks = redis.node_client(node), acks.shard(node.name)
    try:
        await acks.ensure_known(target)
        async with target.pipeline(transaction=False) as pipe:
            yield pipe, acks
    except (ConnectionError, TimeoutError):
        await redis.refresh()  # the caller's retry goes to the slot's primary of then
        raise


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def acknowledged_many(
    redis: Any, sha: str, source: bytes | str | memoryview, calls: list[tuple[list[str], list[Any]]]
) -> list[Any]:
    """Run a script once per (keys, args), in one pipeline per Redis node (one on a lone
    Redis), each closed by the WAIT the policy asks for: one WAIT covers every write
    its connection sent before it. The replies in order; an error reply is raised (the
    calls before it may have been applied: each is one idempotent transition)."""
    if len(calls) == 1:  # alone, as `acknowledged` sends it: no pipeline when none is due
        return [await acknowledged(redis, sha, source, *calls[0])]
    by_node: dict[Any, list[int]] = {}
    for i, (keys_, _) in enumerate(calls):
        node = redis.keyslot(keys_[0]) if isinstance(redis, ClusterRedis) else None
        by_node.setdefault(node, []).append(i)
    replies: list[Any] = [None] * len(calls)
    for indices in by_node.values():
        first = calls[indices[0]][0][0]
        for _ in range(2):
            async with pipeline_to(redis, first) as (pipe, acks):
                for i in indices:
                    keys_, args = calls[i]
                    pipe.evalsha(sha, len(keys_), *keys_, *args)
                n, role = acks.add(pipe, first)
                sent = await pipe.execute(raise_on_error=False)
            if not any(isinstance(r, NoScriptError) for r in sent[: len(indices)]):
                break
            await redis.script_load(source)  # Redis lost its scripts (a restart)
        for i, reply in zip(indices, sent, strict=False):
            if isinstance(reply, BaseException):
                raise reply
            replies[i] = reply
        acks.check(n, role, sent)
    return replies


async def acknowledged(
    redis: Any, sha: str, source: bytes | str | memoryview, keys: list[str], args: list[Any]
) -> Any:
    """Run a script (by `sha`, loading `source` when Redis lost it) and return its reply
    once the replicas `redis`'s policy asks for have it, in one round trip."""
    acks = acks_of(redis)
    if acks.setting == 0 or acks.none_due():
        try:
            return await redis.evalsha(sha, len(keys), *keys, *args)
        except NoScriptError:
            await redis.script_load(source)
            return await redis.evalsha(sha, len(keys), *keys, *args)
    for _ in range(2):
        async with pipeline_to(redis, keys[0]) as (pipe, acks):
            pipe.evalsha(sha, len(keys), *keys, *args)
            n, role = acks.add(pipe, keys[0])
            replies = await pipe.execute(raise_on_error=False)
        if not isinstance(replies[0], NoScriptError):
            break
        await redis.script_load(source)  # Redis lost its scripts (a restart)
    if isinstance(replies[0], BaseException):
        raise replies[0]
    acks.check(n, role, replies)
    return replies[0]
