"""Shared test configuration.

`tests/` is a package, so pytest imports this file as `tests.conftest` and puts the
repository root on `sys.path` first: `from tests.support... import` then works with a
plain `pytest` too, not only with `python -m pytest`.

Tests are laid out by package, mirroring the code; a test's tier is its marker (unit,
component, integration, e2e, faults), never its folder.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentq.workers.queue.liveness import OUTAGE
from tests.support.fixtures import (
    allow_loopback_endpoints,
    cluster,
    http,
    model_log,
    redis_server,
    redis_url,
    start,
    workers,
)
from tests.support.models import LOOPBACK_SPEC_SETTINGS

# Fixtures shared by every folder (tests are laid out by package, the tier is a marker).
__all__ = [
    "allow_loopback_endpoints",
    "cluster",
    "http",
    "model_log",
    "redis_server",
    "redis_url",
    "start",
    "workers",
]


@pytest.fixture(autouse=True)
def _no_outage_carried_over() -> Iterator[None]:
    """A worker's outage tracker is per process (workers/queue/liveness.py): an outage a test
    leaves open (it stopped Redis under an in-process worker) is not the next test's,
    whose first reply would otherwise log "redis is back"."""
    yield
    OUTAGE.forget()


@pytest.fixture
def allow_loopback_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let specs send requests (and OPENAI_API_KEY) to the loopback fakes: for this test's
    process and every worker or CLI process it starts (they inherit the environment)."""
    for name, value in LOOPBACK_SPEC_SETTINGS.items():
        monkeypatch.setenv(name, value)
