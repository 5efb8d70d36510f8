"""Runs spread over a deployment's partitions, for tests of what must hold across them
(tenant caps, budgets): ids chosen to land in distinct partitions."""

from __future__ import annotations

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.run_ids import tenant_run_id


def spread_ids(tenant: str, n: int) -> list[str]:
    """`n` of the tenant's ids whose runs fall in `n` different partitions."""
    by_partition: dict[int, str] = {}
    for i in range(1000):
        by_partition.setdefault(keys.partition_of(tenant_run_id(tenant, f"r{i}")), f"r{i}")
    return list(by_partition.values())[:n]
