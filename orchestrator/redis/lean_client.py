"""The client `connect` makes for a real Redis: arq's, with a command's Python cut.

A worker makes two round trips or so per job (its transitions' EVALSHAs, a job's end
riding in a pipeline), and redis-py's asyncio client wraps each in layers of Python
that agentq's connections never use: a retry loop with its lambdas (they have no
retries: redis-py gives them `Retry(NoBackoff(), 0)`, so an error disconnects and is
raised), a response parse through the client's and the pipeline's `parse_response`
(the pipeline's watching its WATCH and UNWATCH), a transaction's checks, and a second
reset of a pipeline on its way out. Here a command, and a pipeline that is not a
transaction, go straight to their connection's send and read (orchestrator/redis/
lean.py), with redis-py's behaviour kept: the pool's connection taken and given back,
an error reply raised (a pipeline's in its place, or the first raised and annotated as
redis-py does), a connection or timeout error disconnecting before it is raised, each
reply through the command's response callback, when it has one.

The pool (`LeanConnectionPool`, a plain URL's) hands out a connection that is connected
and surely holds nothing (`LeanConnection._nothing_pending`: the check redis-py makes
of each connection it hands out, answered without the event loop) without the pool's
lock and its connect and check coroutines; any other goes through redis-py's own
`get_connection`, which connects under its lock and checks as before.

What this does not cover goes to redis-py's own path, unchanged: a client on a single
connection, a command with `NEVER_DECODE` or `EMPTY_RESPONSE`, a transaction, a
pipeline that watches keys or loads scripts, a connection given retries.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis
from arq.connections import ArqRedis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import AbstractConnection
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agentq.orchestrator.redis.lean import LeanConnection


def _answered(callbacks: Any, name: Any, response: Any, options: Mapping[str, Any]) -> Any:
    """A reply through its command's response callback (redis-py's `parse_response`,
    less its `keys` option, which only its cache reads); a callback that answers an
    awaitable is awaited by the caller."""
    callback = callbacks.get(name)
    if callback is None:
        return response
    return callback(response, **{k: v for k, v in options.items() if k != "keys"})


class LeanPipeline(Pipeline):
    """redis-py's pipeline; one that is not a transaction sent and read directly."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = self.command_stack
        if (
            not stack
            or self.is_transaction
            or self.explicit_transaction
            or self.watching
            or self.scripts
        ):
            return await super().execute(raise_on_error)
        conn: Any = self.connection
        if conn is None:
            conn = self.connection = await self.connection_pool.get_connection()
        if conn.retry_on_error:
            return await super().execute(raise_on_error)
        try:
            try:
                await conn.send_packed_command(conn.pack_commands([args for args, _ in stack]))
                response: list[Any] = []
                callbacks = self.response_callbacks
                for args, options in stack:
                    try:
                        reply = _answered(callbacks, args[0], await conn.read_response(), options)
                        response.append(await reply if inspect.isawaitable(reply) else reply)
                    except ResponseError as e:
                        response.append(e)
            except (RedisConnectionError, RedisTimeoutError):
                await conn.disconnect()  # (redis-py's `_disconnect_raise_reset`)
                raise
            if raise_on_error:
                self.raise_first_error(stack, response)
            return response
        finally:
            await self.reset()  # type: ignore[no-untyped-call]  # redis-py's


class LeanRedis(ArqRedis):
    """arq's client; a command and a pipeline sent as the module's docstring says."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.single_connection_client or NEVER_DECODE in options or EMPTY_RESPONSE in options:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        pool = self.connection_pool
        conn: Any = await pool.get_connection()
        try:
            if conn.retry_on_error:
                # Retries configured: redis-py's own loop (`_send_command_parse_response`).
                return await conn.retry.call_with_retry(
                    lambda: self._send_command_parse_response(  # type: ignore[no-untyped-call]
                        conn, args[0], *args, **options
                    ),
                    lambda error: self._disconnect_raise(conn, error),
                )
            try:
                await conn.send_packed_command(conn.pack_command(*args))
                response = await conn.read_response()
            except (RedisConnectionError, RedisTimeoutError):
                await conn.disconnect()  # (redis-py's `_disconnect_raise`)
                raise
        finally:
            await pool.release(conn)
        reply = _answered(self.response_callbacks, args[0], response, options)
        return await reply if inspect.isawaitable(reply) else reply

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return LeanPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class LeanConnectionPool(aioredis.ConnectionPool):
    """redis-py's pool; an idle connection ready to send is handed out directly (see the
    module's docstring)."""

    async def get_connection(self, *_: Any, **__: Any) -> AbstractConnection:
        available = self._available_connections
        if available:
            connection = available[-1]  # the one the base pool would hand out
            if (
                isinstance(connection, LeanConnection)
                and connection.is_connected
                and connection._nothing_pending()
            ):
                available.pop()
                self._in_use_connections.add(connection)
                return connection
        made: AbstractConnection = await super().get_connection()
        return made
