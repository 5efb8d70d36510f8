"""A real redis-server, `agentq worker` processes and an `agentq serve` process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import browser
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.serve import ServeProcess

__all__ = ["browser"]  # a real headless chromium, for the dashboard's tests


@pytest.fixture
def worker(redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(redis_url, "--tools", TOOLS)
    wait_ready(process)
    yield process
    process.stop()


@pytest.fixture
def server(redis_url: str, worker: WorkerProcess) -> Iterator[ServeProcess]:
    process = ServeProcess(redis_url, env={"AGENTQ_SERVE_HEARTBEAT_S": "1"})
    yield process
    process.stop()
