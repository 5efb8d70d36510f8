"""The Python API carries a spec's `concurrency` to its run: the key (given, or found in
the metadata by `key_from`) in the tenant's namespace, the run placed beside the key's
counter, the key and max in its result; a key_from that finds no key is refused at submit,
nothing created."""

from __future__ import annotations

import pytest

from agentq.orchestrator.concurrency.slots import placed_id
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.run_ids import placement, tenant_run_id
from agentq.workers.worker.embedded import embedded
from tests.support.embedded_runs import FAST
from tests.support.specs import scripted
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.component

SPEC = scripted({"text": "done"})


async def test_the_spec_names_a_key_and_the_run_counts_under_its_tenants() -> None:
    async with embedded(tools=[], settings=FAST) as client:
        given = await client.runs.submit(
            {**SPEC, "id": "mine", "concurrency": {"key": "user-42", "max": 2}}, tenant="acme"
        )
        found = await client.runs.submit(
            {
                **SPEC,
                "metadata": {"user": "user-42"},
                "concurrency": {"key_from": "metadata.user", "max": 2},
            },
            tenant="beta",
        )

        assert given == placed_id(tenant_run_id("acme", "mine"), "acme", "user-42")
        assert found.startswith(placement("beta", "user-42"))
        for run_id in (given, found):
            result = await client.runs.wait(run_id, timeout_s=30)
            assert result.status == "succeeded"
            assert result.concurrency is not None
            assert (result.concurrency.key, result.concurrency.max) == ("user-42", 2)
        # Each tenant's user-42 is its own key; both counters empty once the runs' last
        # jobs end (just after their last transitions).
        counters = (
            keys.concurrency(given, "acme/user-42"),
            keys.concurrency(found, "beta/user-42"),
        )
        assert counters[0] != counters[1]
        await eventually_async(
            lambda: client.redis.exists(*counters), "the slots freed", until=lambda n: n == 0
        )
        # The same id and spec again: the same run, not a second one.
        again = await client.runs.submit(
            {**SPEC, "id": "mine", "concurrency": {"key": "user-42", "max": 2}}, tenant="acme"
        )
        assert again == given


async def test_a_key_from_that_finds_no_key_is_refused_at_submit() -> None:
    async with embedded(tools=[], settings=FAST) as client:
        with pytest.raises(SpecError) as refused:
            await client.runs.submit(
                {**SPEC, "concurrency": {"key_from": "metadata.user", "max": 2}}
            )
        assert refused.value.message == (
            "concurrency.key_from: 'metadata.user' gives None, not a key "
            "(1-128 letters, digits, '_', '.', ':', '@' or '-')"
        )
        assert await client.redis.keys(keys.RUN_PREFIX + "*") == []


async def test_an_unplaced_derived_id_with_a_key_is_refused_where_partitions_split_it() -> None:
    """A sub-agent's child keeps the id derived from its parent's call (a batch's line and
    a schedule's tick are derived placed: tests/orchestrator/batches/
    test_integration_batch_keys.py): counted with one partition, refused with more."""
    spec = {**SPEC, "concurrency": {"key": "user-42", "max": 2}}
    async with embedded(tools=[], settings=FAST) as client:
        keys.use_partitions(keys.CLUSTER_PARTITIONS)
        try:
            with pytest.raises(SpecError, match=r"AGENTQ_PARTITIONS=1\)$"):
                await client.runs.create(spec, tenant="acme", run_id="line-7")
        finally:
            keys.use_partitions(keys.SINGLE_NODE_PARTITIONS)
        run_id, created = await client.runs.create(spec, tenant="acme", run_id="line-7")
        assert (run_id, created) == ("line-7", True)
        assert (await client.runs.wait(run_id, timeout_s=30)).status == "succeeded"
