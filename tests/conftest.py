"""Shared test configuration.

`tests/` is a package, so pytest imports this file as `tests.conftest` and puts
the repository root on `sys.path` first: `from tests.support... import` and
`from tests.component... import` then work with a plain `pytest` too, not only
with `python -m pytest`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentq.workers.queue.liveness import OUTAGE
from tests.support.models import LOOPBACK_SPEC_SETTINGS


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
