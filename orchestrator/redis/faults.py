"""What a Redis failure means: transient (wait and retry) or not, agentq's error for it
at every boundary (`redis_errors_mapped`), and one log line per outage.

A restart, a failover, a full memory or a stalled server are transient: the
operation is safe to retry once Redis answers again, because every transition
is idempotent. redis-py's own `ConnectionError` does not inherit from the
built-in one, so both trees are listed; authentication failures are
ConnectionErrors in redis-py but never heal by waiting, so they are not transient.

A Redis Cluster electing a new primary for a shard is transient too: the cluster is
down (`CLUSTERDOWN`) or a slot has no primary until the election ends, and redis-py's
cluster client reports a slot map it cannot read or that has a hole with errors outside
`RedisError` (`RedisClusterException`); the other `RedisClusterException`s are misuse.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Literal, ParamSpec, TypeVar

from redis import exceptions as rx

from agentq.orchestrator.core.errors import AgentqError, InfrastructureError

_TRANSIENT: tuple[type[BaseException], ...] = (
    rx.ConnectionError,  # includes BusyLoadingError (LOADING) and MaxConnectionsError
    rx.TimeoutError,
    rx.OutOfMemoryError,
    rx.ReadOnlyError,  # a replica promoted mid-failover
    rx.TryAgainError,
    rx.ClusterDownError,
    rx.SlotNotCoveredError,  # a slot map read while a shard had no primary
    OSError,  # refused, reset, unreachable (the built-in ConnectionError is one)
    TimeoutError,
)
_PERMANENT: tuple[type[BaseException], ...] = (rx.AuthenticationError, rx.AuthorizationError)
# Error codes a Lua script or a server in trouble replies with that clear by themselves.
_TRANSIENT_CODES = (
    *("OOM ", "LOADING ", "MISCONF ", "BUSY ", "TRYAGAIN", "MASTERDOWN", "READONLY "),
    "CLUSTERDOWN",  # as a plain (one node's) client reads it
)
# Replies that say Redis answers but takes no write (reads still pass).
_WRITE_REFUSALS = ("OOM ", "READONLY ", "MISCONF ")
# redis-py's cluster client when no node it knows answers, or the map it read has a hole.
_TRANSIENT_CLUSTER = ("Redis Cluster cannot be connected", "All slots are not covered")
# What redis-py raises: RedisClusterException is not a RedisError.
REDIS_ERRORS: tuple[type[Exception], ...] = (rx.RedisError, rx.RedisClusterException)
_MAPPED: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError)


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same operation later may succeed without anyone acting."""
    if isinstance(exc, InfrastructureError):  # the store's mapping of a Redis error
        return exc.retryable or (exc.__cause__ is not None and is_transient(exc.__cause__))
    if isinstance(exc, _PERMANENT):
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    if isinstance(exc, rx.RedisClusterException):
        cause = exc.__cause__
        return str(exc).startswith(_TRANSIENT_CLUSTER) and not isinstance(cause, _PERMANENT)
    if isinstance(exc, rx.ResponseError):
        text = str(exc)
        return any(code in text[:200] for code in _TRANSIENT_CODES)
    return False


def is_transient_redis(exc: BaseException) -> bool:
    """A transient failure of Redis (raw from redis-py, or as the store maps it), not,
    say, a tool's own OSError."""
    return isinstance(exc, (*REDIS_ERRORS, InfrastructureError)) and is_transient(exc)


def refuses_writes(exc: BaseException) -> bool:
    """Redis answered and refused a write: full (OOM), a replica (READONLY), or unable to
    persist (MISCONF). Reads go on meanwhile, so only a write shows that it has passed."""
    if isinstance(exc, InfrastructureError):
        return exc.__cause__ is not None and refuses_writes(exc.__cause__)
    if isinstance(exc, rx.OutOfMemoryError | rx.ReadOnlyError):
        return True
    return isinstance(exc, rx.ResponseError) and str(exc).startswith(_WRITE_REFUSALS)


# redis-py names the failed command of a pipeline with all its arguments (a run's
# messages, every tool's schema): a log line keeps its name and key, not its data.
_PIPELINE_REASON = " of pipeline caused error: "
_PIPELINE_ERROR = re.compile(rf"^Command # (\d+) \((\S+)(?: (\S+))?.*\){_PIPELINE_REASON}")
_DESCRIBED_MAX = 300  # characters of a Redis error's own text kept in a one-line message


def describe(exc: BaseException) -> str:
    """The error in one line of a sane length: its type and first line."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    if found := _PIPELINE_ERROR.match(text):
        number, command, key = found.groups()
        reason = text[text.rindex(_PIPELINE_REASON) + len(_PIPELINE_REASON) :]
        with contextlib.suppress(ValueError, SyntaxError):
            args = ast.literal_eval(reason)  # redis-py formats the error's args tuple
            if isinstance(args, tuple) and args and isinstance(args[0], str):
                reason = args[0]
        named = f"{command} {key}" if key else command
        text = f"{named} (command {number} of a pipeline): {reason}"
    if len(text) > _DESCRIBED_MAX:
        text = text[: _DESCRIBED_MAX - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def infrastructure_error(exc: BaseException) -> InfrastructureError:
    """agentq's error for a failure of Redis, its retryability as data."""
    if isinstance(exc, TimeoutError | rx.TimeoutError):  # asyncio's is the built-in
        message = f"Redis did not answer in time ({describe(exc)})"
    elif isinstance(exc, rx.ConnectionError | OSError) and not isinstance(exc, _PERMANENT):
        message = f"cannot reach Redis: {describe(exc)}"
    else:
        message = f"Redis: {describe(exc)}"
    return InfrastructureError(message, retryable=is_transient(exc))


