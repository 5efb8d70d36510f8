"""Shared test configuration.

`tests/` is a package, so pytest imports this file as `tests.conftest` and puts the
repository root on `sys.path` first: `from tests.support... import` then works with a
plain `pytest` too, not only with `python -m pytest`.

Tests are laid out by package, mirroring the code; a test's tier is its marker (unit,
component, integration, e2e, faults), never its folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


# The suite runs in parallel processes (pytest-xdist, `-n` in pyproject.toml's addopts, with
# `--dist loadgroup`). Most tests share the machine safely: redis-servers and HTTP fakes take
# free ports, Docker sandboxes carry a unique worker id. These do not, so they run one at a
# time, in one process, beside the rest:
# - compose: one fixed compose project ("agentqci") and build cache (tests/support/compose_stack);
# - walkthrough: the fresh-Debian Quickstart (a container, apt and PyPI; a minute of the machine);
# - viewer: the Phoenix server (~30 s of CPU to start);
# - benches: the bench programs, which measure the machine;
# - Docker sandboxes (tests/sandbox, test_e2e_sandbox.py): resource caps and timed verdicts
#   (a timeout's verdict within 1 s of it) that a second Docker-heavy test would blur.
_ONE_AT_A_TIME_MARKERS = frozenset({"compose", "walkthrough", "viewer", "benches"})
_ONE_AT_A_TIME_PATHS = (
    Path(__file__).parent / "sandbox",
    Path(__file__).parent / "workers" / "tools" / "test_e2e_sandbox.py",
)
MACHINE_GROUP = "machine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):  # -p no:xdist: the marker is unknown
        return
    for item in items:
        path = item.path
        if any(item.get_closest_marker(name) for name in _ONE_AT_A_TIME_MARKERS) or any(
            path == held or held in path.parents for held in _ONE_AT_A_TIME_PATHS
        ):
            item.add_marker(pytest.mark.xdist_group(MACHINE_GROUP))


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
