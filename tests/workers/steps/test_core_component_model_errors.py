"""A key a provider echoes in its error never reaches the run's stored error, whatever the
provider's code (here: a registered one that leaks it cut and in base64)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.policy.providers import ProviderInfo
from agentq.workers.models import ProviderContext, register_provider
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S

pytestmark = pytest.mark.component

SECRET = "lk-LEAKY-CANARY-0123456789abcdef"


class Leaky:
    def __init__(self, ctx: ProviderContext) -> None:
        assert ctx.endpoint is not None
        assert ctx.endpoint.key_env is not None
        self.key = ctx.env[ctx.endpoint.key_env]

    async def generate(self, request: Any, sink: Any) -> Any:
        encoded = base64.b64encode(f"user:{self.key}".encode()).decode()
        raise ProviderError(f"bad key {self.key[:14]}** (basic {encoded})", retryable=False)


register_provider(
    ProviderInfo(name="leaky-test", wire="leaky-test", key_env="LEAKY_KEY"),
    lambda ref, ctx: Leaky(ctx),
)


async def test_an_echoed_key_is_scrubbed_from_the_stored_error() -> None:
    async with embedded(settings=FAST, env={"LEAKY_KEY": SECRET}) as client:
        run_id = await client.runs.submit({"model": "leaky-test:m", "prompt": "hi"})
        result = await client.runs.wait(run_id, timeout_s=TIMEOUT_S)
        stored = result.model_dump_json()
    assert result.status == "failed"
    assert result.error is not None
    assert "bad key [redacted]" in result.error.message
    assert SECRET[:10] not in stored
    assert base64.b64encode(f"user:{SECRET}".encode()).decode()[8:20] not in stored
