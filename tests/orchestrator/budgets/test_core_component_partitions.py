"""Shared budgets across partitions (as on Redis Cluster, here 4 partitions of the embedded
Redis with its in-process workers): each step is charged in its run's slot, a budget's
spend sums the partitions, the runs it holds are found in every partition, and a raise
sends them all on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from redis.crc import key_slot

from agentq import embedded
from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.settings import Settings
from tests.support.partitions import spread_ids
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

USAGE = {"input_tokens": 1000, "output_tokens": 300}  # $0.0016 a step
STEP_USD = 0.0016
CLIENT_TOOL = {"type": "client", "name": "ask"}


@pytest.fixture
def partitioned() -> Iterator[None]:
    yield
    keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)  # the client set this process's count


@pytest.mark.usefixtures("partitioned")
async def test_a_tenant_budget_holds_and_releases_runs_in_every_partition(
    tmp_path: Path,
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted:*": {"input": 1.0, "output": 2.0}}))
    budgets = {"acme": {"max_cost_usd": 4 * STEP_USD}}
    settings = Settings.model_validate(
        {"partitions": 4, "prices": str(prices), "tenant_budgets": budgets}
    )
    # Each run's steps call a client tool: the run waits for its result, so the test
    # says when each next step begins.
    ask = {"tool_calls": [{"name": "ask", "input": {}, "id": "a"}], "usage": USAGE}
    spec = scripted(ask, ask, {"text": "done", "usage": USAGE}, tools=[CLIENT_TOOL])
    async with embedded(settings=settings) as client:
        assert keys.partition_count() == 4
        spread = spread_ids("acme", 4)
        run_ids = [await client.runs.submit({**spec, "id": i}, tenant="acme") for i in spread]
        assert len({keys.partition_of(r) for r in run_ids}) == 4
        for run_id in run_ids:  # what a step charges and holds shares the run's slot
            partition = keys.partition_of(run_id)
            slot = key_slot(keys.meta(run_id).encode())
            for key in (keys.tenant_usage(partition), keys.budgets_held(partition)):
                assert key_slot(key.encode()) == slot

        async def answer_all() -> None:
            for run_id in run_ids:
                await eventually_async(partial(waiting, client, run_id), f"{run_id} asks")
                await client.runs.submit_tool_result(run_id, "a", "ok")

        await answer_all()  # four steps spent: the budget, over four partitions
        status = await eventually_async(
            lambda: client.budgets.tenant("acme"),
            "every run held",
            until=lambda s: s.held_runs == 4,
        )
        assert status.spent_usd == pytest.approx(4 * STEP_USD)
        assert status.reached is not None
        await client.budgets.set_tenant("acme", max_cost_usd=1.0)
        await answer_all()
        for run_id in run_ids:
            assert (await client.runs.wait(run_id, timeout_s=30)).status == "succeeded"
        assert (await client.budgets.tenant("acme")).spent_usd == pytest.approx(12 * STEP_USD)


async def waiting(client: Client, run_id: str) -> bool:
    return (await client.runs.status(run_id)).status == "awaiting"
