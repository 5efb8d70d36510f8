"""A connection pool of at most N connections whose callers take turns, fairly and
without a convoy: `AGENTQ_REDIS_MAX_CONNECTIONS` (serve's AGENTQ_SERVE_REDIS_CONNECTIONS).

redis-py's `BlockingConnectionPool`, given the connect timeout (5 s) as its wait: and
on a CPU starved by a burst of requests (2,000 at once on two shared cores) one turn of
the event loop took seconds: connections held by ordinary one-pipeline reads stayed "in
use" for 6-15 s, and callers got 503 "No connection available" although Redis answered.
It also hands a connection back under the lock every waiter takes (one hand-over per
turn of the loop) and the base pool connects under a lock. Here callers queue on a
semaphore, first come first served, a connection comes back at once, connecting happens
outside any lock, and every connection is opened at first use (not inside a burst).

A caller that waits longer than the pool's `timeout` for one of them gets
`PoolBusyError`: the connections are all busy with other callers' commands, Redis
answers; this is not "cannot reach Redis" (serve answers 429 and Retry-After).
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from agentq.orchestrator.core.errors import InfrastructureError


class PoolBusyError(InfrastructureError):
    """Every connection of a bounded pool stayed busy for the pool's whole wait: Redis
    answers, this process has more callers than connections (retryable)."""

    def __init__(self, max_connections: int, waited_s: float) -> None:
        super().__init__(
            f"all {max_connections} Redis connections of this process stayed busy for "
            f"{waited_s:g} s",
            retryable=True,
        )
        self.max_connections = max_connections


class BoundedConnectionPool(aioredis.ConnectionPool):
    """At most `max_connections` connections; a caller past them waits its turn for up
    to `timeout` seconds (`PoolBusyError` then)."""

    def __init__(self, *, timeout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.timeout = timeout
        self._turns = asyncio.Semaphore(self.max_connections)
        self._filled = False

    def reset(self) -> None:
        super().reset()  # type: ignore[no-untyped-call]
        self._turns = asyncio.Semaphore(self.max_connections)

    async def get_connection(self, *_: Any, **__: Any) -> AbstractConnection:
        if not self._filled:
            self._filled = True
            await self.fill()
        if self._turns.locked():
            try:
                async with asyncio.timeout(self.timeout):
                    await self._turns.acquire()
            except TimeoutError:
                raise PoolBusyError(self.max_connections, self.timeout) from None
        else:
            await self._turns.acquire()  # free: returns without yielding
        try:
            connection: AbstractConnection = self.get_available_connection()  # type: ignore[no-untyped-call]
        except BaseException:
            self._turns.release()
            raise
        try:
            # Outside any lock (the base pool connects under one): connecting costs
            # round trips, and the other callers need not wait for them.
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def fill(self) -> None:
        """Open every connection (at first use), so a burst of callers later never waits
        for one to connect: on a starved CPU a connect's handshake inside the burst
        outlasted its timeout. At best: those Redis refuses (its `maxclients`) or that
        fail are connected on demand, as before."""
        opened: list[AbstractConnection] = []
        try:
            for _ in range(self.max_connections):
                opened.append(await self.get_connection())
        except RedisError:
            pass
        finally:
            for connection in opened:
                await self.release(connection)

    async def release(self, connection: AbstractConnection) -> None:
        mine = connection in self._in_use_connections  # a turn to give back
        try:
            await super().release(connection)
        finally:
            if mine:
                self._turns.release()
