"""Only a worker process freezes its startup heap: an embedded session shares its host's."""

from __future__ import annotations

import gc

import pytest

from agentq.workers.worker.embedded import embedded

pytestmark = pytest.mark.component


async def test_an_embedded_session_leaves_its_hosts_heap_collectable() -> None:
    frozen_before = gc.get_freeze_count()
    async with embedded(tools=[]) as client:
        assert len(await client.fleet.workers()) == 1
    assert gc.get_freeze_count() == frozen_before
