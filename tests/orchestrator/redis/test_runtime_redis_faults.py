"""Which Redis failures are transient, and an outage's log: one line in, one line out."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from redis import exceptions as rx

from agentq.orchestrator.core.errors import InfrastructureError
from agentq.orchestrator.redis.faults import (
    Backoff,
    Outage,
    describe,
    infrastructure_error,
    is_transient,
    is_transient_redis,
    refuses_writes,
)

pytestmark = pytest.mark.unit


def _cluster_error(text: str, cause: BaseException | None = None) -> rx.RedisClusterException:
    exc = rx.RedisClusterException(text)
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (rx.ConnectionError("Connection closed by server."), True),
        (rx.TimeoutError("Timeout reading from socket"), True),
        (rx.BusyLoadingError("Redis is loading the dataset in memory"), True),
        (rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'"), True),
        (
            rx.ResponseError("OOM command not allowed when used memory > 'maxmemory'. script: x"),
            True,
        ),
        (rx.ResponseError("MISCONF Redis is configured to save RDB snapshots"), True),
        (rx.ReadOnlyError("You can't write against a read only replica."), True),
        (ConnectionRefusedError(111, "refused"), True),  # the built-in tree too
        (TimeoutError(), True),
        (rx.AuthenticationError("invalid password"), False),  # a ConnectionError in redis-py
        (rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"), False),
        (rx.ResponseError("ERR Error running script: attempt to index a nil value"), False),
        (ValueError("bad"), False),
        # A cluster electing a new primary for a shard, as redis-py's clients report it.
        (rx.ClusterDownError("The cluster is down"), True),  # type: ignore[no-untyped-call]
        (rx.ResponseError("CLUSTERDOWN The cluster is down"), True),  # a one-node client's
        (rx.SlotNotCoveredError('Slot "42" not covered by the cluster.'), True),
        (_cluster_error("Redis Cluster cannot be connected. Please provide at least"), True),
        (_cluster_error("All slots are not covered after query all startup_nodes."), True),
        (_cluster_error("Redis Cluster cannot be connected", rx.AuthenticationError()), False),
        (rx.RedisClusterException("Cluster mode is not enabled on this node"), False),
        (rx.RedisClusterException("No way to dispatch this command to Redis Cluster"), False),
    ],
)
def test_transient_failures(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_a_tools_own_oserror_is_not_a_redis_outage() -> None:
    assert not is_transient_redis(FileNotFoundError(2, "no such file"))
    assert is_transient_redis(rx.ConnectionError("reset"))
    # Not a RedisError, still Redis's.
    assert is_transient_redis(rx.SlotNotCoveredError('Slot "42" not covered'))


def test_backoff_is_bounded() -> None:
    backoff = Backoff(first_s=0.05, max_s=2.0)
    delays = [backoff.next_delay() for _ in range(20)]
    assert delays[:3] == [0.05, 0.1, 0.2]
    assert max(delays) == 2.0
    backoff.reset()
    assert backoff.next_delay() == 0.05


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_logs_once_however_many_retries(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = Outage("worker", logging.getLogger("test.outage"), quiet_s=5, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        for _ in range(50):
            outage.failed(rx.ConnectionError("down"))
        clock.now += 5
        outage.succeeded()
        outage.succeeded()
        outage.failed(rx.ConnectionError("down again"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert "redis unavailable" in messages[0]
    assert "back after" in messages[1]
    assert "down again" in messages[2]


def test_a_full_redis_that_answers_reads_is_one_outage_until_writes_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under OOM, reads and renewals succeed between refused writes: before, each success
    ended the outage and reset the backoff, so every refused write logged again."""
    clock = Clock()
    outage = Outage("worker", logging.getLogger("test.outage"), quiet_s=5, clock=clock)
    oom = rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
    delays = []
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        for _ in range(1000):
            delays.append(outage.failed(oom))
            clock.now += 0.2
            outage.succeeded()  # a read, a lease renewal
            clock.now += 0.2
        clock.now += 5  # quiet, but a read proves nothing of writes: still open
        outage.succeeded()
        assert outage.since is not None
        outage.succeeded(wrote=True)  # writes pass again: the outage ends
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages[:5]
    assert "redis unavailable (OutOfMemoryError" in messages[0]
    assert "redis is back after" in messages[1]
    assert delays[-1] == Backoff().max_s  # the retries backed off, and stayed backed off


