"""A real redis-server, `agentq worker` processes and an `agentq serve` process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.core.test_core_workers import TOOLS, wait_ready
from tests.support.infra import WorkerProcess
from tests.support.serve import ServeProcess

AGENTS: dict[str, Any] = {}


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
