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
silent success. A cluster or the embedded Redis asks for no acks (untested on a cluster).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

from redis.exceptions import NoScriptError

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import InfrastructureError

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

    def needs_role(self) -> bool:
        """Whether the count is unknown (ask the primary before the transition)."""
        return self.setting is None and self._seen is None

    def stale(self) -> bool:
        """Whether the next pipeline should carry a ROLE to refresh the count."""
        return self.setting is None and self._clock() - self._seen_at >= ROLE_REFRESH_S

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

    def add(self, pipe: Any) -> tuple[int, bool]:
        """Queue this pipeline's WAIT (when any replica is wanted) and, when the count is
        stale, a ROLE after it; (replicas waited for, whether a ROLE was queued)."""
        n = self.wanted()
        if n:
            if self._owed:
                pipe.execute_command("INCR", keys.REPLICA_ACK_PROBE)
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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def acknowledged(
    redis: Any, sha: str, source: bytes | str | memoryview, keys: list[str], args: list[Any]
) -> Any:
    """Run a script (by `sha`, loading `source` when Redis lost it) and return its reply
    once the replicas `redis`'s policy asks for have it, in one round trip."""
    acks = acks_of(redis)
    await acks.ensure_known(redis)
    if not acks.wanted() and not acks.stale():
        try:
            return await redis.evalsha(sha, len(keys), *keys, *args)
        except NoScriptError:
            await redis.script_load(source)
            return await redis.evalsha(sha, len(keys), *keys, *args)
    for _ in range(2):
        async with redis.pipeline(transaction=False) as pipe:
            pipe.evalsha(sha, len(keys), *keys, *args)
            n, role = acks.add(pipe)
            replies = await pipe.execute(raise_on_error=False)
        if not isinstance(replies[0], NoScriptError):
            break
        await redis.script_load(source)  # Redis lost its scripts (a restart)
    if isinstance(replies[0], BaseException):
        raise replies[0]
    acks.check(n, role, replies)
    return replies[0]
