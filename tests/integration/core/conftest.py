"""Worker processes a test starts, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import WorkerProcess


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """`workers += [WorkerProcess(...)]`: each one is stopped when the test ends."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()
