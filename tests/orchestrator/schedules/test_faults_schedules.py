"""A schedule every second for about a minute on three `agentq worker` processes, one of
them SIGKILLed and replaced every five ticks: each tick produces exactly one run (the
runs are counted per tick), and no tick of the span is left out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import TOOLS, RedisServer, WorkerProcess, wait_ready
from tests.support.schedule_chaos import ENV, tick_under_kills

pytestmark = pytest.mark.faults

TICKS = 60


@pytest.fixture
def server() -> Iterator[RedisServer]:
    redis_server = RedisServer()
    yield redis_server
    redis_server.stop()


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    workers: list[WorkerProcess] = []
    yield workers
    for worker in workers:
        worker.stop()


async def test_each_tick_one_run_while_workers_die(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    fleet += [WorkerProcess(server.url, "--tools", TOOLS, env=ENV) for _ in range(3)]
    wait_ready(*fleet)
    figures = await tick_under_kills(
        server.url, fleet, ticks=TICKS, kill_at=tuple(range(5, TICKS - 5, 5))
    )
    print(figures.line("schedule every second, 3 workers"))
    assert figures.ticks >= TICKS
    assert figures.runs == figures.ticks
    assert figures.kills == len(range(5, TICKS - 5, 5))
