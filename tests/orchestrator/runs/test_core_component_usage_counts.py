"""A step's usage counts (tokens, unpriced steps) are added to the run's totals in the
meta's one write (the guard read the totals) and to its tenant's in one read and one
write (commit_step.lua, prelude.lua's add_counts): the totals are the sums, whichever
counts a step reports, over steps and over runs."""

from __future__ import annotations

from typing import Any

import pytest

from agentq import tool
from agentq.orchestrator.core import keys
from agentq.orchestrator.runs.state import MetaField
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST, TIMEOUT_S
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.component

# Step by step: every count, one count alone (its total besides), none.
STEPS: list[dict[str, int] | None] = [
    {"input_tokens": 10, "output_tokens": 5, "cached_input_tokens": 2, "reasoning_tokens": 1},
    {"input_tokens": 7},
    None,
]


@tool
async def nothing() -> str:
    """Does nothing."""
    return "ok"


def _spec() -> dict[str, Any]:
    steps = [{**calls(("nothing", {})), "usage": usage} for usage in STEPS]
    return scripted(*steps, {"text": "done"}, tools=["nothing"], max_steps=len(STEPS) + 1)


async def test_a_runs_and_its_tenants_totals_are_the_sums_of_its_steps() -> None:
    async with embedded(tools=[nothing], settings=FAST) as client:
        run_ids = [await client.runs.submit(_spec()) for _ in range(2)]
        first, second = [await client.runs.wait(r, timeout_s=TIMEOUT_S) for r in run_ids]
        tenant = await client.runs.usage()
        unpriced = [
            await client.redis.hget(keys.meta(r), MetaField.UNPRICED)  # type: ignore[misc]
            for r in run_ids
        ]
    for result in (first, second):
        assert result.status == "succeeded", result.error
        usage = result.usage
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (17, 5, 22)
        assert (usage.cached_input_tokens, usage.reasoning_tokens) == (2, 1)
    assert (tenant.input_tokens, tenant.output_tokens, tenant.total_tokens) == (34, 10, 44)
    assert (tenant.cached_input_tokens, tenant.reasoning_tokens) == (4, 2)
    # Every step is priced or counted unpriced: the same count in both runs.
    assert unpriced[0] == unpriced[1]
