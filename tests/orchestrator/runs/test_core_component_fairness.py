"""The doors carry a run's tenant and priority to its lane (core/fairness.py): the Python
API's `tenant=` and `priority=` (or the spec's metadata.tenant), the spec's `fairness`
and `priority`; a bad one is refused up front."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.fairness import LANE_FIELD, RANK_FIELD, WEIGHT_FIELD
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, Embedded
from tests.support.specs import scripted

pytestmark = pytest.mark.component

SPEC = scripted({"text": "done"})


async def lane(client: Any, run_id: str) -> tuple[str, int, int]:
    raw = await client.redis.hmget(keys.meta(run_id), [LANE_FIELD, WEIGHT_FIELD, RANK_FIELD])
    name, weight, rank = (v.decode() if isinstance(v, bytes) else str(v) for v in raw)
    return name, int(weight), int(rank)


async def test_the_python_api_and_the_spec_choose_the_lane() -> None:
    lanes_chosen = FAST.model_copy(update={"spec_fairness": True})
    async with embedded(tools=[], settings=lanes_chosen) as client:
        plain = await client.runs.submit(SPEC)
        high = await client.runs.submit(SPEC, tenant="acme", priority="high")
        named = await client.runs.submit(
            {**SPEC, "metadata": {"tenant": "beta"}, "fairness": {"key": "nightly", "weight": 3}}
        )
        low = await client.runs.submit({**SPEC, "priority": 9}, tenant="acme", priority="0")

        assert await lane(client, plain) == ("default", 1, 0)
        assert await lane(client, high) == ("acme", 1, 30_000)  # 3 steps of 10 s above normal
        assert await lane(client, named) == ("beta/nightly", 3, 0)
        assert await lane(client, low) == ("acme", 1, -50_000)  # the argument wins
        for run_id in (plain, high, named, low):
            assert (await client.runs.wait(run_id, timeout_s=30)).status == "succeeded"

        with pytest.raises(SpecError, match="priority"):
            await client.runs.submit(SPEC, priority="urgent")
        with pytest.raises(ValidationError):
            await client.runs.submit({**SPEC, "fairness": {"key": "a/b", "weight": 0}})


async def test_a_spec_chooses_no_lane_unless_the_deployment_lets_it(
    start: Callable[[list[Any]], Embedded],
) -> None:
    # Lanes share the claim flat: a tenant free to name keys and weights could take as
    # many turns as it liked beside another tenant's one.
    async with start([]) as client:
        for fairness in ({"key": "mine"}, {"weight": 1000}):
            with pytest.raises(SpecError, match="AGENTQ_SPEC_FAIRNESS"):
                await client.runs.submit({**SPEC, "fairness": fairness}, tenant="acme")
        plain = await client.runs.submit({**SPEC, "priority": "high"}, tenant="acme")
        assert await lane(client, plain) == ("acme", 1, 30_000)