class _ErrorsMapped:
    """`redis_errors_mapped`'s context manager: a class, not a generator's (each
    transition a store sends goes through one: a generator costs ~1 us more each)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: object, exc: BaseException | None, traceback: object
    ) -> Literal[False]:  # never swallows: raises its own, or lets the error be
        if exc is None or isinstance(exc, AgentqError) or not isinstance(exc, _MAPPED):
            return False  # (raised on as it is)
        raise infrastructure_error(exc) from exc


_ERRORS_MAPPED = _ErrorsMapped()


def redis_errors_mapped() -> _ErrorsMapped:
    """Foreign errors become agentq's at a boundary (a store, the client), as httpx maps
    its transports': redis-py's and the socket's leave only as InfrastructureError, the
    cause kept for whoever reports it (the CLI says what Redis did)."""
    return _ERRORS_MAPPED


T = TypeVar("T")
P = ParamSpec("P")


def maps_redis_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """`redis_errors_mapped` around a whole coroutine function."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with redis_errors_mapped():
            return await fn(*args, **kwargs)

    return wrapper


class Backoff:
    """Exponential backoff with a ceiling: 0.05 s, 0.1 s, … up to `max_s`."""

    def __init__(self, first_s: float = 0.05, max_s: float = 2.0) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self._next_s = first_s

    def next_delay(self) -> float:
        delay = self._next_s
        self._next_s = min(self.max_s, self._next_s * 2)
        return delay

    def reset(self) -> None:
        self._next_s = self.first_s


def raise_if_cancel_requested() -> None:
    """End a forever-loop whose task was cancelled even if the cancel got lost on the
    way: on Python 3.11 `asyncio.wait_for` and `asyncio.timeout` can each swallow a
    cancel that races their own completion, and the loop would then run on."""
    if _cancelling():
        raise asyncio.CancelledError


def _cancelling() -> bool:
    try:
        task = asyncio.current_task()
    except RuntimeError:  # a thread without an event loop (the lease renewer)
        return False
    return task is not None and task.cancelling() > 0


class Outage:
    """Logs the start and the end of an outage once each, however many retries it takes.

    One instance may be shared by every loop of a process (threads included), so an
    outage costs the log one line, not one per loop and retry. It ends at a success
    seen `quiet_s` after the last failure, not at the first success. And an outage in
    which Redis refused writes (full, read-only, unable to persist) ends only at a
    success that wrote (`succeeded(wrote=True)`: a job's transition, the heartbeat):
    such a Redis answers reads and lease renewals all along, and each of those would
    otherwise end the outage (and reset the backoff) that the next refused write opens
    again, a line each time; its end also calls `on_end`, whose rewrites are refused
    too while it lasts."""

    def __init__(
        self,
        what: str,
        log: logging.Logger,
        *,
        quiet_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.log = log
        self.since: float | None = None
        self.started = 0  # outages begun in this process's life (its metrics count them)
        self.backoff = Backoff()
        # Above the backoff's ceiling: a loop still failing has failed again by then.
        self.quiet_s = quiet_s
        self.clock = clock
        self._last_failed = 0.0
        self._writes_refused = False  # in this outage: only a write ends it
        self._lock = threading.Lock()
        self._on_end: list[Callable[[], None]] = []

    def on_end(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` (from whichever thread saw Redis back) when an outage ends:
        what a process keeps in Redis may be gone with it (a restart without
        persistence). Returns what removes the callback."""
        self._on_end.append(callback)
        return lambda: self._on_end.remove(callback)

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns how long to wait before the next attempt.

        Raises CancelledError instead when the calling task is being cancelled: redis-py
        bounds its reads with `asyncio.timeout`, which on Python 3.11 can turn a cancel
        that races its own deadline into a TimeoutError. A retry loop would then swallow
        the cancel and run on, and whoever awaits the task (a worker's shutdown) hangs."""
        if _cancelling():
            raise asyncio.CancelledError from exc
        with self._lock:
            self._last_failed = self.clock()
            if refuses_writes(exc):
                self._writes_refused = True
            if self.since is None:
                self.since = self._last_failed
                self.started += 1
                self.log.warning("%s: redis unavailable (%s); retrying", self.what, describe(exc))
            return self.backoff.next_delay()

    async def periodic_pass(
        self, run: Callable[[], Awaitable[T]], *, failure: str, log: logging.Logger
    ) -> T | None:
        """One pass of a loop that runs for the process's life (a reaper, a sweep): its
        result, or None when it failed. A transient failure waits out this outage's
        backoff (the pass is retried after it); any other is logged, and the loop goes on
        at its own pace."""
        try:
            result = await run()
        except Exception as exc:
            if not is_transient(exc):
                log.exception(failure)
                return None
            await asyncio.sleep(self.failed(exc))
            return None
        self.succeeded()
        return result

    def forget(self) -> None:
        """Drop an open outage without logging its end: its loops are gone (a process's
        in-process worker stopped while Redis was down), so whatever runs next starts
        with no outage on record."""
        with self._lock:
            self.since = None
            self._writes_refused = False
            self.backoff.reset()

    def succeeded(self, *, wrote: bool = False) -> None:
        """Redis answered: the outage, if any, ends (see the class). `wrote`: what
        succeeded was a write (Redis takes writes again), not only a read."""
        if self.since is None:  # the common case, without the lock
            return
        ended: list[Callable[[], None]] = []
        with self._lock:
            now = self.clock()
            if self._writes_refused and not wrote:
                return
            if self.since is not None and now - self._last_failed >= self.quiet_s:
                self.log.warning(
                    "%s: redis is back after %.1f s", self.what, self._last_failed - self.since
                )
                self.since = None
                self._writes_refused = False
                self.backoff.reset()
                ended = list(self._on_end)
        for callback in ended:
            callback()
