"""Fixtures every test folder may use, whatever the tier (tests/conftest.py imports them).

- `model_log`, `start`: the embedded runtime with a recording scripted model;
- `redis_server`, `redis_url`: a real redis-server on a free port;
- `workers`: worker processes a test starts, stopped after it;
- `allow_loopback_endpoints`, `http`: provider tests against local fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest

from agentq.orchestrator.core import keys
from agentq.workers import models as providers
from agentq.workers.models.base import ProviderContext
from agentq.workers.tools.function_tools import FunctionTool
from tests.support.embedded_runs import Embedded, ModelLog, RecordingScripted
from tests.support.infra import WorkerProcess
from tests.support.redis_cluster import LocalCluster
from tests.support.redis_fixtures import redis_server, redis_url

__all__ = [
    "allow_loopback_endpoints",
    "http",
    "model_log",
    "redis_server",
    "redis_url",
    "start",
    "workers",
]

# The provider fakes listen on loopback; those tests choose their URLs in the spec, which
# a deployment must allow, and send the providers' usual key variables there.
SPEC_ENDPOINTS = "http://127.0.0.1:"
SPEC_KEY_ENVS = "OPENAI_API_KEY,ANTHROPIC_API_KEY,GEMINI_API_KEY,MY_KEY"


@pytest.fixture
def model_log(monkeypatch: pytest.MonkeyPatch) -> ModelLog:
    """Every model step of the test's runs, as the (recording) scripted model saw it."""
    log = ModelLog()

    def factory(ref: Any, ctx: ProviderContext) -> RecordingScripted:
        return RecordingScripted(log)

    monkeypatch.setitem(providers._FACTORIES, "scripted", factory)
    return log


@pytest.fixture
def start(model_log: ModelLog) -> Callable[[Sequence[FunctionTool]], Embedded]:
    """`async with start([tools]) as client:` in-memory Redis and in-process workers."""

    def _start(tools: Sequence[FunctionTool] = ()) -> Embedded:
        return Embedded(tools, model_log)

    return _start


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """`workers += [WorkerProcess(...)]`: each one is stopped when the test ends."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture
def cluster(workers: list[WorkerProcess]) -> Iterator[LocalCluster]:
    """A local 3-primary Redis Cluster. The test's `workers` stop before it does, so none
    rides out its loss as an outage while the test ends."""
    local = LocalCluster(3)
    try:
        yield local
    finally:
        for worker in workers:
            worker.stop()
        local.stop()
        # A client on the cluster set this process's partition count (connect does).
        keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)


@pytest.fixture
def allow_loopback_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Specs may name the loopback fakes as endpoints and send the usual key variables."""
    monkeypatch.setenv("AGENTQ_ALLOW_SPEC_ENDPOINTS", SPEC_ENDPOINTS)
    monkeypatch.setenv("AGENTQ_ALLOW_SPEC_KEY_ENVS", SPEC_KEY_ENVS)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP client a provider under test talks to its local fake with."""
    async with httpx.AsyncClient() as client:
        yield client
