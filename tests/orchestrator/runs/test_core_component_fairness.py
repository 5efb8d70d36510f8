"""The doors carry a run's tenant and priority to its lane (core/fairness.py): the Python
API's `tenant=` and `priority=` (or the spec's metadata.tenant), the spec's `fairness`
and `priority`, the deployment's tenant weights, a batch line's batch; a bad one is
refused up front."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.fairness import (
    KEY_FIELD,
    RANK_FIELD,
    TENANT_FIELD,
    TENANT_WEIGHT_FIELD,
    WEIGHT_FIELD,
)
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST
from tests.support.specs import scripted

pytestmark = pytest.mark.component

SPEC = scripted({"text": "done"})


async def lane(client: Any, run_id: str) -> tuple[str, int, int]:
    """(tenant/key, the key's weight, the rank its priority is worth)."""
    fields = [TENANT_FIELD, KEY_FIELD, WEIGHT_FIELD, RANK_FIELD]
    raw = await client.redis.hmget(keys.meta(run_id), fields)
    tenant, key, weight, rank = (v.decode() if isinstance(v, bytes) else str(v) for v in raw)
    return f"{tenant}/{key}", int(weight), int(rank)


async def test_the_python_api_and_the_spec_choose_the_lane() -> None:
    # A spec may name its key and weight by default: they divide only its tenant's turns.
    async with embedded(tools=[], settings=FAST) as client:
        plain = await client.runs.submit(SPEC)
        high = await client.runs.submit(SPEC, tenant="acme", priority="high")
        named = await client.runs.submit(
            {**SPEC, "metadata": {"tenant": "beta"}, "fairness": {"key": "nightly", "weight": 3}}
        )
        low = await client.runs.submit({**SPEC, "priority": 9}, tenant="acme", priority="0")

        assert await lane(client, plain) == ("default/", 1, 0)
        assert await lane(client, high) == ("acme/", 1, 30_000)  # 3 steps of 10 s above normal
        assert await lane(client, named) == ("beta/nightly", 3, 0)
        assert await lane(client, low) == ("acme/", 1, -50_000)  # the argument wins
        for run_id in (plain, high, named, low):
            assert (await client.runs.wait(run_id, timeout_s=30)).status == "succeeded"

        with pytest.raises(SpecError, match="priority"):
            await client.runs.submit(SPEC, priority="urgent")
        with pytest.raises(ValidationError):
            await client.runs.submit({**SPEC, "fairness": {"key": "a/b", "weight": 0}})


async def test_the_deployment_weighs_tenants_and_a_spec_only_its_own_keys() -> None:
    weighted = FAST.model_copy(update={"tenant_weights": {"acme": 3, "*": 2}})
    async with embedded(tools=[], settings=weighted) as client:
        acme = await client.runs.submit(SPEC, tenant="acme")
        beta = await client.runs.submit({**SPEC, "fairness": {"weight": 1000}}, tenant="beta")
        for run_id, expected in ((acme, b"3"), (beta, b"2")):
            raw = await client.redis.hget(keys.meta(run_id), TENANT_WEIGHT_FIELD)  # type: ignore[misc]
            assert raw == expected
            assert (await client.runs.wait(run_id, timeout_s=30)).status == "succeeded"
        assert await lane(client, beta) == ("beta/", 1000, 0)
