"""DeltaEvents coalesces text, reasoning and tool-input deltas into events in arrival order."""

from __future__ import annotations

import asyncio
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
        self.attempted = asyncio.Event()  # set by every write, failed or not

    async def emit(self, run_id: str, events: list[str]) -> None:
        self.attempted.set()
        self.batches.append([json.loads(e) for e in events])

    async def next_write(self) -> None:
        await asyncio.wait_for(self.attempted.wait(), 30)
        self.attempted.clear()


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


async def test_what_came_before_a_stall_is_written_when_its_window_ends() -> None:
    store = RecordingStore()
    sink = DeltaEvents(cast(RunStore, store), "r", 0, flush_after_s=0.01)
    await sink.tool_input_start("c1", "add")
    await sink.tool_input_delta("c1", '{"a"')
    # The stream stalls here: no later delta comes to flush what is still held.
    while sink._buffer:
        await store.next_write()  # the window's timer writes it, on this loop
    written = [e for batch in store.batches for e in batch]
    assert [(e["type"], e.get("delta")) for e in written] == [
        ("tool-input-start", None),
        ("tool-input-delta", '{"a"'),
    ]


async def test_a_late_write_that_fails_leaves_its_events_to_the_steps_flush() -> None:
    class Down(RecordingStore):
        fail = True

        async def emit(self, run_id: str, events: list[str]) -> None:
            if self.fail:
                self.attempted.set()
                raise ConnectionError("redis is down")
            await super().emit(run_id, events)

    store = Down()
    sink = DeltaEvents(cast(RunStore, store), "r", 0, flush_after_s=0.01)
    sink._last_flush = float("inf")  # not due at once: held for the window's timer
    await sink.text_delta("It is ")
    await store.next_write()
    assert sink._late is not None
    await sink._late  # failed quietly
    store.fail = False
    await sink.text_delta("3.")
    await sink.flush()
    assert [[e["delta"] for e in b] for b in store.batches] == [["It is 3."]]
