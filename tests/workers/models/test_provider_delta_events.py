"""DeltaEvents coalesces text and reasoning deltas into events in arrival order."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from agentq.orchestrator.runs.store import RunStore
from agentq.workers.steps.sink import DeltaEvents

pytestmark = pytest.mark.unit


class RecordingStore:
    """Keeps what would be appended to the run's events."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    async def emit(self, run_id: str, events: list[str]) -> None:
        self.batches.append([json.loads(e) for e in events])


async def test_runs_of_one_kind_coalesce_and_keep_their_order() -> None:
    store = RecordingStore()
    sink = DeltaEvents(cast(RunStore, store), "r", 3, attempt=2, flush_after_s=3600)
    for kind, delta in [("r", "Let "), ("r", "me see."), ("t", "It is "), ("t", "3."), ("r", "!")]:
        await (sink.reasoning_delta if kind == "r" else sink.text_delta)(delta)
    assert store.batches == []  # nothing before the flush is due
    await sink.flush()
    (batch,) = store.batches
    assert [(e["type"], e["delta"], e["step"], e["attempt"]) for e in batch] == [
        ("reasoning-delta", "Let me see.", 3, 2),
        ("text-delta", "It is 3.", 3, 2),
        ("reasoning-delta", "!", 3, 2),
    ]
