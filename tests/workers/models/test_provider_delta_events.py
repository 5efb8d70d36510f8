"""DeltaEvents coalesces text, reasoning and tool-input deltas into events in arrival order."""

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


async def test_a_call_s_input_pieces_coalesce_per_call_after_its_start() -> None:
    store = RecordingStore()
    sink = DeltaEvents(cast(RunStore, store), "r", 1, attempt=3, flush_after_s=3600)
    await sink.text_delta("Adding.")
    await sink.tool_input_start("c1", "add")
    await sink.tool_input_delta("c1", '{"a":')
    await sink.tool_input_delta("c1", "1}")
    await sink.tool_input_start("c2", "add")
    await sink.tool_input_delta("c2", '{"a":2}')
    await sink.flush()
    (batch,) = store.batches
    assert [
        (e["type"], e.get("tool_call_id"), e.get("tool_name"), e.get("delta"), e["attempt"])
        for e in batch
    ] == [
        ("text-delta", None, None, "Adding.", 3),
        ("tool-input-start", "c1", "add", None, 3),
        ("tool-input-delta", "c1", None, '{"a":1}', 3),
        ("tool-input-start", "c2", "add", None, 3),
        ("tool-input-delta", "c2", None, '{"a":2}', 3),
    ]
