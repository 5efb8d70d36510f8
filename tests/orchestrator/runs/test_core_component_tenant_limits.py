"""AGENTQ_TENANT_LIMITS across partitions (as on Redis Cluster, here 4 partitions of the
embedded Redis): each partition counts its own runs in its own slot, and a create checks
its partition's count plus the others', so the tenant's cap holds over all of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.crc import key_slot

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import TenantLimitError
from agentq.orchestrator.core.settings import Settings
from tests.support.partitions import spread_ids
from tests.support.specs import scripted

pytestmark = pytest.mark.component

SETTINGS = Settings.model_validate(
    {"partitions": 4, "tenant_limits": {"acme": {"max_in_flight": 3, "max_queued": 3}}}
)


@pytest.fixture
def partitioned() -> Iterator[None]:
    yield
    keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)  # the client set this process's count


@pytest.mark.usefixtures("partitioned")
async def test_the_cap_holds_across_partitions_and_the_counts_share_each_runs_slot() -> None:
    async with Client("memory://", settings=SETTINGS) as client:
        assert keys.partition_count() == 4
        first, second, third, fourth = spread_ids("acme", 4)
        spec = scripted({"text": "done"})
        runs = [
            await client.runs.submit({**spec, "id": i}, tenant="acme")
            for i in (first, second, third)
        ]
        for run_id in runs:
            counts = keys.tenant_load(keys.partition_of(run_id))
            assert key_slot(counts.encode()) == key_slot(keys.meta(run_id).encode())
        load = await client.runs.store.tenant_load("acme")
        assert sorted(load.values()) == [(0, 0), (1, 1), (1, 1), (1, 1)]
        with pytest.raises(TenantLimitError) as refused:
            await client.runs.submit({**spec, "id": fourth}, tenant="acme")
        assert refused.value.limit == "tenant_max_in_flight"
        await client.runs.cancel(runs[0])
        again = await client.runs.submit({**spec, "id": fourth}, tenant="acme")
        load = await client.runs.store.tenant_load("acme")
        assert sum(i for i, _ in load.values()) == 3
        for run_id in (*runs[1:], again):
            await client.runs.cancel(run_id)
        assert set((await client.runs.store.tenant_load("acme")).values()) == {(0, 0)}