def test_a_forgotten_outage_ends_silently_and_starts_afresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outage = Outage("worker", logging.getLogger("test.outage"))
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        first_wait = outage.failed(rx.ConnectionError("down"))
        outage.failed(rx.ConnectionError("still down"))
        outage.forget()
        outage.succeeded()  # nothing open: no "back after"
        again = outage.failed(rx.ConnectionError("down later"))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "down later" in messages[1]
    assert again == first_wait  # the backoff starts over


async def test_a_cancel_turned_into_a_timeout_still_ends_a_retry_loop() -> None:
    """On Python 3.11 a read's `asyncio.timeout` can turn a cancel that races its
    deadline into a TimeoutError; the retry loop must end anyway, not swallow it."""
    outage = Outage("test", logging.getLogger("test"))
    entered = asyncio.Event()
    given_up = False  # only so that a failing test ends instead of hanging

    async def retry_loop() -> None:
        while not given_up:
            try:
                try:
                    entered.set()
                    await asyncio.Event().wait()  # a read that never answers
                except asyncio.CancelledError:
                    raise TimeoutError("Timeout reading from redis") from None
            except Exception as exc:
                await asyncio.sleep(outage.failed(exc))

    task = asyncio.create_task(retry_loop())
    await entered.wait()
    task.cancel()
    await asyncio.wait({task}, timeout=30)  # a deadline that only a hang reaches
    given_up = True
    assert task.done(), "the retry loop swallowed its cancellation"
    assert task.cancelled()


def test_a_thread_without_an_event_loop_gets_its_backoff() -> None:
    outage = Outage("test", logging.getLogger("test"))
    delays: list[float] = []
    thread = threading.Thread(target=lambda: delays.append(outage.failed(TimeoutError())))
    thread.start()
    thread.join()
    assert delays == [0.05]


def test_an_outage_of_refused_writes_is_not_ended_by_reads_however_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An idle worker with a long lease writes only at its beat: reads 5 s after a refused
    beat ended the outage, whose end rewrote the record, refused again: two lines a beat."""
    clock = Clock()
    outage = Outage("worker", logging.getLogger("test.outage"), quiet_s=5, clock=clock)
    ended: list[float] = []
    outage.on_end(lambda: ended.append(clock.now))
    replica = rx.ReadOnlyError("You can't write against a read only replica.")
    refused = infrastructure_error(replica)  # as a store raises it
    refused.__cause__ = replica
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        for _ in range(20):  # a beat refused every 10 s, reads succeeding in between
            outage.failed(refused)
            for _ in range(10):
                clock.now += 1
                outage.succeeded()
        outage.succeeded(wrote=True)
        outage.failed(rx.ConnectionError("down"))  # another outage, of reaching Redis
        clock.now += 5
        outage.succeeded()  # any answer ends that one
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4, messages
    assert "back after" in messages[1]
    assert "back after" in messages[3]
    assert len(ended) == 2


@pytest.mark.parametrize(
    ("exc", "refused"),
    [
        (rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), True),
        (rx.ReadOnlyError("You can't write against a read only replica."), True),
        (rx.ResponseError("MISCONF Redis is configured to save RDB snapshots"), True),
        (rx.ResponseError("OOM command not allowed when used memory > 'maxmemory'."), True),
        (rx.ConnectionError("Connection refused"), False),
        (rx.BusyLoadingError("Redis is loading the dataset in memory"), False),
        (InfrastructureError("Redis: refused", retryable=True), False),
    ],
)
def test_which_failures_refuse_writes(exc: BaseException, refused: bool) -> None:
    assert refuses_writes(exc) is refused
    mapped = infrastructure_error(exc)
    mapped.__cause__ = exc
    assert refuses_writes(mapped) is refused


def test_a_failed_pipeline_command_is_described_by_its_name_and_key_not_its_data() -> None:
    """redis-py names a pipeline's failed command with all its arguments (a worker's
    whole tool registry, a run's messages): a log line of kilobytes, with data in it."""
    exc = rx.OutOfMemoryError()
    schema = '{"name":"add","input_schema":{"type":"object"}} (a "quoted" payload)' * 50
    reason = ("command not allowed when used memory > 'maxmemory'.",)
    exc.args = (f"Command # 1 (HSET aq:registry add {schema}) of pipeline caused error: {reason}",)
    assert describe(exc) == (
        "OutOfMemoryError: HSET aq:registry (command 1 of a pipeline): "
        "command not allowed when used memory > 'maxmemory'."
    )
    long = describe(rx.ConnectionError("x" * 5000))
    assert len(long) < 400
    assert long.endswith("…")
